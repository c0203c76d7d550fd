package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Duplicate detection. A queue with a window keeps one row per message id
// (with partition key) it accepted, in sluice_dedup, until the window
// ends. An enqueue group to such a queue first locks the queue's counter
// row, which serializes every enqueue of the queue on every node; then it
// reads which of its ids are already there, takes numbers for the rest
// only, and records their ids. A duplicate stores nothing and gets the
// first message's sequence number; the window is counted from the first
// send, as in Service Bus.

// dedupKey is what duplicate detection compares: the message id, with the
// partition key when there is one. Messages without an id are never
// duplicates.
func dedupKey(m *store.NewMessage) string {
	if m.MessageID == "" || m.DeadLetterReason != "" {
		// A copy dead-lettered on arrival is stored whatever its id: as a
		// duplicate it would carry, and dead-letter, the first one's number.
		return ""
	}
	return idKey(m.MessageID, m.PartitionKey)
}

// idKey is the duplicate-detection key of a message id and partition key.
func idKey(messageID, partitionKey string) string {
	// The partition key's length (0 when none) keeps pairs apart whatever
	// they hold.
	return strconv.Itoa(len(partitionKey)) + ":" + partitionKey + messageID
}

// dedupRow is one accepted id as UpsertDedup takes it.
type dedupRow struct {
	Key     string `json:"k"`
	Seq     int64  `json:"s"`
	Expires int64  `json:"e"`
}

// enqueueDedup writes a group of enqueues to a queue with duplicate
// detection.
func (e *Engine) enqueueDedup(ctx context.Context, gt *groupTx, group []*writeReq) error {
	t, queue := group[0].t, group[0].enq.Queue
	// Lock the counter row before reading the ids, so that no other group
	// of this queue accepts the same id meanwhile; then read the queue
	// again, for the time now that the lock is held.
	var last int64
	err := e.queryRow(ctx, gt.tx, "LockQueue", []any{t.Service, t.Provider, queue}, &last)
	if errors.Is(err, sql.ErrNoRows) {
		for _, r := range group {
			r.err = fmt.Errorf("queue %q: %w", queue, sluicetype.ErrQueueNotFound)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("LockQueue: %w", err)
	}
	qr, err := e.getQueue(ctx, gt.tx, t, queue)
	if err != nil {
		return err
	}
	gt.queues[queueID{t, queue}] = qr
	var keys []string
	for _, r := range group {
		for i := range r.enq.Messages {
			if k := dedupKey(&r.enq.Messages[i]); k != "" {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	seen := make(map[string]int64, len(keys))
	if len(keys) > 0 {
		js, err := jsonText(keys)
		if err != nil {
			return err
		}
		rows, err := e.query(ctx, gt.tx, "SelectDedup", t.Service, t.Provider, queue, qr.now, js)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				k   string
				seq int64
			)
			if err := rows.Scan(&k, &seq); err != nil {
				rows.Close()
				return fmt.Errorf("SelectDedup: %w", err)
			}
			seen[k] = seq
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("SelectDedup: %w", err)
		}
	}
	// Number the new messages; a duplicate, of a stored id or of one
	// earlier in the group, gets that message's number.
	type pending struct {
		r   *writeReq
		i   int
		key string
	}
	var fresh []pending
	taken := make(map[string]bool)
	for _, r := range group {
		r.seqs = make([]int64, len(r.enq.Messages))
		for i := range r.enq.Messages {
			k := dedupKey(&r.enq.Messages[i])
			if _, dup := seen[k]; k != "" && (dup || taken[k]) {
				continue
			}
			if k != "" {
				taken[k] = true
			}
			fresh = append(fresh, pending{r, i, k})
		}
	}
	if len(fresh) > 0 {
		if qr, err = e.reserveSeqs(ctx, gt, t, queue, len(fresh)); err != nil {
			return err
		}
	}
	seq := qr.lastSeq - int64(len(fresh))
	rows := make([]messageRow, 0, len(fresh))
	var accepted []dedupRow
	until := qr.now + ms(qr.settings.DuplicateDetectionWindow)
	for _, p := range fresh {
		seq++
		p.r.seqs[p.i] = seq
		row, err := newMessageRow(&p.r.enq.Messages[p.i], seq, qr)
		if err != nil {
			return err
		}
		gt.share(p.r.t, &row, p.r.enq.Messages[p.i].Payload)
		rows = append(rows, row)
		if p.key != "" {
			seen[p.key] = seq
			accepted = append(accepted, dedupRow{Key: p.key, Seq: seq, Expires: until})
		}
	}
	for _, r := range group {
		for i := range r.enq.Messages {
			if r.seqs[i] == 0 {
				r.seqs[i] = seen[dedupKey(&r.enq.Messages[i])]
			}
		}
		r.signals = []string{QueueKey(t, queue)}
	}
	if len(rows) == 0 {
		return nil
	}
	if err := e.insertMessages(ctx, gt.tx, t, queue, qr.now, rows); err != nil {
		return err
	}
	if err := e.activateSessions(ctx, gt.tx, t, &qr, rows); err != nil {
		return err
	}
	if len(accepted) > 0 {
		js, err := jsonText(accepted)
		if err != nil {
			return err
		}
		if _, err := e.exec(ctx, gt.tx, "UpsertDedup", t.Service, t.Provider, queue, js); err != nil {
			return err
		}
	}
	if e.d.NotifyOnReserve {
		return nil
	}
	return e.notify(ctx, gt.tx, QueueKey(t, queue))
}
