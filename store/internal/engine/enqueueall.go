package engine

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/store"
)

// EnqueueAll writes batches to several queues in one transaction of its
// own (not a group: one failing batch must undo the others), in queue
// name order, which is the lock order of counter rows.
func (s *tenantStore) EnqueueAll(ctx context.Context, p *store.EnqueueAllParams) ([][]int64, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: enqueue: %w", err)
	}
	order := make([]int, len(p.Batches))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if p.Batches[a].Queue < p.Batches[b].Queue {
			return -1
		}
		return 1
	})
	out := make([][]int64, len(p.Batches))
	var signals []string
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		signals = signals[:0]
		gt := newGroupTx(tx)
		for _, i := range order {
			b := &p.Batches[i]
			r := &writeReq{t: s.t, enq: b}
			if err := s.e.enqueueGroup(ctx, gt, []*writeReq{r}); err != nil {
				return err
			}
			if r.err != nil {
				return r.err
			}
			out[i] = r.seqs
			signals = append(signals, r.signals...)
			if err := s.deadLetterOnArrival(ctx, gt, b, r.seqs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: enqueue: %w", err)
	}
	for _, key := range signals {
		s.e.hub.Signal(key)
	}
	return out, nil
}

// deadLetterOnArrival moves the messages of b that carry a dead-letter
// reason to dead letters, in the transaction that enqueued them.
func (s *tenantStore) deadLetterOnArrival(ctx context.Context, gt *groupTx, b *store.EnqueueParams, seqs []int64) error {
	type why struct{ reason, desc string }
	var groups map[why][]int64
	for i := range b.Messages {
		m := &b.Messages[i]
		if m.DeadLetterReason == "" {
			continue
		}
		if groups == nil {
			groups = make(map[why][]int64)
		}
		k := why{m.DeadLetterReason, m.DeadLetterDescription}
		groups[k] = append(groups[k], seqs[i])
	}
	if len(groups) == 0 {
		return nil
	}
	qr, err := gt.queue(ctx, s.e, s.t, b.Queue)
	if err != nil {
		return err
	}
	for k, list := range groups {
		if err := s.e.deadLetter(ctx, gt.tx, s.t, &qr, list, k.reason, k.desc); err != nil {
			return err
		}
	}
	return nil
}
