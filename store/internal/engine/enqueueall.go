package engine

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

// allReq is an EnqueueAll request of a group with its children.
type allReq struct {
	r        *writeReq
	children []*writeReq
}

// EnqueueAll writes batches to several queues atomically. It goes through
// group commit: each batch joins the other enqueues of its queue in the
// group. If a batch fails (its queue is gone, a message lacks a session
// id), the group fails and every request runs again alone, so that this
// one fails whole and the others commit.
func (s *tenantStore) EnqueueAll(ctx context.Context, p *store.EnqueueAllParams) ([][]int64, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: enqueue: %w", err)
	}
	r := &writeReq{t: s.t, all: p}
	if err := s.e.commit.submit(ctx, r); err != nil {
		return nil, fmt.Errorf("sluice: enqueue: %w", err)
	}
	return r.allSeqs, nil
}

// finishAll completes an EnqueueAll once its children were applied: a
// failed child fails the transaction; otherwise the messages with a
// dead-letter reason move to dead letters and the results are gathered.
func (e *Engine) finishAll(ctx context.Context, gt *groupTx, a allReq) error {
	a.r.allSeqs = make([][]int64, len(a.children))
	for i, ch := range a.children {
		if ch.err != nil {
			return fmt.Errorf("queue %q: %w", ch.enq.Queue, ch.err)
		}
		a.r.allSeqs[i] = ch.seqs
		a.r.signals = append(a.r.signals, ch.signals...)
		if err := e.deadLetterOnArrival(ctx, gt, a.r.t, ch.enq, ch.seqs); err != nil {
			return err
		}
	}
	return nil
}

// deadLetterOnArrival moves the messages of b that carry a dead-letter
// reason to dead letters, in the transaction that enqueued them.
func (e *Engine) deadLetterOnArrival(ctx context.Context, gt *groupTx, t store.Tenant, b *store.EnqueueParams, seqs []int64) error {
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
	qr, err := gt.queue(ctx, e, t, b.Queue)
	if err != nil {
		return err
	}
	for k, list := range groups {
		if err := e.deadLetter(ctx, gt.tx, t, &qr, list, k.reason, k.desc); err != nil {
			return err
		}
	}
	return nil
}
