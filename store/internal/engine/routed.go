package engine

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Routed schedules. A message sent to a topic, or to a queue that
// forwards, is stored as copies in other queues; yet its sender must be
// able to cancel it by one number, as it cancels a message of a plain
// queue. Each scheduled message of such a send takes a number from the
// counter of the queue it was sent to, and sluice_routed_schedules maps
// the number to its copies until its time comes. The counter's numbers
// name either a message of the queue or a routed send, never both, so a
// cancel needs no flag to tell them apart.

// routedRow is one row of InsertRoutedSchedules: a copy, or with an empty
// Queue, the send itself.
type routedRow struct {
	Seq       int64  `json:"s"`
	Queue     string `json:"q"`
	CopySeq   int64  `json:"c"`
	VisibleAt int64  `json:"v"`
}

// numberRouted numbers the scheduled messages of a routed send, once its
// batches were enqueued, and records where their copies went. It holds
// the sent-to queue's counter row until commit (see apply for the lock
// order), and deletes the rows of the queue's routed sends whose time
// has come.
func (e *Engine) numberRouted(ctx context.Context, gt *groupTx, t store.Tenant, a allReq) error {
	rs := a.r.all.Routed
	a.r.routed = make([]int64, len(rs.VisibleAt))
	qr, err := gt.queue(ctx, e, t, rs.Queue)
	if err != nil {
		return err
	}
	// A message its first duplicate check dropped takes no number.
	later := func(i int) bool {
		return timeMS(rs.VisibleAt[i]) > qr.now && (a.dup == nil || !a.dup[i])
	}
	n := 0
	for i := range rs.VisibleAt {
		if later(i) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if qr, err = e.reserveSeqs(ctx, gt, t, rs.Queue, n); err != nil {
		return err
	}
	if _, err := e.exec(ctx, gt.tx, qDeleteDueRoutedSchedules, t.Service, t.Provider, rs.Queue, qr.now); err != nil {
		return err
	}
	seq := qr.lastSeq - int64(n)
	var rows []routedRow
	for i, at := range rs.VisibleAt {
		if !later(i) {
			continue
		}
		seq++
		a.r.routed[i] = seq
		rows = append(rows, routedRow{Seq: seq, VisibleAt: timeMS(at)})
	}
	type copyID struct {
		seq   int64
		queue string
		copy  int64
	}
	seen := make(map[copyID]bool)
	for b := range a.r.all.Batches {
		batch := &a.r.all.Batches[b]
		for j, origin := range rs.Origins[b] {
			sent := a.r.routed[origin]
			m := &batch.Messages[j]
			id := copyID{sent, batch.Queue, a.r.allSeqs[b][j]}
			// A copy dead-lettered on arrival is not scheduled; a
			// duplicate, on a queue with duplicate detection, shares the
			// first message's number, once; one dropped by a duplicate
			// check has none.
			if sent == 0 || m.DeadLetterReason != "" || id.copy == 0 || seen[id] {
				continue
			}
			seen[id] = true
			rows = append(rows, routedRow{Seq: sent, Queue: id.queue, CopySeq: id.copy, VisibleAt: timeMS(rs.VisibleAt[origin])})
		}
	}
	js, err := jsonText(rows)
	if err != nil {
		return err
	}
	_, err = e.exec(ctx, gt.tx, qInsertRoutedSchedules, t.Service, t.Provider, rs.Queue, js)
	return err
}

// cancelRouted cancels routed sends of a queue by their numbers: it
// deletes their copies that are still scheduled, and their rows. Every
// number must name a routed send whose time has not come.
func (e *Engine) cancelRouted(ctx context.Context, tx *sql.Tx, t store.Tenant, queue string, now int64, seqs []int64) error {
	list := e.d.IntList(seqs)
	found, err := e.int64s(ctx, tx, qSelectRoutedSchedules, t.Service, t.Provider, queue, now, list)
	if err != nil {
		return err
	}
	for _, seq := range seqs {
		if _, ok := slices.BinarySearch(found, seq); !ok {
			return fmt.Errorf("scheduled message %d of %q: %w", seq, queue, sluicetype.ErrMessageNotFound)
		}
	}
	copies, err := e.routedCopies(ctx, tx, t, queue, list)
	if err != nil {
		return err
	}
	for _, c := range copies {
		// Only copies still waiting: one that is a duplicate of a message
		// delivered since is left alone.
		waiting, err := e.int64s(ctx, tx, qSelectScheduled, t.Service, t.Provider, c.queue, now, e.d.IntList(c.seqs))
		if err != nil {
			return err
		}
		if len(waiting) == 0 {
			continue
		}
		if _, err := e.exec(ctx, tx, qDeleteMessages, t.Service, t.Provider, c.queue, e.d.IntList(waiting)); err != nil {
			return err
		}
	}
	_, err = e.exec(ctx, tx, qDeleteRoutedSchedules, t.Service, t.Provider, queue, list)
	return err
}

// queueCopies are the copies of routed sends in one queue.
type queueCopies struct {
	queue string
	seqs  []int64
}

// routedCopies returns the copies of routed sends, by queue in name order
// and in sequence order within a queue: the order cancels lock them in.
func (e *Engine) routedCopies(ctx context.Context, tx *sql.Tx, t store.Tenant, queue string, list any) ([]queueCopies, error) {
	rows, err := e.query(ctx, tx, qSelectRoutedCopies, t.Service, t.Provider, queue, list)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queueCopies
	for rows.Next() {
		var q string
		var seq int64
		if err := rows.Scan(&q, &seq); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].queue != q {
			out = append(out, queueCopies{queue: q})
		}
		last := &out[len(out)-1]
		if n := len(last.seqs); n > 0 && last.seqs[n-1] == seq {
			continue // a copy two sends share, as duplicates
		}
		last.seqs = append(last.seqs, seq)
	}
	return out, rows.Err()
}
