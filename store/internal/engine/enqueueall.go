package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/store"
)

// allReq is an EnqueueAll request of a group with its children: one
// enqueue per batch, holding the copies its duplicate checks kept.
type allReq struct {
	r        *writeReq
	children []*writeReq
	// accepted says, for each arrival, that it was no duplicate; dup, for
	// each sent message, that its first check found it a duplicate.
	accepted []bool
	dup      []bool
	// index maps each child's messages to their index in its batch.
	index [][]int
}

func newAllReq(r *writeReq) allReq {
	a := allReq{r: r, children: make([]*writeReq, len(r.all.Batches))}
	for i := range r.all.Batches {
		a.children[i] = &writeReq{t: r.t, enq: &r.all.Batches[i]}
	}
	return a
}

// kept returns the children that hold copies to enqueue.
func (a *allReq) kept() []*writeReq {
	out := make([]*writeReq, 0, len(a.children))
	for _, ch := range a.children {
		if len(ch.enq.Messages) > 0 {
			out = append(out, ch)
		}
	}
	return out
}

// keep drops from the children the copies that came through an arrival
// found a duplicate.
func (a *allReq) keep() {
	th := a.r.all.Through
	if th == nil {
		return
	}
	a.index = make([][]int, len(a.children))
	for b, ch := range a.children {
		batch := &a.r.all.Batches[b]
		kept := &store.EnqueueParams{Queue: batch.Queue}
		for j := range batch.Messages {
			if at := th[b][j]; at >= 0 && !a.accepted[at] {
				continue
			}
			kept.Messages = append(kept.Messages, batch.Messages[j])
			a.index[b] = append(a.index[b], j)
		}
		ch.enq = kept
	}
}

// seqs returns the numbers of batch b's messages, 0 for a copy dropped as
// a duplicate.
func (a *allReq) seqs(b int) []int64 {
	ch := a.children[b]
	if a.index == nil {
		return ch.seqs
	}
	out := make([]int64, len(a.r.all.Batches[b].Messages))
	for i, j := range a.index[b] {
		out[j] = ch.seqs[i]
	}
	return out
}

// EnqueueAll writes batches to several queues atomically. It goes through
// group commit: each batch joins the other enqueues of its queue in the
// group. If a batch fails (its queue is gone, a message lacks a session
// id), the group fails and every request runs again alone, so that this
// one fails whole and the others commit.
func (s *tenantStore) EnqueueAll(ctx context.Context, p *store.EnqueueAllParams) (store.EnqueueAllResult, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return store.EnqueueAllResult{}, fmt.Errorf("sluice: enqueue: %w", err)
	}
	r := &writeReq{t: s.t, all: p}
	if err := s.e.commit.submit(ctx, r); err != nil {
		return store.EnqueueAllResult{}, fmt.Errorf("sluice: enqueue: %w", err)
	}
	return store.EnqueueAllResult{Seqs: r.allSeqs, Routed: r.routed}, nil
}

var _ store.TxEnqueuer = (*tenantStore)(nil)

// EnqueueTx enqueues into several queues in the caller's transaction, in
// queue name order (the counter rows' lock order).
func (s *tenantStore) EnqueueTx(ctx context.Context, tx store.Tx, p *store.EnqueueAllParams) (store.EnqueueAllResult, error) {
	var none store.EnqueueAllResult
	if err := p.Validate(s.e.limits); err != nil {
		return none, fmt.Errorf("sluice: enqueue: %w", err)
	}
	q, err := s.e.foreign(tx)
	if err != nil {
		return none, fmt.Errorf("sluice: enqueue: %w", err)
	}
	gt := newGroupTx(q)
	r := &writeReq{t: s.t, all: p}
	alls := []allReq{newAllReq(r)}
	if err := s.e.checkArrivals(ctx, gt, alls); err != nil {
		return none, fmt.Errorf("sluice: enqueue: %w", err)
	}
	if err := s.e.shareBodies(ctx, gt, alls); err != nil {
		return none, fmt.Errorf("sluice: enqueue: %w", err)
	}
	a := alls[0]
	for _, ch := range sortedByQueue(a.kept()) {
		if err := s.e.enqueueGroup(ctx, gt, []*writeReq{ch}); err != nil {
			return none, fmt.Errorf("sluice: enqueue: %w", err)
		}
	}
	if err := s.e.finishAll(ctx, gt, a); err != nil {
		return none, fmt.Errorf("sluice: enqueue: %w", err)
	}
	if err := s.e.numberAllRouted(ctx, gt, []allReq{a}); err != nil {
		return none, fmt.Errorf("sluice: enqueue: %w", err)
	}
	return store.EnqueueAllResult{Seqs: r.allSeqs, Routed: r.routed}, nil
}

// payload is the notification of key for a statement run on q. In the
// caller's own transaction it carries no origin of this process: this
// process learns of the commit only from the notification, so its
// listener must not drop it as its own echo.
func (e *Engine) payload(q querier, key string) string {
	if isForeign(q) {
		return "tx|" + key
	}
	return e.hub.NotifyPayload(key)
}

func sortedByQueue(reqs []*writeReq) []*writeReq {
	out := slices.Clone(reqs)
	slices.SortFunc(out, func(a, b *writeReq) int { return strings.Compare(a.enq.Queue, b.enq.Queue) })
	return out
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
		a.r.allSeqs[i] = a.seqs(i)
		if len(ch.enq.Messages) == 0 {
			continue
		}
		a.r.signals = append(a.r.signals, ch.signals...)
		if err := e.deadLetterOnArrival(ctx, gt, a.r.t, ch.enq, ch.seqs); err != nil {
			return err
		}
	}
	return nil
}

// numberAllRouted numbers the routed sends among alls, in the order of
// the queues they were sent to: each locks its queue's counter row, after
// every enqueue of the group took its own.
func (e *Engine) numberAllRouted(ctx context.Context, gt *groupTx, alls []allReq) error {
	var routed []allReq
	for _, a := range alls {
		if a.r.all.Routed != nil {
			routed = append(routed, a)
		}
	}
	slices.SortStableFunc(routed, func(a, b allReq) int {
		return cmp.Or(
			cmp.Compare(a.r.t.Service, b.r.t.Service),
			cmp.Compare(a.r.t.Provider, b.r.t.Provider),
			cmp.Compare(a.r.all.Routed.Queue, b.r.all.Routed.Queue),
		)
	})
	for _, a := range routed {
		if err := e.numberRouted(ctx, gt, a.r.t, a); err != nil {
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
