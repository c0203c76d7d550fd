package client_test

import (
	"errors"
	"testing"

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
