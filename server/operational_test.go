package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server"
)

// /metrics and /readyz cost the database a bounded read however often
// they are asked: scrapes at once, and scrapes soon after, share one
// read of the entities' figures, and probes of readiness share one
// lookup a second.
func TestOperationalEndpointsCostBounded(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e, b := startCounting(t, kind, server.Config{})
		const queues = 30
		for i := range queues {
			if _, err := e.Lib.CreateQueue(t.Context(), fmt.Sprintf("q-%02d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		before := b.reads.Load()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if status, _ := scrape(t, e, ""); status != http.StatusOK {
					t.Errorf("/metrics: %d", status)
				}
			})
		}
		wg.Wait()
		if status, body := scrape(t, e, ""); status != http.StatusOK || !strings.Contains(body, `sluice_entity_messages{entity="q-29",state="active"} 0`) {
			t.Fatalf("/metrics: %d, without q-29's depth", status)
		}
		// One read: a listing, a count a queue, the cluster's status.
		if reads := b.reads.Load() - before; reads > queues+5 {
			t.Errorf("9 scrapes read the database %d times; want one scrape's reads (%d queues)", reads, queues)
		}

		began := time.Now()
		before = b.reads.Load()
		for range 5 {
			for range 10 {
				wg.Go(func() {
					if status, body := get(t, e, "/readyz", ""); status != http.StatusOK {
						t.Errorf("/readyz: %d %s", status, body)
					}
				})
			}
			wg.Wait()
		}
		seconds := int64(time.Since(began)/time.Second) + 1
		if reads := b.reads.Load() - before; reads > seconds {
			t.Errorf("50 probes of /readyz in under %d s read the database %d times; want at most one a second", seconds, reads)
		}
	})
}

// checkOperational checks /metrics and /readyz on the every-RPC
// server: /metrics authenticates as the API does (a bearer token only)
// and within the key's rate limit; /readyz asks for no credentials.
func checkOperational(t *testing.T, e *env) {
	for _, c := range []struct {
		what, authorization string
		want                int
	}{
		{"no credentials", "", http.StatusUnauthorized},
		{"a bare token", rpcAdmin, http.StatusUnauthorized},
		{"Basic", "Basic " + rpcAdmin, http.StatusUnauthorized},
		{"an empty bearer token", "Bearer ", http.StatusUnauthorized},
		{"a key without manage on $metrics", "Bearer " + rpcNarrow, http.StatusForbidden},
		{"the admin", "Bearer " + rpcAdmin, http.StatusOK},
		{"a metered key", "Bearer " + rpcMetered, http.StatusOK},
		{"a metered key over its limit", "Bearer " + rpcMetered, http.StatusTooManyRequests},
	} {
		if status, body := get(t, e, "/metrics", c.authorization); status != c.want {
			t.Errorf("/metrics with %s: %d %.200s; want %d", c.what, status, body, c.want)
		}
	}
	if status, body := get(t, e, "/readyz", ""); status != http.StatusOK {
		t.Errorf("/readyz without credentials: %d %s", status, body)
	}
}

// rpcMetered may read /metrics once in a long while.
const rpcMetered = "rpc-metered-token-0123456789"

// get sends a GET with an Authorization header when given, and returns
// the status and body.
func get(t *testing.T, e *env, path, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body)
}
