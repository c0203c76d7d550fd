package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// ResumeSession checks what it is given before any call, as the
// library's does.
func TestResumeSessionChecks(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ session, token string }{
		{"", "0123456789abcdef"}, {"s", ""}, {"s", "0123456789abcde"}, {"s", "0123456789abcdeg"}, {"s", "0123456789abcdef0"},
	} {
		if _, err := c.ResumeSession("q", bad.session, bad.token, nil); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("ResumeSession(%q, %q) = %v, want ErrInvalidArgument", bad.session, bad.token, err)
		}
	}
	if _, err := c.ResumeSession("q", "s", "0123456789abcdef", &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter}); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Errorf("ResumeSession of a dead-letter queue = %v, want ErrInvalidArgument", err)
	}
	if s, err := c.ResumeSession("q", "s", "0123456789ABCDEF", nil); err != nil || s.SessionID() != "s" || s.LockToken() != "0123456789ABCDEF" {
		t.Errorf("ResumeSession = %v, %v", s, err)
	}
}

// A receiver's lock duration travels with each call that locks:
// receives, deferred receives, renewals, session accepts and session
// renewals lock for it through a server, not for the entity's; one out of
// range is refused.
func TestRemoteReceiverLockDuration(t *testing.T) {
	forEachRemote(t, func(t *testing.T, c *client.Client) {
		ctx := t.Context()
		const lock = 2 * time.Hour
		near := func(what string, until time.Time) {
			t.Helper()
			if d := time.Until(until); d < lock-10*time.Minute || d > lock+10*time.Minute {
				t.Errorf("%s: locked for %v, want about %v", what, d.Round(time.Second), lock)
			}
		}
		queueWith(t, c, "slow", &sluice.QueueProperties{LockDuration: 30 * time.Second}, "a", "b")
		opts := &sluice.ReceiverOptions{LockDuration: lock}
		r, err := c.NewReceiver("slow", opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Receive(ctx, 2)
		if err != nil || len(got) != 2 {
			t.Fatalf("Receive = %d messages, %v", len(got), err)
		}
		near("a receive", got[0].LockedUntil)
		if err := r.RenewLock(ctx, got[0]); err != nil {
			t.Fatal(err)
		}
		near("a renewal", got[0].LockedUntil)
		if err := r.Defer(ctx, got[1], nil); err != nil {
			t.Fatal(err)
		}
		deferred, err := r.ReceiveDeferred(ctx, got[1].SequenceNumber)
		if err != nil || len(deferred) != 1 {
			t.Fatalf("ReceiveDeferred = %d messages, %v", len(deferred), err)
		}
		near("a deferred receive", deferred[0].LockedUntil)

		if _, err := c.CreateQueue(ctx, "sessions", &sluice.QueueProperties{RequiresSession: true, LockDuration: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
		s, err := c.NewSender("sessions")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(ctx, &sluice.Message{SessionID: "s1", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		sess, err := c.AcceptNextSession(ctx, "sessions", opts)
		if err != nil {
			t.Fatal(err)
		}
		near("a session accept", sess.LockedUntil())
		if err := sess.RenewSessionLock(ctx); err != nil {
			t.Fatal(err)
		}
		near("a session renewal", sess.LockedUntil())

		for _, bad := range []time.Duration{-time.Second, time.Microsecond, sluice.MaxReceiverLockDuration + time.Second} {
			if _, err := c.NewReceiver("slow", &sluice.ReceiverOptions{LockDuration: bad}); !errors.Is(err, sluice.ErrInvalidArgument) {
				t.Errorf("NewReceiver with a lock duration of %v = %v, want ErrInvalidArgument", bad, err)
			}
			if _, err := c.AcceptSession(ctx, "sessions", "s1", &sluice.ReceiverOptions{LockDuration: bad}); !errors.Is(err, sluice.ErrInvalidArgument) {
				t.Errorf("AcceptSession with a lock duration of %v = %v, want ErrInvalidArgument", bad, err)
			}
		}
	})
}

// Release through a server hands a message back without counting a
// delivery, as the library's does.
func TestRemoteRelease(t *testing.T) {
	forEachRemote(t, func(t *testing.T, c *client.Client) {
		ctx := t.Context()
		queueWith(t, c, "ahead", &sluice.QueueProperties{MaxDeliveryCount: 1}, "a", "b")
		r, err := c.NewReceiver("ahead", nil)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, err := r.Receive(rctx, 2)
		if err != nil || len(got) != 2 {
			t.Fatalf("Receive = %d, %v", len(got), err)
		}
		if err := r.Release(ctx, got[1]); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := r.Release(ctx, got[1]); !errors.Is(err, sluice.ErrLockLost) {
			t.Fatalf("Release of a released message = %v, want ErrLockLost", err)
		}
		again, err := r.Receive(rctx, 1)
		if err != nil || len(again) != 1 || string(again[0].Body) != "b" || again[0].DeliveryCount != 1 {
			t.Fatalf("after the release: %v, %v; want b on delivery 1 (a queue of one delivery would have dead-lettered it)", again, err)
		}

	})
}
