// Package backoff holds the module's one retry formula and the loop that
// waits by it: exponential growth from an initial delay, capped, with
// optional equal jitter.
//
// Equal jitter (a delay drawn uniformly from the upper half of the
// nominal step, [d/2, d]) is chosen over full jitter ([0, d]): it still
// spreads retries that started together, yet never waits less than half
// the step, so a reconnect loop facing a dead database cannot spin and a
// caller who asks for "about a minute" never gets a few milliseconds.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// DefaultMultiplier is the growth factor of a Policy whose Multiplier is 0.
const DefaultMultiplier = 2

// Policy says how long to wait before each retry.
//
// The nominal delay before retry n (n >= 1) is Initial × Multiplier^(n-1),
// capped at Max; with Jitter the delay is drawn uniformly from [d/2, d]
// of that nominal d. Edges: n < 1 or Initial <= 0 gives 0; Max <= 0 means
// no cap but time.Duration's maximum; Multiplier 0 means
// DefaultMultiplier and one below 1 counts as 1 (a constant delay).
type Policy struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
	Jitter     bool
}

// Delay returns the wait before retry n, the first retry being 1.
func (p Policy) Delay(n int) time.Duration {
	d := p.Nominal(n)
	if !p.Jitter {
		return d
	}
	return Jitter(d)
}

// Jitter returns a wait drawn uniformly from [d/2, d] (rounded up at the
// low end): the equal jitter of a Policy, for a caller that waits about
// d without a sequence of retries. A d of 1 or less is returned as is.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return d - half + rand.N(half+1)
}

// Nominal returns the delay before retry n without jitter: the upper
// bound of Delay(n).
func (p Policy) Nominal(n int) time.Duration {
	if n < 1 || p.Initial <= 0 {
		return 0
	}
	limit := p.Max
	if limit <= 0 {
		limit = math.MaxInt64
	}
	m := p.Multiplier
	switch {
	case m == 0:
		m = DefaultMultiplier
	case m < 1 || math.IsNaN(m):
		m = 1
	}
	d := float64(p.Initial) * math.Pow(m, float64(n-1))
	if d >= float64(limit) {
		return limit
	}
	return time.Duration(d)
}

// Wait waits d, or until ctx ends, and then returns ctx's error.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return ctx.Err()
}

// Retry calls op until it reports done, waiting p.Delay(n) before the nth
// retry; op is given its attempt number, the first being 1. It returns
// nil once op is done, and ctx's error if ctx ends first (op is not
// called again after that). What op failed with, and when it gives up,
// are op's to decide and record.
func Retry(ctx context.Context, p Policy, op func(attempt int) (done bool)) error {
	for attempt := 1; ; attempt++ {
		if op(attempt) {
			return nil
		}
		if err := Wait(ctx, p.Delay(attempt)); err != nil {
			return err
		}
	}
}
