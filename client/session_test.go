package client_test

import (
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
