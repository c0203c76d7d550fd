package storetest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// SurviveRestart checks the no-loss promise (docs/architecture.md, "Durability") across a crash of the database:
// eight producers enqueue to a new queue of st while restart crashes the
// database and starts it again (it returns once the database accepts
// connections). Every enqueue that returned nil must be there afterwards,
// and st, never reopened, must enqueue (200 times within 60 s) and lease
// again. A backend test calls it with a private server it may crash.
func SurviveRestart(t *testing.T, st store.Store, restart func(t *testing.T)) {
	t.Helper()
	ctx := t.Context()
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: "restart"}); err != nil {
		t.Fatal(err)
	}
	var (
		acked   sync.Map // payloads of enqueues that returned nil
		okAfter atomic.Int64
		after   atomic.Bool
		next    atomic.Int64
		lastErr atomic.Value
		wg      sync.WaitGroup
	)
	lastErr.Store("none")
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := strconv.FormatInt(next.Add(1), 10)
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := st.Enqueue(cctx, &store.EnqueueParams{Queue: "restart", Messages: []store.NewMessage{{Payload: []byte(p)}}})
				cancel()
				if err != nil {
					lastErr.Store(err.Error())
					time.Sleep(10 * time.Millisecond) // the database is down
					continue
				}
				acked.Store(p, true)
				if after.Load() {
					okAfter.Add(1)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	restart(t)
	after.Store(true)
	deadline := time.Now().Add(60 * time.Second)
	for okAfter.Load() < 200 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if n := okAfter.Load(); n < 200 {
		t.Fatalf("only %d enqueues succeeded within 60 s of the restart; last error: %v", n, lastErr.Load())
	}

	stored := map[string]bool{}
	for _, m := range peekAll(t, ctx, st, "restart") {
		stored[string(m.Payload)] = true
	}
	var lost []string
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if !stored[k.(string)] {
			lost = append(lost, k.(string))
		}
		return true
	})
	if len(lost) > 0 {
		slices.Sort(lost)
		t.Fatalf("%d of %d acknowledged enqueues are missing after the restart: %v", len(lost), n, lost[:min(len(lost), 20)])
	}
	got, err := st.Lease(ctx, &store.LeaseParams{Queue: "restart", Max: 10, Visibility: time.Minute})
	if err != nil || len(got) == 0 {
		t.Fatalf("Lease after the restart: %d messages, %v", len(got), err)
	}
	t.Logf("%d acknowledged enqueues, all present after the restart (%d stored)", n, len(stored))
}
