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

// A receiver lock duration, which the network API cannot carry yet, is
// refused rather than silently replaced by the entity's.
func TestReceiverLockDurationRefused(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := &sluice.ReceiverOptions{LockDuration: time.Hour}
	if _, err := c.NewReceiver("q", opts); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Errorf("NewReceiver with a lock duration = %v, want ErrInvalidArgument", err)
	}
	if _, err := c.AcceptSession(t.Context(), "q", "s", opts); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Errorf("AcceptSession with a lock duration = %v, want ErrInvalidArgument", err)
	}
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
