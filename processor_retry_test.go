package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A failed handler's message comes back after the retry policy's delay,
// or a RetryAfter's, and its last allowed delivery is dead-lettered.
func TestProcessorRetry(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{MaxDeliveryCount: 3})
		send(t, newSender(t, c, q), "policy", "asks")
		const (
			initial = 300 * time.Millisecond
			asked   = 1200 * time.Millisecond
			margin  = 100 * time.Millisecond // database clock against ours
		)
		var (
			mu   sync.Mutex
			seen = map[string][]time.Time{}
		)
		busy := errors.New("busy")
		h := func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			mu.Lock()
			seen[string(m.Body)] = append(seen[string(m.Body)], time.Now())
			mu.Unlock()
			if string(m.Body) == "asks" {
				if m.DeliveryCount == 1 {
					return sluice.RetryAfter(busy, asked)
				}
				return nil
			}
			return busy
		}
		p := startProcessor(t, c, q, h, &sluice.ProcessorOptions{
			MaxConcurrent: 2,
			Retry:         sluice.ExponentialBackoff{Initial: initial, Max: 2 * initial},
			OnError:       func(error) {},
		})
		waitUntil(t, "one completed and one dead-lettered", func() bool {
			st, err := c.GetQueueStats(ctx, q)
			return err == nil && st.DeadLettered == 1 && st.Active+st.InFlight+st.Scheduled == 0
		})
		stop(t, p)
		mu.Lock()
		defer mu.Unlock()
		pol, ask := seen["policy"], seen["asks"]
		if len(pol) != 3 || len(ask) != 2 {
			t.Fatalf("deliveries: policy %d, asks %d; want 3 and 2", len(pol), len(ask))
		}
		if gap := pol[1].Sub(pol[0]); gap < initial-margin {
			t.Fatalf("second delivery %v after the first failed, want at least %v", gap, initial)
		}
		if gap := pol[2].Sub(pol[1]); gap < 2*initial-margin {
			t.Fatalf("third delivery %v after the second failed, want at least %v", gap, 2*initial)
		}
		if gap := ask[1].Sub(ask[0]); gap < asked-margin {
			t.Fatalf("RetryAfter(%v): delivered again after %v", asked, gap)
		}
	})
}

// A RetryFunc that returns a negative delay delivers the message again at
// once rather than failing its abandon.
func TestProcessorRetryNegative(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "m")
		var (
			mu     sync.Mutex
			counts []int
			errs   []error
		)
		h := func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			mu.Lock()
			defer mu.Unlock()
			counts = append(counts, m.DeliveryCount)
			if m.DeliveryCount == 1 {
				return errors.New("first try fails")
			}
			return nil
		}
		p := startProcessor(t, c, q, h, &sluice.ProcessorOptions{
			Retry: sluice.RetryFunc(func(int, error) time.Duration { return -time.Hour }),
			OnError: func(err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			},
		})
		waitUntil(t, "the second delivery", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(counts) == 2
		})
		stop(t, p)
		mu.Lock()
		defer mu.Unlock()
		for _, err := range errs {
			if errors.Is(err, sluice.ErrInvalidArgument) {
				t.Fatalf("a negative retry delay failed the abandon: %v", err)
			}
		}
	})
}

func TestProcessorRetryValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, nil)
		h := func(context.Context, *sluice.Receiver, *sluice.ReceivedMessage) error { return nil }
		for _, b := range []sluice.ExponentialBackoff{
			{Initial: -time.Nanosecond},
			{Initial: time.Second, Max: -time.Nanosecond},
			{Initial: 2 * time.Second, Max: time.Second},
			{Initial: time.Second, Multiplier: 0.5},
			{Initial: time.Second, Multiplier: -2},
			{Initial: time.Second, Multiplier: math.NaN()},
			{Initial: time.Second, Multiplier: math.Inf(1)},
		} {
			_, err := c.NewProcessor(q, h, &sluice.ProcessorOptions{Retry: b})
			wantErr(t, fmt.Sprintf("NewProcessor with retry %+v", b), err, sluice.ErrInvalidArgument)
			_, err = c.NewProcessor(q, h, &sluice.ProcessorOptions{Retry: &b})
			wantErr(t, fmt.Sprintf("NewProcessor with retry &%+v", b), err, sluice.ErrInvalidArgument)
		}
		for _, b := range []sluice.ExponentialBackoff{
			{},
			{Initial: time.Second},
			{Initial: time.Second, Max: time.Second, Multiplier: 1},
			{Initial: sluice.Forever, Max: sluice.Forever, Multiplier: math.MaxFloat64, Jitter: true},
		} {
			if _, err := c.NewProcessor(q, h, &sluice.ProcessorOptions{Retry: b}); err != nil {
				t.Fatalf("NewProcessor with retry %+v: %v", b, err)
			}
		}
	})
}
