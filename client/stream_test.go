package client_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/libtest"
)

// The network client's StreamProcessor applies its Middleware as the
// library's does: TimeoutStream ends the handler's context after d with
// cause ErrHandlerTimeout, the attempt's error (as a middleware outside
// it sees) wraps it, and the server delivers the event again.
func TestRemoteStreamTimeout(t *testing.T) {
	forEachRemote(t, func(t *testing.T, c *client.Client) {
		var mu sync.Mutex
		var attempts []int
		var errs []error
		outer := func(next sluice.StreamHandler) sluice.StreamHandler {
			return func(ctx context.Context, ev *sluice.StreamEvent) error {
				err := next(ctx, ev)
				mu.Lock()
				defer mu.Unlock()
				attempts, errs = append(attempts, ev.Attempt), append(errs, err)
				return err
			}
		}
		h := func(ctx context.Context, ev *sluice.StreamEvent) error {
			if ev.Attempt > 1 {
				return nil
			}
			return libtest.AwaitHandlerTimeout(ctx)
		}
		p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{
			Middleware: []sluice.StreamMiddleware{outer, sluice.TimeoutStream(100 * time.Millisecond)},
		})
		if err := p.Handle("slow", h, &sluice.ConsumerOptions{Namespace: "slow", RetryBackoff: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p.Stop(ctx)
		}()
		if _, err := c.Publish(t.Context(), sluice.StreamID{Namespace: "slow", Key: "k"}, sluice.Event{Body: []byte("slow")}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the event handled on its second attempt", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(attempts) >= 2
		})
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(attempts, []int{1, 2}) || errs[1] != nil {
			t.Fatalf("attempts %v with errors %v, want [1 2], the second without error", attempts, errs)
		}
		if !errors.Is(errs[0], sluice.ErrHandlerTimeout) || !errors.Is(errs[0], context.DeadlineExceeded) {
			t.Fatalf("the first attempt's error %v, want one wrapping ErrHandlerTimeout and DeadlineExceeded", errs[0])
		}
	})
}
