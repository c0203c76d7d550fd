package sluice_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestExponentialBackoffDelay(t *testing.T) {
	b := sluice.ExponentialBackoff{Initial: time.Second, Max: 5 * time.Second}
	for n, want := range map[int]time.Duration{0: 0, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 100: 5 * time.Second} {
		if got := b.RetryDelay(n, nil); got != want {
			t.Fatalf("%+v.RetryDelay(%d) = %v, want %v", b, n, got, want)
		}
	}
	b.Jitter = true
	for range 1000 {
		if got := b.RetryDelay(3, nil); got < 2*time.Second || got > 4*time.Second {
			t.Fatalf("jittered RetryDelay(3) = %v, want within [2s, 4s]", got)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	cause := errors.New("rate limited")
	err := sluice.RetryAfter(cause, time.Minute)
	if !errors.Is(err, cause) || err.Error() != "rate limited (retry after 1m0s)" {
		t.Fatalf("RetryAfter(cause, 1m) = %q, want it to wrap the cause", err)
	}
	if err := sluice.RetryAfter(nil, time.Second); err == nil || err.Error() != "retry after 1s" {
		t.Fatalf("RetryAfter(nil, 1s) = %v, want an error saying so", err)
	}
	if err := sluice.RetryAfter(nil, -time.Second); err.Error() != "retry after 0s" {
		t.Fatalf("RetryAfter(nil, -1s) = %v, want a delay of 0", err)
	}
}
