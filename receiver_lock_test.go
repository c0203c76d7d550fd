package sluice_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestReceiverLockDuration checks that ReceiverOptions.LockDuration, not
// the queue's, sets how long a receiver's receives, renewals and session
// accepts lock, both past the queue's longest lock and below its
// shortest, and that values outside its range are refused.
func TestReceiverLockDuration(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: time.Second})
		send(t, newSender(t, c, q), "long", "short")

		// Longer than any queue may lock: the database's clock and this
		// one may differ by seconds, not by the 59 minutes asked for.
		long, err := c.NewReceiver(q, &sluice.ReceiverOptions{LockDuration: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ms := receive(t, long, 1)
		if len(ms) != 1 || time.Until(ms[0].LockedUntil) < 30*time.Minute {
			t.Fatalf("receive with a lock of an hour: %d messages, locked until %v (now %v)", len(ms), ms[0].LockedUntil, time.Now())
		}
		m := ms[0]
		// Renewed by the receiver's lock too, not the queue's second.
		if err := long.RenewLock(ctx, m); err != nil || time.Until(m.LockedUntil) < 30*time.Minute {
			t.Fatalf("RenewLock = %v, locked until %v; want an hour from now", err, m.LockedUntil)
		}

		// Shorter than any queue may lock: the message is delivered again
		// as soon as its 50 ms lock ends, while the hour-long one stays
		// locked.
		short, err := c.NewReceiver(q, &sluice.ReceiverOptions{LockDuration: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		first := receive(t, short, 10)
		if len(first) != 1 || string(first[0].Body) != "short" {
			t.Fatalf("first receive with a 50 ms lock = %q, want [short]", bodies(first))
		}
		again := receive(t, short, 10)
		if len(again) != 1 || string(again[0].Body) != "short" || again[0].DeliveryCount != 2 {
			t.Fatalf("receive after the 50 ms lock ended = %q (delivery %d), want [short] a second time", bodies(again), again[0].DeliveryCount)
		}
		if err := long.Complete(ctx, m); err != nil {
			t.Fatalf("Complete under the hour-long lock: %v", err)
		}

		sq := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
		if _, err := newSender(t, c, sq).Send(ctx, &sluice.Message{Body: []byte("s"), SessionID: "a"}); err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s, err := c.AcceptNextSession(actx, sq, &sluice.ReceiverOptions{LockDuration: time.Hour})
		if err != nil {
			t.Fatalf("AcceptNextSession: %v", err)
		}
		if time.Until(s.LockedUntil()) < 30*time.Minute {
			t.Fatalf("session accepted with a lock of an hour is locked until %v (now %v)", s.LockedUntil(), time.Now())
		}
		if err := s.RenewSessionLock(ctx); err != nil || time.Until(s.LockedUntil()) < 30*time.Minute {
			t.Fatalf("RenewSessionLock = %v, locked until %v; want an hour from now", err, s.LockedUntil())
		}

		for _, d := range []time.Duration{-time.Second, time.Microsecond, sluice.MaxReceiverLockDuration + time.Nanosecond} {
			_, err := c.NewReceiver(q, &sluice.ReceiverOptions{LockDuration: d})
			wantErr(t, fmt.Sprintf("NewReceiver with a lock duration of %v", d), err, sluice.ErrInvalidArgument)
		}
	})
}
