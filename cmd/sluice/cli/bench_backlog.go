package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/store"
)

func benchBacklog(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	return e.levels(ctx, "bench-backlog", store.QueueSettings{}, []int{0, e.cfg.inflight}, e.backlogLevel)
}

// backlogLevel leases inflight messages and leaves them unsettled, then
// times leases of 32 from visible messages enqueued after them.
func (e *benchEnv) backlogLevel(ctx context.Context, q string, inflight int) (benchResult, error) {
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
	r, err := e.timeLeases(ctx, "backlog", q)
	r.Inflight = &inflight
	return r, err
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
