package server_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// A key's waiting calls are bounded: with MaxWaits at 2, a third receive
// that waits is refused with RESOURCE_EXHAUSTED, one that does not wait
// is served, another key has a bound of its own, and a wait that ends
// makes room.
func TestWaitsPerKey(t *testing.T) {
	const small, other = "small-token-0123456789", "other-token-0123456789"
	all := []server.Grant{{Actions: server.All, Entities: []string{"*"}}}
	e := start(t, "sqlite", server.Config{Keys: []server.Key{
		{Name: "small", Token: small, MaxWaits: 2, Grants: all},
		{Name: "other", Token: other, Grants: all},
	}})
	ctx := t.Context()
	if _, err := e.Lib.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	c := e.Remote(t, &client.Options{Token: small})
	// Two receives wait, each until its own context ends.
	var wg sync.WaitGroup
	cancels := make([]context.CancelFunc, 2)
	errs := make([]error, 2)
	for i := range cancels {
		rctx, cancel := context.WithTimeout(ctx, 50*time.Second)
		cancels[i] = cancel
		defer cancel()
		r, err := c.NewReceiver("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _, errs[i] = r.Receive(rctx, 1) })
	}
	waitFor(t, "two receives waiting on the server", 10*time.Second, func() bool {
		_, metrics := scrape(t, e, small)
		for line := range strings.Lines(metrics) {
			if v, ok := strings.CutPrefix(line, "sluice_api_calls_in_flight "); ok {
				n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return n >= 2
			}
		}
		return false
	})

	status, ce := post(t, e, "MessagingService/Receive", small, `{"entity":"q","maxWait":"1s"}`)
	wantStatus(t, "a third waiting receive", status, ce, http.StatusTooManyRequests, "resource_exhausted", "TOO_MANY_WAITS", "at most 2 allowed")
	status, ce = post(t, e, "MessagingService/AcceptSession", small, `{"entity":"q","maxWait":"1s"}`)
	wantStatus(t, "a third waiting accept", status, ce, http.StatusTooManyRequests, "resource_exhausted", "TOO_MANY_WAITS", "at most 2 allowed")
	if status, raw := postRaw(t, e, "MessagingService/Receive", small, `{"entity":"q"}`); status != http.StatusOK {
		t.Fatalf("a receive that does not wait: %d %s", status, raw)
	}
	if status, raw := postRaw(t, e, "MessagingService/Receive", other, `{"entity":"q","maxWait":"0.1s"}`); status != http.StatusOK {
		t.Fatalf("another key's waiting receive: %d %s", status, raw)
	}

	// A wait that ends gives its room back.
	cancels[0]()
	waitFor(t, "room for a wait", 10*time.Second, func() bool {
		status, _ := postRaw(t, e, "MessagingService/Receive", small, `{"entity":"q","maxWait":"0.1s"}`)
		return status == http.StatusOK
	})
	cancels[1]()
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("waiting receive %d ended with %v, want its context's end", i, err)
		}
	}
}
