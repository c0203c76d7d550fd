package stream

import (
	"math"
	"testing"
	"time"
)

// The lagging bound holds only within headIdle of a head delivery, and
// then lets a bucket of a hundredth of a second's events through, then
// one per token; math.MaxInt has no bound.
func TestLagThrottle(t *testing.T) {
	born := time.Now()
	at := func(d time.Duration) time.Time { return born.Add(d) }
	th := newLagThrottle(1000, born)
	for i := range 50 {
		if !th.allow(at(time.Millisecond)) {
			t.Fatalf("delivery %d refused with no head delivery yet", i)
		}
	}
	th.head(at(time.Second))
	allowed := 0
	for range 100 {
		if th.allow(at(time.Second)) {
			allowed++
		}
	}
	if allowed != 10 {
		t.Fatalf("%d deliveries allowed at once beside a head delivery, want the bucket's 10", allowed)
	}
	if th.allow(at(time.Second + 500*time.Microsecond)) {
		t.Fatal("a delivery allowed before a token came")
	}
	if !th.allow(at(time.Second + 2*time.Millisecond)) {
		t.Fatal("a delivery refused after a token came")
	}
	for i := range 50 {
		if !th.allow(at(2*time.Second + 3*time.Millisecond)) {
			t.Fatalf("delivery %d refused %v after the last head delivery", i, headIdle+3*time.Millisecond)
		}
	}
	if got := th.retry(); got != 5*time.Millisecond {
		t.Fatalf("retry %v at 1,000 events/s, want the 5 ms half the bucket takes", got)
	}
	if got := newLagThrottle(1, born).retry(); got != 50*time.Millisecond {
		t.Fatalf("retry %v at 1 event/s, want the 50 ms cap", got)
	}
	free := newLagThrottle(math.MaxInt, born)
	free.head(at(time.Second))
	for i := range 1000 {
		if !free.allow(at(time.Second)) {
			t.Fatalf("delivery %d refused without a bound", i)
		}
	}
}

// A lagging subscription's allowance is twice what the head window took
// in during the interval before the current one; a head window moved
// back (a reset) counts from its new end.
func TestInflow(t *testing.T) {
	born := time.Now()
	at := func(d time.Duration) time.Time { return born.Add(d) }
	var f inflow
	if f.roll(at(0), 100) || f.allows(0) {
		t.Fatal("an allowance before any interval ended")
	}
	f.roll(at(100*time.Millisecond), 130)
	f.roll(at(200*time.Millisecond), 90) // a reset: nothing taken in
	f.roll(at(220*time.Millisecond), 100)
	if !f.roll(at(lagInterval), 110) {
		t.Fatal("no new interval after lagInterval")
	}
	// 30 + 10 + 10 records in the interval: 100 deliveries allowed.
	if !f.allows(99) || f.allows(100) {
		t.Fatalf("allowance after 50 records: allows(99) %v, allows(100) %v, want true, false", f.allows(99), f.allows(100))
	}
	if f.roll(at(lagInterval+time.Millisecond), 200) {
		t.Fatal("a new interval before lagInterval passed")
	}
	if !f.allows(99) {
		t.Fatal("the allowance changed within an interval")
	}
	f.roll(at(2*lagInterval+time.Millisecond), 200)
	if !f.allows(179) || f.allows(180) {
		t.Fatal("the allowance after 90 records is not 180")
	}
	f.roll(at(3*lagInterval+2*time.Millisecond), 200)
	if f.allows(0) {
		t.Fatal("an allowance after an interval with no inflow")
	}
}
