package engine

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// A queue's ready floor (capability ReadyFloor; PostgreSQL) is a number
// below which none of its messages is ready: a lease scans the ready
// index from there. Every message leased or settled leaves that index a
// dead entry, until vacuum removes it, and they gather at the front of
// the queue's range, ahead of the first ready message: after a burst of
// 50,000 leases, each later lease stepped over 344 index pages of them.
// The statements that make messages ready again lower the floor in their
// own transaction; the engine raises it, outside any group, when a lease
// finds it far behind the first message it took (or, taking none, the
// queue's next number). The raise is a hint the database checks: it
// raises the floor to what its own snapshot shows, so a raise can be
// late or skipped, never wrong. The dialect's migration describes how
// the floor stays right under concurrent raises, releases and deletes.

// defaultReadyFloorGap is how far behind the floor may fall: the dead
// entries below a gap of 1,024 cost a lease about 7 index pages (some 40
// microseconds), and each raise steps over them once.
const defaultReadyFloorGap = 1024

// maxLowered is how many statements that lowered a queue's floor (each
// inserting a row) a process runs before it raises the floor, whatever
// the leases saw: a raise deletes the rows, which would otherwise pile up
// on a queue whose messages are abandoned again and again close to its
// floor.
const maxLowered = 64

// raiseTimeout bounds one raise: it is one statement over at most the
// entries it steps over.
const raiseTimeout = 30 * time.Second

// floorState is what the engine knows of one queue's floor.
type floorState struct {
	mu sync.Mutex
	// raising says a raise runs now.
	raising bool
	// raisedAt is the next number (first taken, or last_seq+1) that
	// started the last raise: another waits for the leases to move a gap
	// past it, so that a floor that stays down (a ready message that is
	// never leased: expired, awaiting eviction) costs a raise per gap,
	// not one per lease.
	raisedAt int64
	// lowered counts the statements that lowered the floor since the
	// last raise.
	lowered int
}

// floorSeen is what a lease statement saw: the floor it scanned from,
// and next, the first number it took or, taking none, the queue's next
// number.
type floorSeen struct{ floor, next int64 }

// noteReadyFloor hears what a committed lease statement saw, and starts
// a raise if the floor lags by more than the gap: after the commit, so
// that the raise's snapshot sees what the lease took.
func (e *Engine) noteReadyFloor(t store.Tenant, queue string, floor, next int64) {
	if next-floor <= e.floorGap {
		return
	}
	fs := e.floorState(t, queue)
	fs.mu.Lock()
	if fs.raising || next-fs.raisedAt <= e.floorGap {
		fs.mu.Unlock()
		return
	}
	fs.raising, fs.raisedAt, fs.lowered = true, next, 0
	fs.mu.Unlock()
	e.startRaise(fs, t, queue)
}

// noteLowered hears that a statement lowered the queue's floor (inserted
// a row), and raises the floor after maxLowered of them.
func (e *Engine) noteLowered(t store.Tenant, queue string) {
	if !e.d.Capabilities.ReadyFloor {
		return
	}
	fs := e.floorState(t, queue)
	fs.mu.Lock()
	if fs.lowered++; fs.raising || fs.lowered < maxLowered {
		fs.mu.Unlock()
		return
	}
	fs.raising, fs.lowered = true, 0
	fs.mu.Unlock()
	e.startRaise(fs, t, queue)
}

// floorState returns the queue's state, made on first use (Load first:
// it runs at every abandon and release, and LoadOrStore would allocate).
func (e *Engine) floorState(t store.Tenant, queue string) *floorState {
	key := queueID{t, queue}
	if v, ok := e.floors.Load(key); ok {
		return v.(*floorState)
	}
	v, _ := e.floors.LoadOrStore(key, &floorState{})
	return v.(*floorState)
}

// startRaise raises the queue's floor on a goroutine of its own, and
// clears fs.raising when it is done.
func (e *Engine) startRaise(fs *floorState, t store.Tenant, queue string) {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return
	}
	e.background.Add(1)
	go func() {
		defer e.background.Done()
		defer func() {
			fs.mu.Lock()
			fs.raising = false
			fs.mu.Unlock()
		}()
		e.raiseReadyFloor(t, queue)
	}()
}

// raiseReadyFloor runs RaiseReadyFloor for a queue. A failure costs
// nothing but speed: the next lease that finds the floor behind tries
// again.
func (e *Engine) raiseReadyFloor(t store.Tenant, queue string) {
	ctx, cancel := context.WithTimeout(e.stopping, raiseTimeout)
	defer cancel()
	if _, err := e.exec(ctx, e.w, qRaiseReadyFloor, t.Service, t.Provider, queue); err != nil && e.stopping.Err() == nil {
		e.log.Warn("sluice: raising a queue's ready floor failed", "queue", queue, "err", err)
	}
}

// forgetReadyFloor drops what the engine knows of a deleted queue's
// floor.
func (e *Engine) forgetReadyFloor(t store.Tenant, queue string) {
	e.floors.Delete(queueID{t, queue})
}
