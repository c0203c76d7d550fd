package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// 1,000 receivers long-poll one queue of one server at once, each on a
// connection of its own; 1,000 messages sent meanwhile reach exactly one
// receiver each, and no call fails. A stall fails it, not a slow
// machine: the receivers are cancelled once loadStall passes with none
// of them finishing (on a loaded 2-core machine with -race, MariaDB took
// over 60 s for all 1,000, each finishing well within a second of the
// last).
func TestManyLongPolls(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test")
	}
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		ctx := t.Context()
		if _, err := e.Lib.CreateQueue(ctx, "busy", nil); err != nil {
			t.Fatal(err)
		}
		const receivers = 1000
		transport := &http.Transport{MaxIdleConnsPerHost: receivers}
		defer transport.CloseIdleConnections()
		c := e.Remote(t, &client.Options{HTTPClient: &http.Client{Transport: transport}})
		var (
			waiting  atomic.Int64
			finished atomic.Int64
			failures atomic.Int64
			mu       sync.Mutex
			got      = make(map[string]int)
			firstErr error
			wg       sync.WaitGroup
		)
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for range receivers {
			wg.Go(func() {
				defer finished.Add(1)
				r, _ := c.NewReceiver("busy", nil)
				waiting.Add(1)
				ms, err := r.Receive(rctx, 1)
				if err == nil {
					err = r.Complete(rctx, ms[0])
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures.Add(1)
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				got[string(ms[0].Body)]++
			})
		}
		for waiting.Load() < receivers {
			time.Sleep(10 * time.Millisecond)
		}
		// Every receiver's call waits on the server at once.
		waitFor(t, "1,000 receives in flight on the server", 2*time.Minute, func() bool {
			_, metrics := scrape(t, e, "")
			var n float64
			for line := range strings.Lines(metrics) {
				if v, ok := strings.CutPrefix(line, "sluice_api_calls_in_flight "); ok {
					n, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
				}
			}
			return n >= receivers
		})
		snd, _ := c.NewSender("busy")
		began := time.Now()
		for b := range receivers / 100 {
			batch := make([]*sluice.Message, 100)
			for i := range batch {
				batch[i] = &sluice.Message{Body: []byte(fmt.Sprint(b*100 + i))}
			}
			if _, err := snd.SendBatch(ctx, batch); err != nil {
				t.Fatalf("SendBatch: %v", err)
			}
		}
		if stalled := waitProgress(&wg, &finished, loadStall); stalled {
			cancel()
			wg.Wait()
			t.Errorf("no receiver finished for %v: cancelled the %d left", loadStall, receivers-finished.Load())
		}
		if failures.Load() > 0 {
			t.Fatalf("%d of %d long-polling receivers failed; the first: %v", failures.Load(), receivers, firstErr)
		}
		if len(got) != receivers {
			t.Fatalf("%d distinct messages received by %d receivers", len(got), receivers)
		}
		for body, n := range got {
			if n != 1 {
				t.Fatalf("message %s received %d times", body, n)
			}
		}
		t.Logf("%s: %d long-polling receivers got the %d messages sent in %v, without an error",
			kind, receivers, receivers, time.Since(began).Round(time.Millisecond))
		if st, _ := e.Lib.GetQueueStats(ctx, "busy"); st != (sluice.QueueStats{}) {
			t.Fatalf("left in the queue: %+v", st)
		}
	})
}

// loadStall is how long a load test waits without progress before it
// gives up.
const loadStall = 30 * time.Second

// waitProgress waits for wg, and returns true if stall passed with done
// unchanged first.
func waitProgress(wg *sync.WaitGroup, done *atomic.Int64, stall time.Duration) (stalled bool) {
	all := make(chan struct{})
	go func() {
		wg.Wait()
		close(all)
	}()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last, lastAt := done.Load(), time.Now()
	for {
		select {
		case <-all:
			return false
		case now := <-tick.C:
			if n := done.Load(); n != last {
				last, lastAt = n, now
			} else if now.Sub(lastAt) > stall {
				return true
			}
		}
	}
}
