package sluice

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Dead-letter reasons sluice assigns, as Service Bus names them.
const (
	ReasonMaxDeliveryCountExceeded = sluicetype.ReasonMaxDeliveryCountExceeded
	ReasonTTLExpired               = sluicetype.ReasonTTLExpired
)

// deliverDead turns leased dead letters into received messages; in
// ReceiveAndDelete mode it deletes them first and returns those it
// deleted.
func (r *Receiver) deliverDead(ctx context.Context, ds []sluicetype.DeadLetter) ([]*ReceivedMessage, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	out := make([]*ReceivedMessage, 0, len(ds))
	if r.mode == PeekLock {
		for _, d := range ds {
			out = append(out, deadLetterMessage(r.queue, d))
		}
		r.noteReceived(out)
		return out, nil
	}
	p := store.SettleParams{Queue: r.queue, Action: store.Complete}
	for _, d := range ds {
		p.Receipts = append(p.Receipts, d.Receipt)
	}
	res, err := r.c.settleParts(ctx, &p, true)
	if err != nil {
		return nil, err
	}
	for i, d := range ds {
		if res[i].Err == nil {
			m := deadLetterMessage(r.queue, d)
			m.LockToken, m.LockedUntil = "", time.Time{}
			out = append(out, m)
		}
	}
	r.noteReceived(out)
	return out, nil
}

// ResubmitOptions choose which dead letters to resubmit.
type ResubmitOptions struct {
	// SequenceNumbers names dead letters to resubmit; nil resubmits all.
	SequenceNumbers []int64
	// Progress, when set, is called after each batch with the dead letters
	// moved so far and the total to move.
	Progress func(done, total int)
}

// ResubmitDeadLetters moves dead letters of an entity (a queue or a
// subscription) back to it as new messages, in batches of up to the
// backend's batch limit, each atomic: a failure leaves the batches before
// it moved and the rest where they were. It returns how many moved.
// ErrMessageNotFound (that batch unmoved) if a sequence number names no
// dead letter. Under an Instrumentation it is one OperationResubmit,
// whose Received are the dead letters moved (read for it, by a browse of
// each batch, when opts names them by sequence number).
func (c *Client) ResubmitDeadLetters(ctx context.Context, entity string, opts *ResubmitOptions) (int, error) {
	entity = canonical(entity)
	if opts == nil {
		opts = &ResubmitOptions{}
	}
	in := c.instrumentation()
	if in == nil {
		return c.resubmit(ctx, entity, opts, nil)
	}
	op := &Operation{Kind: OperationResubmit, Entity: entity, SubQueue: SubQueueDeadLetter}
	ctx, end := in.Start(ctx, op)
	var moved []*ReceivedMessage
	n, err := c.resubmit(ctx, entity, opts, &moved)
	op.Received = moved
	end(err)
	return n, err
}

// resubmit does ResubmitDeadLetters' work, and when moved is not nil
// appends the dead letters it moved there. A partitioned queue's dead
// letters go back to their own partitions, one partition after another.
func (c *Client) resubmit(ctx context.Context, entity string, opts *ResubmitOptions, moved *[]*ReceivedMessage) (int, error) {
	n, err := c.partitionsOf(ctx, entity)
	if err != nil || n == 1 {
		if err != nil {
			return 0, err
		}
		return c.resubmitPartition(ctx, entity, 0, opts, moved)
	}
	var groups []seqGroup
	if opts.SequenceNumbers != nil {
		if groups, err = groupAllSeqs(opts.SequenceNumbers, n); err != nil {
			return 0, fmt.Errorf("sluice: resubmit: %w", err)
		}
	} else {
		for p := range n {
			groups = append(groups, seqGroup{part: p})
		}
	}
	before := 0
	for _, g := range groups {
		o := &ResubmitOptions{SequenceNumbers: g.seqs}
		if opts.Progress != nil {
			o.Progress = func(done, total int) { opts.Progress(before+done, before+total) }
		}
		k, err := c.resubmitPartition(ctx, entity, g.part, o, moved)
		before += k
		if err != nil {
			return before, err
		}
	}
	return before, nil
}

// resubmitPartition resubmits the dead letters of one partition of
// entity (0 for an unpartitioned one), which opts names by the
// partition's own numbers.
func (c *Client) resubmitPartition(ctx context.Context, entity string, part int, opts *ResubmitOptions, moved *[]*ReceivedMessage) (int, error) {
	progress := func(done, total int) {
		if opts.Progress != nil {
			opts.Progress(done, total)
		}
	}
	name, entity := entity, partitionQueue(entity, part)
	batch := c.limits.MaxBatch
	if seqs := opts.SequenceNumbers; seqs != nil {
		done := 0
		for done < len(seqs) {
			chunk := seqs[done:min(done+batch, len(seqs))]
			var page []sluicetype.DeadLetter
			if moved != nil {
				page = c.browseDeadLetters(ctx, entity, chunk)
			}
			if _, err := c.st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: entity, Seqs: chunk}); err != nil {
				return done, err
			}
			noteMoved(moved, name, part, page)
			done += len(chunk)
			progress(done, len(seqs))
		}
		return done, nil
	}
	st, err := c.st.QueueStats(ctx, entity)
	if err != nil {
		return 0, err
	}
	// The dead letters there now, not those that messages resubmitted
	// here may become meanwhile: walk forward from the first, and stop at
	// the count there was.
	total, done, from := int(st.DeadLettered), 0, int64(0)
	for done < total {
		page, err := c.st.PeekDeadLetters(ctx, &store.PeekParams{Queue: entity, FromSeq: from, Max: min(batch, total-done)})
		if err != nil {
			return done, err
		}
		if len(page) == 0 {
			return done, nil
		}
		seqs := make([]int64, len(page))
		for i, d := range page {
			seqs[i] = d.Seq
		}
		from = seqs[len(seqs)-1] + 1
		if _, err := c.st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: entity, Seqs: seqs}); err != nil {
			return done, fmt.Errorf("sluice: resubmit: %w", err)
		}
		noteMoved(moved, name, part, page)
		done += len(seqs)
		progress(done, total)
	}
	return done, nil
}

// browseDeadLetters reads the dead letters of entity that seqs name, for
// an instrumentation to see what a resubmit moves. It is best effort: a
// failed browse, or dead letters too far apart for one browse to reach,
// leave some out, and the resubmit goes on.
func (c *Client) browseDeadLetters(ctx context.Context, entity string, seqs []int64) []sluicetype.DeadLetter {
	want := make(map[int64]bool, len(seqs))
	from := seqs[0]
	for _, s := range seqs {
		want[s] = true
		from = min(from, s)
	}
	res, err := c.st.Browse(ctx, &store.BrowseParams{Queue: entity, DeadLetters: true, FromSeq: from, Max: len(seqs),
		Scan: store.MaxBrowseScan, Match: func(d *sluicetype.DeadLetter) bool { return want[d.Seq] }})
	if err != nil {
		return nil
	}
	return res.Messages
}

// noteMoved appends the dead letters of page, which a resubmit moved
// from partition part of entity, to moved, when it is not nil.
func noteMoved(moved *[]*ReceivedMessage, entity string, part int, page []sluicetype.DeadLetter) {
	if moved == nil {
		return
	}
	publicDeadLetters(part, page)
	for _, d := range page {
		*moved = append(*moved, deadLetterMessage(entity, d))
	}
}

// PurgeDeadLetters deletes all dead letters of an entity and returns how
// many it deleted.
func (c *Client) PurgeDeadLetters(ctx context.Context, entity string) (int64, error) {
	return c.eachPartitionCount(ctx, canonical(entity), func(q string) (int64, error) {
		return c.st.PurgeDeadLetters(ctx, q)
	})
}

// DeleteDeadLetters deletes the dead letters of an entity that seqs name
// (1 to the backend's batch limit of them, 1,000 by default), in one
// transaction, and returns how many it deleted: a number that names no
// dead letter (any more) deletes nothing. ErrInvalidArgument, and
// nothing deleted, for none, too many, or a number below 1.
//
// On a partitioned queue, numbers of several partitions are deleted
// partition by partition, each in one transaction.
func (c *Client) DeleteDeadLetters(ctx context.Context, entity string, seqs ...int64) (int64, error) {
	entity = canonical(entity)
	n, err := c.partitionsOf(ctx, entity)
	if err != nil || n == 1 {
		if err != nil {
			return 0, err
		}
		return c.st.DeleteDeadLetters(ctx, entity, seqs)
	}
	if len(seqs) == 0 || len(seqs) > c.limits.MaxBatch {
		return c.st.DeleteDeadLetters(ctx, entity, seqs) // refused as the backend refuses it
	}
	groups, _, err := groupSeqs(seqs, n) // a number of no partition names no dead letter
	if err != nil {
		return 0, fmt.Errorf("sluice: delete dead letters: %w", err)
	}
	var total int64
	for _, g := range groups {
		k, err := c.st.DeleteDeadLetters(ctx, partitionQueue(entity, g.part), g.seqs)
		if total += k; err != nil {
			return total, err
		}
	}
	return total, nil
}

// ObserveDeadLetters calls fn after each transaction of this process that
// moved messages of the client's tenant to dead letters, once per entity
// (a queue, or a subscription's path) and reason, with how many it moved,
// whatever the cause: a receiver's DeadLetter, a delivery count
// exhausted (MaxDeliveryCountExceeded), a time-to-live run out
// (TTLExpiredException), a subscription's filter that failed. It is how
// the server counts sluice_messages_dead_lettered_total, and how an
// application counts them in its own metrics. fn runs as the transaction
// commits: it must not block, nor call the client or stop; once stop
// returns it is not called again. A send in the
// caller's transaction (SendTx) is not reported, since the caller
// commits it; neither is a transaction whose outcome is unknown. stop
// ends the observation. On a store that reports nothing (not one of
// this module's backends), fn is never called.
func (c *Client) ObserveDeadLetters(fn func(entity, reason string, n int)) (stop func()) {
	o, ok := c.st.(store.DeadLetterObserver)
	if !ok {
		return func() {}
	}
	// A partition's dead letters are its queue's.
	return o.ObserveDeadLetters(func(d store.DeadLettered) { fn(partitionedQueue(d.Queue), d.Reason, d.Count) })
}
