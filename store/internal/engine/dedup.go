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
// detection: it locks the queue, reads which of the group's ids the
// window already holds, numbers the new messages only, gives each
// duplicate the number of the message it repeats, and stores the new
// messages with their ids.
func (e *Engine) enqueueDedup(ctx context.Context, gt *groupTx, group []*writeReq) error {
	t, queue := group[0].t, group[0].enq.Queue
	qr, ok, err := e.lockDedupQueue(ctx, gt, group)
	if err != nil || !ok {
		return err
	}
	seen, err := e.selectSeen(ctx, gt.tx, t, queue, qr.now, dedupKeys(group))
	if err != nil {
		return err
	}
	fresh := freshMessages(group, seen)
	if len(fresh) > 0 {
		if qr, err = e.reserveSeqs(ctx, gt, t, queue, len(fresh)); err != nil {
			return err
		}
	}
	rows, accepted, err := numberFresh(gt, qr, fresh, seen)
	if err != nil {
		return err
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
	return e.storeDeduped(ctx, gt, t, queue, &qr, rows, accepted)
}

// lockDedupQueue locks the queue's counter row before the group's ids
// are read, so that no other group of this queue accepts the same id
// meanwhile, then reads the queue again for the time now that the lock
// is held. When the queue does not exist every request of the group
// fails with ErrQueueNotFound and ok is false.
func (e *Engine) lockDedupQueue(ctx context.Context, gt *groupTx, group []*writeReq) (qr queueRow, ok bool, err error) {
	t, queue := group[0].t, group[0].enq.Queue
	var last int64
	err = e.queryRow(ctx, gt.tx, qLockQueue, []any{t.Service, t.Provider, queue}, &last)
	if errors.Is(err, sql.ErrNoRows) {
		for _, r := range group {
			r.err = fmt.Errorf("queue %q: %w", queue, sluicetype.ErrQueueNotFound)
		}
		return qr, false, nil
	}
	if err != nil {
		return qr, false, fmt.Errorf("LockQueue: %w", err)
	}
	if qr, err = e.getQueue(ctx, gt.tx, t, queue); err != nil {
		return qr, false, err
	}
	gt.queues[queueID{t, queue}] = qr
	return qr, true, nil
}

// dedupKeys returns the group's duplicate-detection keys, sorted, each
// once.
func dedupKeys(group []*writeReq) []string {
	var keys []string
	for _, r := range group {
		for i := range r.enq.Messages {
			if k := dedupKey(&r.enq.Messages[i]); k != "" {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// selectSeen returns the sequence numbers of the keys whose window has
// not ended, by key.
func (e *Engine) selectSeen(ctx context.Context, tx querier, t store.Tenant, queue string, now int64, keys []string) (map[string]int64, error) {
	seen := make(map[string]int64, len(keys))
	if len(keys) == 0 {
		return seen, nil
	}
	js, err := jsonText(keys)
	if err != nil {
		return nil, err
	}
	rows, err := e.query(ctx, tx, qSelectDedup, t.Service, t.Provider, queue, now, js)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k   string
			seq int64
		)
		if err := rows.Scan(&k, &seq); err != nil {
			return nil, fmt.Errorf("SelectDedup: %w", err)
		}
		seen[k] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("SelectDedup: %w", err)
	}
	return seen, nil
}

// freshMessage is a message of a group that is no duplicate: of request
// r, at index i, with duplicate-detection key key ("" for none).
type freshMessage struct {
	r   *writeReq
	i   int
	key string
}

// freshMessages sizes every request's sequence numbers and returns, in
// order, the messages that are duplicates neither of a stored id nor of
// one earlier in the group.
func freshMessages(group []*writeReq, seen map[string]int64) []freshMessage {
	var fresh []freshMessage
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
			fresh = append(fresh, freshMessage{r, i, k})
		}
	}
	return fresh
}

// numberFresh gives the fresh messages the last len(fresh) numbers qr
// reserved, in order, and returns their rows and the ids they make
// duplicates of until the window ends; seen learns each new id's number.
func numberFresh(gt *groupTx, qr queueRow, fresh []freshMessage, seen map[string]int64) ([]messageRow, []dedupRow, error) {
	seq := qr.lastSeq - int64(len(fresh))
	rows := make([]messageRow, 0, len(fresh))
	var accepted []dedupRow
	until := qr.now + ms(qr.settings.DuplicateDetectionWindow)
	for _, p := range fresh {
		seq++
		p.r.seqs[p.i] = seq
		row, err := newMessageRow(&p.r.enq.Messages[p.i], seq, qr)
		if err != nil {
			return nil, nil, err
		}
		gt.share(p.r.t, &row, p.r.enq.Messages[p.i].Payload)
		rows = append(rows, row)
		if p.key != "" {
			seen[p.key] = seq
			accepted = append(accepted, dedupRow{Key: p.key, Seq: seq, Expires: until})
		}
	}
	return rows, accepted, nil
}

// storeDeduped inserts the new messages, activates their sessions,
// records their ids and notifies receivers.
func (e *Engine) storeDeduped(ctx context.Context, gt *groupTx, t store.Tenant, queue string, qr *queueRow, rows []messageRow, accepted []dedupRow) error {
	if err := e.insertMessages(ctx, gt, t, queue, qr.now, rows); err != nil {
		return err
	}
	if err := e.activateSessions(ctx, gt.tx, t, qr, rows); err != nil {
		return err
	}
	if len(accepted) > 0 {
		js, err := jsonText(accepted)
		if err != nil {
			return err
		}
		if _, err := e.exec(ctx, gt.tx, qUpsertDedup, t.Service, t.Provider, queue, js); err != nil {
			return err
		}
	}
	if e.d.Capabilities.NotifyOnReserve {
		return nil
	}
	return e.notify(ctx, gt.tx, QueueKey(t, queue))
}
