package stream

import (
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// DefaultLaggingRate is the default of Config.LaggingRate: events a
// second that lagging windows start delivering across a node while a
// head window delivers.
const DefaultLaggingRate = 10_000

// headIdle is how long after a head window's last delivery started the
// lagging windows' bound still holds: past it, nobody live waits on the
// node, and a replay goes as fast as its handlers.
const headIdle = time.Second

// lagThrottle bounds the deliveries lagging windows start across a node
// while some head window delivers, so that a replay, or a lagging
// subscription released, takes a bounded share of the node and the live
// subscriptions keep their latency. It is a token bucket of a
// hundredth of a second's events (at least one): deliveries start
// evenly, not in bursts that hold up a live one. It is safe for
// concurrent use by the node's agents.
type lagThrottle struct {
	lim    *rate.Limiter // nil: unbounded
	born   time.Time
	headAt atomic.Int64 // when a head window's delivery last started, since born (0: never)
}

// A lagging subscription always moves faster than its partition's
// inflow, whatever the lagging rate: in each lagInterval, it may start
// lagInflowShare times as many deliveries as the partition's head window
// took in records during the interval before, when the node's bound has
// no token left. So it gains on the head however many lagging
// subscriptions share the bound and however high the inflow. What it
// starts takes a token whenever there is one, so that an allowance adds
// to the bound only where the bound left its subscription short of it.
const (
	lagInflowShare = 2
	lagInterval    = 250 * time.Millisecond
)

// newLagThrottle bounds lagging deliveries to perSecond (math.MaxInt:
// unbounded).
func newLagThrottle(perSecond int, born time.Time) *lagThrottle {
	t := &lagThrottle{born: born}
	if perSecond < math.MaxInt {
		t.lim = rate.NewLimiter(rate.Limit(perSecond), max(perSecond/100, 1))
	}
	return t
}

// head notes that a head window started a delivery at now.
func (t *lagThrottle) head(now time.Time) {
	t.headAt.Store(int64(now.Sub(t.born)) + 1)
}

// allow reports whether a lagging window may start a delivery at now,
// taking a token if the bound holds.
func (t *lagThrottle) allow(now time.Time) bool {
	if t.lim == nil {
		return true
	}
	at := t.headAt.Load()
	if at == 0 || now.Sub(t.born)-time.Duration(at-1) > headIdle {
		return true // no live delivery lately: nothing to keep room for
	}
	return t.lim.AllowN(now, 1)
}

// retry is how long a held window waits before it tries again: the
// time half the bucket takes to fill (at least a millisecond, at most
// 50 ms), so that a held agent wakes a few times per bucket, not per
// token.
func (t *lagThrottle) retry() time.Duration {
	if t.lim == nil {
		return time.Millisecond
	}
	half := time.Duration(float64(time.Second) * float64(t.lim.Burst()) / (2 * float64(t.lim.Limit())))
	return min(max(half, time.Millisecond), 50*time.Millisecond)
}

// inflow measures what a partition's head window takes in, per
// lagInterval, for the lagging subscriptions' allowance. The agent's
// goroutine owns it.
type inflow struct {
	start    time.Time // the current interval's
	through  int64     // the head window's end when last seen
	cur      int64     // records taken in during the current interval
	previous int64     // and during the one before
}

// roll notes the head window's end at now, and reports whether a new
// interval began (the allowances start again).
func (f *inflow) roll(now time.Time, through int64) bool {
	switch {
	case f.start.IsZero():
		f.start, f.through = now, through
		return false
	case through > f.through:
		f.cur += through - f.through
	}
	f.through = through // lower after a reset: counted from there
	if now.Sub(f.start) < lagInterval {
		return false
	}
	f.start, f.previous, f.cur = now, f.cur, 0
	return true
}

// allows reports whether a lagging subscription that started n
// deliveries in the current interval may start one more outside the
// node's bound.
func (f *inflow) allows(n int64) bool { return n < lagInflowShare*f.previous }
