package backoff

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

func TestNominal(t *testing.T) {
	forever := time.Duration(math.MaxInt64)
	for _, c := range []struct {
		name string
		p    Policy
		n    int
		want time.Duration
	}{
		{"first retry is Initial", Policy{Initial: time.Second, Max: time.Minute}, 1, time.Second},
		{"doubles by default", Policy{Initial: time.Second, Max: time.Minute}, 3, 4 * time.Second},
		{"multiplier", Policy{Initial: time.Second, Max: time.Minute, Multiplier: 3}, 3, 9 * time.Second},
		{"fractional multiplier", Policy{Initial: time.Second, Max: time.Minute, Multiplier: 1.5}, 3, 2250 * time.Millisecond},
		{"capped at Max", Policy{Initial: time.Second, Max: time.Minute}, 7, time.Minute},
		{"cap below Initial", Policy{Initial: time.Minute, Max: time.Second}, 1, time.Second},
		{"huge n stays at the cap", Policy{Initial: time.Second, Max: time.Minute}, math.MaxInt, time.Minute},
		{"no cap saturates", Policy{Initial: time.Second}, 1000, forever},
		{"negative cap is no cap", Policy{Initial: time.Second, Max: -1}, 2, 2 * time.Second},
		{"zero retry", Policy{Initial: time.Second}, 0, 0},
		{"negative retry", Policy{Initial: time.Second}, -3, 0},
		{"zero Initial", Policy{Max: time.Minute}, 5, 0},
		{"negative Initial", Policy{Initial: -time.Second, Max: time.Minute}, 5, 0},
		{"multiplier below 1 is constant", Policy{Initial: time.Second, Multiplier: 0.5}, 9, time.Second},
		{"negative multiplier is constant", Policy{Initial: time.Second, Multiplier: -2}, 9, time.Second},
		{"NaN multiplier is constant", Policy{Initial: time.Second, Multiplier: math.NaN()}, 9, time.Second},
		{"infinite multiplier hits the cap", Policy{Initial: time.Second, Max: time.Hour, Multiplier: math.Inf(1)}, 2, time.Hour},
		{"maximal Initial", Policy{Initial: forever}, 2, forever},
	} {
		if got := c.p.Nominal(c.n); got != c.want {
			t.Errorf("%s: %+v.Nominal(%d) = %v, want %v", c.name, c.p, c.n, got, c.want)
		}
	}
}

func TestDelayWithoutJitterIsNominal(t *testing.T) {
	p := Policy{Initial: 10 * time.Millisecond, Max: time.Second}
	for n := range 12 {
		if got, want := p.Delay(n), p.Nominal(n); got != want {
			t.Fatalf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestJitterRange checks that equal jitter stays in [d/2, d] and uses that
// whole range rather than a point of it.
func TestJitterRange(t *testing.T) {
	for _, p := range []Policy{
		{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: true},
		{Initial: 3, Max: 7, Jitter: true},
		{Initial: time.Duration(math.MaxInt64), Jitter: true},
	} {
		for n := 1; n <= 10; n++ {
			d := p.Nominal(n)
			lo, hi := d, time.Duration(0)
			for range 2000 {
				got := p.Delay(n)
				if got < d-d/2 || got > d {
					t.Fatalf("%+v: Delay(%d) = %v, outside [%v, %v]", p, n, got, d-d/2, d)
				}
				lo, hi = min(lo, got), max(hi, got)
			}
			if d >= 100 && (lo > d-d/2+d/10 || hi < d-d/10) {
				t.Fatalf("%+v: Delay(%d) spans only [%v, %v] of [%v, %v]", p, n, lo, hi, d-d/2, d)
			}
		}
	}
	if got := (Policy{Jitter: true}).Delay(3); got != 0 {
		t.Fatalf("jittered zero policy: %v, want 0", got)
	}
	if got := (Policy{Initial: 1, Jitter: true}).Delay(1); got != 1 {
		t.Fatalf("jittered 1ns: %v, want 1ns", got)
	}
}

// TestJitter checks that Jitter stays in [d/2, d], uses that whole
// range, and leaves a d of 1 or less alone.
func TestJitter(t *testing.T) {
	for _, d := range []time.Duration{2, 3, 7, 250 * time.Millisecond, time.Duration(math.MaxInt64)} {
		lo, hi := d, time.Duration(0)
		for range 2000 {
			got := Jitter(d)
			if got < d-d/2 || got > d {
				t.Fatalf("Jitter(%v) = %v, outside [%v, %v]", d, got, d-d/2, d)
			}
			lo, hi = min(lo, got), max(hi, got)
		}
		if d >= 100 && (lo > d-d/2+d/10 || hi < d-d/10) {
			t.Fatalf("Jitter(%v) spans only [%v, %v] of [%v, %v]", d, lo, hi, d-d/2, d)
		}
	}
	for _, d := range []time.Duration{1, 0, -time.Second} {
		if got := Jitter(d); got != d {
			t.Fatalf("Jitter(%v) = %v, want it unchanged", d, got)
		}
	}
}

func TestRetryUntilDone(t *testing.T) {
	var attempts []int
	err := Retry(context.Background(), Policy{Initial: time.Microsecond, Max: time.Millisecond, Jitter: true}, func(a int) bool {
		attempts = append(attempts, a)
		return a == 4
	})
	if err != nil || len(attempts) != 4 || attempts[0] != 1 || attempts[3] != 4 {
		t.Fatalf("Retry: err %v, attempts %v, want nil and [1 2 3 4]", err, attempts)
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Retry(ctx, Policy{Initial: time.Hour}, func(int) bool {
		calls++
		cancel()
		return false
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("Retry with a cancelled context: err %v after %d calls, want context.Canceled after 1", err, calls)
	}
}

func TestWait(t *testing.T) {
	if err := Wait(context.Background(), 0); err != nil {
		t.Fatalf("Wait(0): %v", err)
	}
	if err := Wait(context.Background(), -time.Second); err != nil {
		t.Fatalf("Wait(-1s): %v", err)
	}
	start := time.Now()
	if err := Wait(context.Background(), 5*time.Millisecond); err != nil || time.Since(start) < 5*time.Millisecond {
		t.Fatalf("Wait(5ms): %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context: %v, want context.Canceled", err)
	}
	if err := Wait(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait(0) on an ended context: %v, want context.Canceled", err)
	}
}
