package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store"
)

// backlogLock is how long a Receiver's backlog stays locked: Service Bus's
// longest lock, so that it holds however long building and timing take on
// a slow machine (an ended lock would be resolved and received again).
const backlogLock = sluice.MaxLockDuration

func benchBacklog(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	return e.levels(ctx, "bench-backlog", store.QueueSettings{}, []int{0, e.cfg.inflight}, e.backlogLevel)
}

// backlogLevel leaves inflight messages locked, then times receives (or,
// with --backlog-build lease, leases) of 32 from visible messages sent
// after them. A receive build sends 1,000 messages and receives 1,000
// through a Receiver in turn, as an application would build the backlog:
// the case of issue 19 (docs/benchmarks.md, "Receive under a backlog").
func (e *benchEnv) backlogLevel(ctx context.Context, q string, inflight int) (benchResult, error) {
	var (
		r   benchResult
		err error
	)
	if e.cfg.backlogHow == "lease" {
		r, err = e.leaseBacklog(ctx, q, inflight)
	} else {
		r, err = e.receiveBacklog(ctx, q, inflight)
	}
	r.Inflight = &inflight
	return r, err
}

// leaseBacklog builds the backlog through the store: inflight messages
// sent, then leased 1,000 a lease; then it times leases of 32.
func (e *benchEnv) leaseBacklog(ctx context.Context, q string, inflight int) (benchResult, error) {
	if err := e.preload(ctx, q, inflight); err != nil {
		return benchResult{}, err
	}
	for held := 0; held < inflight; {
		got, err := e.store.Lease(ctx, &store.LeaseParams{Queue: q, Max: min(1000, inflight-held), Visibility: time.Hour})
		if err != nil {
			return benchResult{}, err
		}
		if len(got) == 0 {
			return benchResult{}, fmt.Errorf("backlog: only %d of %d messages could be leased", held, inflight)
		}
		held += len(got)
	}
	return e.timeLeases(ctx, "backlog", q)
}

// receiveBacklog builds the backlog through a Receiver, 1,000 messages
// sent then 1,000 received in turn and left locked; then it times
// receives of 32.
func (e *benchEnv) receiveBacklog(ctx context.Context, q string, inflight int) (benchResult, error) {
	if _, err := e.client.UpdateQueue(ctx, q, sluice.QueueProperties{LockDuration: backlogLock}); err != nil {
		return benchResult{}, err
	}
	rc, err := e.client.NewReceiver(q, nil)
	if err != nil {
		return benchResult{}, err
	}
	for held := 0; held < inflight; {
		n := min(1000, inflight-held)
		if err := e.preload(ctx, q, n); err != nil {
			return benchResult{}, err
		}
		got, err := rc.Receive(ctx, n)
		if err != nil {
			return benchResult{}, err
		}
		held += len(got)
	}
	const receives = 200
	if err := e.preload(ctx, q, 32*receives); err != nil {
		return benchResult{}, err
	}
	var lat latencies
	start := time.Now()
	var count int64
	for range receives {
		t0 := time.Now()
		got, err := rc.Receive(ctx, 32)
		if err != nil {
			return benchResult{}, err
		}
		lat.add(time.Since(t0))
		if len(got) != 32 {
			return benchResult{}, fmt.Errorf("backlog: a receive returned %d messages, want 32", len(got))
		}
		count += int64(len(got))
	}
	r := result(count, time.Since(start), &lat)
	r.Batch = 32
	r.Note = "p50/p99: one Receive(32), the backlog received 1,000 a call"
	return r, nil
}

// timeLeases enqueues messages behind what q holds, then times 200
// leases of 32 of them.
func (e *benchEnv) timeLeases(ctx context.Context, scenario, q string) (benchResult, error) {
	const leases = 200
	if err := e.preload(ctx, q, 32*leases); err != nil {
		return benchResult{}, err
	}
	var lat latencies
	start := time.Now()
	var count int64
	for range leases {
		t0 := time.Now()
		got, err := e.store.Lease(ctx, &store.LeaseParams{Queue: q, Max: 32, Visibility: time.Hour})
		if err != nil {
			return benchResult{}, err
		}
		lat.add(time.Since(t0))
		if len(got) != 32 {
			return benchResult{}, fmt.Errorf("%s: a lease returned %d messages, want 32", scenario, len(got))
		}
		count += int64(len(got))
	}
	r := result(count, time.Since(start), &lat)
	r.Batch = 32
	r.Note = "p50/p99: one lease of 32"
	return r, nil
}
