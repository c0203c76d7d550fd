package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// An abandon with a delay hides the message that long, by the database's
// clock, and counts a delivery; peek and the counts show it as scheduled
// meanwhile. A negative delay changes nothing; Forever saturates.
func TestAbandonDelay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "later", "never")
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms, err := r.Receive(ctx, 2)
		if err != nil || len(ms) != 2 {
			t.Fatalf("Receive: %d messages, %v", len(ms), err)
		}
		wantErr(t, "Abandon with a negative delay", r.Abandon(ctx, ms[0], &sluice.AbandonOptions{Delay: -time.Nanosecond}), sluice.ErrInvalidArgument)
		if st, _ := c.GetQueueStats(ctx, q); st.InFlight != 2 {
			t.Fatalf("after a refused abandon: %+v, want both messages still locked", st)
		}

		const delay = 1500 * time.Millisecond
		start := time.Now()
		if err := r.Abandon(ctx, ms[0], &sluice.AbandonOptions{Delay: delay}); err != nil {
			t.Fatalf("Abandon with delay %v: %v", delay, err)
		}
		if err := r.Abandon(ctx, ms[1], &sluice.AbandonOptions{Delay: sluice.Forever}); err != nil {
			t.Fatalf("Abandon with delay Forever: %v", err)
		}
		peeked, err := r.Peek(ctx, 10, nil)
		if err != nil || len(peeked) != 2 || peeked[0].State != sluice.StateScheduled || peeked[1].State != sluice.StateScheduled {
			t.Fatalf("Peek after delayed abandons: %v, %v; want two scheduled messages", peeked, err)
		}
		if peeked[0].DeliveryCount != 1 || !peeked[0].ScheduledEnqueueTime.IsZero() {
			t.Fatalf("peeked delayed message: delivery %d, scheduled enqueue time %v; want 1 and none (it keeps its number)",
				peeked[0].DeliveryCount, peeked[0].ScheduledEnqueueTime)
		}
		// The delay ends between the abandon's start plus the delay and
		// now plus the delay (the database's clock may lead by a little).
		if got := peeked[0].DelayedUntil; got.Before(start.Add(delay-time.Second)) || got.After(time.Now().Add(delay+time.Second)) {
			t.Fatalf("peeked delayed message: delayed until %v, want about %v", got, start.Add(delay))
		}
		if !peeked[1].DelayedUntil.After(time.Now().Add(100 * 365 * 24 * time.Hour)) {
			t.Fatalf("peeked message abandoned with delay Forever: delayed until %v, want far in the future", peeked[1].DelayedUntil)
		}
		if st, err := c.GetQueueStats(ctx, q); err != nil || st.Scheduled != 2 || st.Active+st.InFlight != 0 {
			t.Fatalf("stats after delayed abandons: %+v, %v; want two scheduled", st, err)
		}
		found, err := r.Browse(ctx, 10, &sluice.BrowseOptions{Filter: sluice.MessageFilter{States: []sluice.MessageState{sluice.StateScheduled}}})
		if err != nil || len(found.Messages) != 2 {
			t.Fatalf("Browse for scheduled messages after delayed abandons: %d found, %v; want 2", len(found.Messages), err)
		}
		again, err := r.Receive(ctx, 2)
		if e := time.Since(start); e < delay-100*time.Millisecond {
			t.Fatalf("message abandoned with delay %v received again after %v", delay, e)
		}
		if err != nil || len(again) != 1 || string(again[0].Body) != "later" || again[0].DeliveryCount != 2 {
			t.Fatalf("Receive after the delay: %v, %v; want \"later\" on delivery 2", again, err)
		}
		if err := r.Abandon(ctx, again[0], &sluice.AbandonOptions{}); err != nil {
			t.Fatalf("Abandon with delay 0: %v", err)
		}
		now, err := r.TryReceive(ctx, 2)
		if err != nil || len(now) != 1 || now[0].DeliveryCount != 3 {
			t.Fatalf("TryReceive after an abandon without delay: %v, %v; want it at once on delivery 3", now, err)
		}
	})
}

// A dead letter cannot be abandoned with a delay: it has no delivery to
// postpone.
func TestAbandonDelayDeadLetter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "m")
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms, err := r.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.DeadLetter(ctx, ms[0], nil); err != nil {
			t.Fatal(err)
		}
		dr, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		dead, err := dr.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "Abandon of a dead letter with a delay", dr.Abandon(ctx, dead[0], &sluice.AbandonOptions{Delay: time.Second}), sluice.ErrInvalidArgument)
		if err := dr.Abandon(ctx, dead[0], nil); err != nil {
			t.Fatalf("Abandon of a dead letter without delay: %v", err)
		}
	})
}
