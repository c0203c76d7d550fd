package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
)

// TestRetry checks the transaction retry loop's limits: a retryable
// failure is tried again up to maxRetries times and then reported as
// ErrContention; any other outcome ends it at once.
func TestRetry(t *testing.T) {
	e := &Engine{d: &Dialect{Classify: func(error) error { return nil }}, log: slog.New(slog.DiscardHandler)}
	retryable := fmt.Errorf("deadlock: %w", ErrRetry)
	other := errors.New("constraint")
	for _, c := range []struct {
		name      string
		fails     int   // retryable failures before fn succeeds
		final     error // what fn returns once it stops failing
		wantCalls int
		want      error
	}{
		{"success at once", 0, nil, 1, nil},
		{"success after retries", 3, nil, 4, nil},
		{"success on the last retry", maxRetries, nil, maxRetries + 1, nil},
		{"contention", maxRetries + 1, nil, maxRetries + 1, sluicetype.ErrContention},
		{"other error at once", 0, other, 1, other},
		{"other error after a retry", 1, other, 2, other},
	} {
		calls := 0
		err := e.retry(context.Background(), func() error {
			calls++
			if calls <= c.fails {
				return retryable
			}
			return c.final
		})
		if calls != c.wantCalls || (c.want == nil) != (err == nil) || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %d calls, err %v; want %d calls, err %v", c.name, calls, err, c.wantCalls, c.want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := e.retry(ctx, func() error { calls++; cancel(); return retryable })
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("cancelled while retrying: %d calls, err %v; want 1 call and context.Canceled", calls, err)
	}
}
