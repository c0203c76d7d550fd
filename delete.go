package sluice

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/store"
)

// DeleteOptions choose the messages DeleteMessages deletes: those
// SequenceNumbers names, or else the oldest Max, enqueued before
// EnqueuedBefore when it is set.
type DeleteOptions struct {
	// SequenceNumbers names the messages (1 to the backend's batch limit,
	// 1,000 by default, distinct).
	SequenceNumbers []int64
	// Max is how many of the oldest to delete (1 to the batch limit),
	// when SequenceNumbers is empty.
	Max int
	// EnqueuedBefore, when set (and SequenceNumbers empty), deletes only
	// messages enqueued before it, by the database's clock.
	EnqueuedBefore time.Time
}

// DeleteMessages deletes messages of a queue or subscription without
// receiving them, in one transaction, as Service Bus's batch delete does:
// those opts.SequenceNumbers names, or the oldest opts.Max. A message
// that a receiver's lock holds (received in PeekLock mode, its lock not
// ended) stays, and so does every dead letter; whatever its state
// otherwise (active, scheduled, deferred, expired), a message goes. It
// returns how many it deleted: a number that names no message, or a
// locked one, deletes nothing. ErrInvalidArgument, and nothing deleted,
// for no or bad sequence numbers, both numbers and a count, or a count
// out of range; ErrEntityNotFound for an entity that does not exist.
func (c *Client) DeleteMessages(ctx context.Context, entity string, opts *DeleteOptions) (int64, error) {
	if opts == nil {
		return 0, errInvalid("delete messages", "no options: name sequence numbers or a count")
	}
	p := store.DeleteParams{Queue: canonical(entity), Max: opts.Max, Before: opts.EnqueuedBefore}
	if len(opts.SequenceNumbers) > 0 {
		p.Seqs = opts.SequenceNumbers
	}
	n, err := c.partitionsOf(ctx, p.Queue)
	if err != nil || n == 1 {
		if err != nil {
			return 0, err
		}
		return c.st.DeleteMessages(ctx, &p)
	}
	return c.deleteParts(ctx, &p, n)
}

// deleteParts is DeleteMessages on a queue of n partitions: the numbers
// of each partition in one transaction, or the oldest Max of each
// partition in turn until Max are deleted.
func (c *Client) deleteParts(ctx context.Context, p *store.DeleteParams, n int) (int64, error) {
	if p.Seqs != nil && p.Max != 0 || p.Seqs == nil && (p.Max < 1 || p.Max > c.limits.MaxBatch) ||
		len(p.Seqs) > c.limits.MaxBatch || slices.ContainsFunc(p.Seqs, func(s int64) bool { return s < 1 }) {
		return c.st.DeleteMessages(ctx, p) // refused as the backend refuses it
	}
	var total int64
	if p.Seqs != nil {
		groups, _, err := groupSeqs(p.Seqs, n) // a number of no partition names no message
		if err != nil {
			return 0, fmt.Errorf("sluice: delete messages: %w", err)
		}
		for _, g := range groups {
			gp := *p
			gp.Queue, gp.Seqs = partitionQueue(p.Queue, g.part), g.seqs
			k, err := c.st.DeleteMessages(ctx, &gp)
			if total += k; err != nil {
				return total, err
			}
		}
		return total, nil
	}
	for part := 0; part < n && total < int64(p.Max); part++ {
		gp := *p
		gp.Queue, gp.Max = partitionQueue(p.Queue, part), p.Max-int(total)
		k, err := c.st.DeleteMessages(ctx, &gp)
		if total += k; err != nil {
			return total, err
		}
	}
	return total, nil
}

// PurgeMessages deletes every message of a queue or subscription that no
// lock holds (only those enqueued before enqueuedBefore, when it is not
// zero), in transactions of up to the backend's batch limit, oldest
// first, and returns how many it deleted. It deletes at most as many as
// the entity held when it began, so that senders cannot keep it running;
// locked messages and dead letters stay (PurgeDeadLetters deletes
// those). A failure leaves the batches before it deleted.
func (c *Client) PurgeMessages(ctx context.Context, entity string, enqueuedBefore time.Time) (int64, error) {
	return c.eachPartitionCount(ctx, canonical(entity), func(q string) (int64, error) {
		return c.purgePartition(ctx, q, enqueuedBefore)
	})
}

// purgePartition is PurgeMessages on one storage queue.
func (c *Client) purgePartition(ctx context.Context, entity string, enqueuedBefore time.Time) (int64, error) {
	st, err := c.st.QueueStats(ctx, entity)
	if err != nil {
		return 0, err
	}
	held := st.Active + st.Expired + st.Scheduled + st.Deferred
	var total int64
	for total < held {
		n, err := c.st.DeleteMessages(ctx, &store.DeleteParams{Queue: entity, Max: int(min(int64(c.limits.MaxBatch), held-total)),
			Before: enqueuedBefore})
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
	return total, nil
}
