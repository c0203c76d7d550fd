package server_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// historyInterval is how often the history tests' servers sample.
const historyInterval = 100 * time.Millisecond

// The server samples an entity's counts and its own rates of messages
// sent, received and settled per entity; a deleted entity's history
// goes with it; a missing one is NOT_FOUND.
func TestEntityHistory(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{HistoryInterval: historyInterval})
		ctx := t.Context()
		c := e.Remote(t, nil)
		if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
			t.Fatal(err)
		}
		// Once the queue is sampled, the rates of the sample before
		// cover every message counted since.
		waitFor(t, "sample of orders", 30*time.Second, func() bool {
			_, s, err := c.EntityHistory(ctx, "orders")
			return err == nil && len(s) > 0
		})
		snd, _ := c.NewSender("orders")
		if _, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}); err != nil {
			t.Fatal(err)
		}
		r, _ := c.NewReceiver("orders", nil)
		got, err := r.Receive(ctx, 2)
		if err != nil || len(got) != 2 {
			t.Fatalf("Receive = %v, %v", got, err)
		}
		if err := r.Complete(ctx, got[0]); err != nil {
			t.Fatal(err)
		}
		// The rates of the calls above show in a sample, and a later
		// sample counts one active and one in flight.
		var samples []client.EntitySample
		var interval time.Duration
		rated := func(s client.EntitySample) bool { return s.Sent > 0 }
		waitFor(t, "sample of the rates and the counts", 30*time.Second, func() bool {
			interval, samples, err = c.EntityHistory(ctx, "Orders")
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(samples, rated)
			return i >= 0 && slices.ContainsFunc(samples[i:], func(s client.EntitySample) bool { return s.Active == 1 && s.InFlight == 1 })
		})
		if interval != historyInterval {
			t.Errorf("interval %v, want %v", interval, historyInterval)
		}
		var sent, received, settled float64
		for i, s := range samples {
			if i > 0 && !s.At.After(samples[i-1].At) {
				t.Fatalf("samples not oldest first: %v then %v", samples[i-1].At, s.At)
			}
			// A rate times the time since the sample before is the
			// messages counted then (none before the first).
			if i > 0 {
				secs := s.At.Sub(samples[i-1].At).Seconds()
				sent, received, settled = sent+s.Sent*secs, received+s.Received*secs, settled+s.Settled*secs
			}
		}
		if !near(sent, 3) || !near(received, 2) || !near(settled, 1) {
			t.Errorf("the rates add up to %.2f sent, %.2f received, %.2f settled; want 3, 2, 1 (%+v)", sent, received, settled, samples)
		}

		// A missing entity, and one deleted: NOT_FOUND.
		if _, _, err := c.EntityHistory(ctx, "nosuchqueue"); !errors.Is(err, sluice.ErrEntityNotFound) {
			t.Errorf("the history of a missing queue: %v", err)
		}
		if err := c.DeleteQueue(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
		if _, s, err := c.EntityHistory(ctx, "orders"); !errors.Is(err, sluice.ErrEntityNotFound) {
			t.Errorf("the history of a deleted queue: %d samples, %v", len(s), err)
		}
		// One deleted by another process goes at the next sample.
		if _, err := e.Lib.CreateQueue(ctx, "elsewhere", nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "sample of elsewhere", 30*time.Second, func() bool {
			_, s, err := c.EntityHistory(ctx, "elsewhere")
			return err == nil && len(s) > 0
		})
		if err := e.Lib.DeleteQueue(ctx, "elsewhere"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "sample without elsewhere", 30*time.Second, func() bool {
			_, _, err := c.EntityHistory(ctx, "elsewhere")
			return errors.Is(err, sluice.ErrEntityNotFound)
		})
	})
}

// near reports whether a count added up from rates is n (the rates are
// float32).
func near(v, n float64) bool { return v > n-0.001 && v < n+0.001 }

// The server samples each consumer's lag in each namespace and each
// stream subscription's: a subscription nobody delivers lags by what is
// published to it.
func TestStreamLagHistory(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{HistoryInterval: historyInterval})
		ctx := t.Context()
		c := e.Remote(t, nil)
		interval, none, err := c.ConsumerLagHistory(ctx, "", 0)
		if err != nil || len(none) != 0 || interval != historyInterval {
			t.Fatalf("with no subscriptions: %v, %+v, %v", interval, none, err)
		}
		id := sluice.StreamID{Namespace: "ledger", Key: "k1"}
		sub, err := e.Lib.Subscribe(ctx, id, "ghost", sluice.FromBeginning())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Lib.Publish(ctx, id, sluice.Event{Body: []byte("1")}, sluice.Event{Body: []byte("2")}, sluice.Event{Body: []byte("3")}); err != nil {
			t.Fatal(err)
		}
		var series []client.ConsumerLagHistory
		waitFor(t, "sample of ghost lagging by 3", 30*time.Second, func() bool {
			_, series, err = c.ConsumerLagHistory(ctx, "GHOST", 0)
			if err != nil {
				t.Fatal(err)
			}
			return len(series) == 1 && series[0].Samples[len(series[0].Samples)-1].Lag == 3
		})
		if h := series[0]; h.Consumer != "ghost" || h.Namespace != "ledger" || h.Group != "" {
			t.Errorf("ghost's series: %+v", h)
		}
		_, h, err := c.SubscriptionLagHistory(ctx, sub.ID)
		if err != nil || h.ID != sub.ID || h.Consumer != "ghost" || h.Namespace != "ledger" || h.Key != "k1" || len(h.Samples) == 0 ||
			h.Samples[len(h.Samples)-1].Lag != 3 {
			t.Errorf("the subscription's series: %+v, %v", h, err)
		}
		if _, _, err := c.SubscriptionLagHistory(ctx, "no-such-subscription"); !errors.Is(err, sluice.ErrSubscriptionNotFound) {
			t.Errorf("the history of a missing subscription: %v", err)
		}
		if _, _, err := c.ConsumerLagHistory(ctx, "", 1001); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("max 1001: %v", err)
		}
		// Unsubscribed: its series goes at the next sample.
		if err := e.Lib.Unsubscribe(ctx, sub.ID); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "sample without ghost", 30*time.Second, func() bool {
			_, series, err = c.ConsumerLagHistory(ctx, "ghost", 0)
			return err == nil && len(series) == 0
		})
		if _, _, err := c.SubscriptionLagHistory(ctx, sub.ID); !errors.Is(err, sluice.ErrSubscriptionNotFound) {
			t.Errorf("the history of a subscription unsubscribed: %v", err)
		}
	})
}

// HistoryInterval's bounds: zero or negative is the default, and the
// interval is at least 100 ms and at most 5 min.
func TestHistoryInterval(t *testing.T) {
	t.Parallel()
	for set, want := range map[time.Duration]time.Duration{0: server.DefaultHistoryInterval, -time.Second: server.DefaultHistoryInterval,
		time.Nanosecond: 100 * time.Millisecond, 42 * time.Second: 42 * time.Second, 24 * time.Hour: 5 * time.Minute} {
		e := start(t, "sqlite", server.Config{HistoryInterval: set})
		got, _, err := e.Remote(t, nil).ConsumerLagHistory(t.Context(), "", 0)
		if err != nil || got != want {
			t.Errorf("HistoryInterval %v: the server samples every %v (%v), want %v", set, got, err, want)
		}
	}
}

// An entity that exists but has not been sampled yet has a history of
// no samples, not NOT_FOUND.
func TestEntityHistoryNotSampledYet(t *testing.T) {
	t.Parallel()
	e := start(t, "sqlite", server.Config{HistoryInterval: 5 * time.Minute})
	c := e.Remote(t, nil)
	if _, err := c.CreateQueue(t.Context(), "fresh", nil); err != nil {
		t.Fatal(err)
	}
	interval, samples, err := c.EntityHistory(t.Context(), "fresh")
	if err != nil || interval != 5*time.Minute || len(samples) != 0 {
		t.Errorf("the history of a queue not sampled yet: %v, %+v, %v", interval, samples, err)
	}
	if _, _, err := c.EntityHistory(t.Context(), "bad name!"); !errors.Is(err, sluice.ErrInvalidName) {
		t.Errorf("the history of an invalid name: %v", err)
	}
}
