package engine

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// dueBatch bounds how many ended leases and schedules one lease call
// promotes (or dead-letters) before it takes messages.
const dueBatch = 256

// resolveDue handles leased and scheduled rows whose time has come: a
// leased row on its last allowed delivery goes to dead letters, an expired
// one expires (never a deferred one, which is deferred again), and the
// rest become ready again, in sequence order with the others. Rows another transaction holds are skipped.
func (e *Engine) resolveDue(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, limit int) (store.EvictResult, error) {
	var res store.EvictResult
	rows, err := e.query(ctx, tx, qSelectDue, t.Service, t.Provider, qr.settings.Name, qr.now, limit)
	if err != nil {
		return res, err
	}
	var (
		ready, exhausted, expired []int64
		scheduled                 []dueRow
	)
	for rows.Next() {
		var (
			d        dueRow
			state    int
			count    int
			expires  sql.NullInt64
			deferred int
			mid, pk  sql.NullString
		)
		if err := rows.Scan(&d.seq, &state, &count, &expires, &deferred, &d.visibleAt, &mid, &pk); err != nil {
			rows.Close()
			return res, fmt.Errorf("SelectDue: %w", err)
		}
		switch {
		case sluicetype.MessageState(state) == sluicetype.StateLeased && count >= qr.settings.MaxDeliveryCount:
			exhausted = append(exhausted, d.seq)
		case deferred != 0:
			// A deferred message never expires: its lease ended, and it
			// is deferred again (MakeReady).
			ready = append(ready, d.seq)
		case expires.Valid && expires.Int64 <= qr.now:
			expired = append(expired, d.seq)
		case sluicetype.MessageState(state) == sluicetype.StateScheduled && count == 0:
			if mid.Valid {
				d.key = idKey(mid.String, pk.String)
			}
			scheduled = append(scheduled, d)
		default:
			ready = append(ready, d.seq)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("SelectDue: %w", err)
	}
	if len(ready) > 0 {
		slices.Sort(ready)
		if _, err := e.exec(ctx, tx, qMakeReady, t.Service, t.Provider, qr.settings.Name, e.d.IntList(ready)); err != nil {
			return res, err
		}
		e.noteLowered(t, qr.settings.Name)
	}
	activated, err := e.activate(ctx, tx, t, qr, scheduled)
	if err != nil {
		return res, err
	}
	if available := append(ready, activated...); len(available) > 0 && qr.settings.RequiresSession {
		slices.Sort(available)
		if _, err := e.exec(ctx, tx, qActivateSessions, t.Service, t.Provider, qr.settings.Name, e.d.IntList(available)); err != nil {
			return res, err
		}
	}
	desc := fmt.Sprintf("the lease ended after the last of %d allowed deliveries", qr.settings.MaxDeliveryCount)
	if err := e.deadLetter(ctx, tx, t, qr, exhausted, sluicetype.ReasonMaxDeliveryCountExceeded, desc); err != nil {
		return res, err
	}
	if err := e.expire(ctx, tx, t, qr, expired); err != nil {
		return res, err
	}
	res.Exhausted, res.Expired = int64(len(exhausted)), int64(len(expired))
	return res, nil
}

// dueRow is a scheduled message whose time has come.
type dueRow struct {
	seq       int64
	visibleAt int64
	// key is its duplicate-detection key ("" without a message id).
	key string
}

// activate appends scheduled messages whose time has come as if they were
// enqueued now, as Service Bus does: in order of their time, each takes a
// new number from the queue's counter (gap-free and in commit order, as an
// enqueue's), becomes ready and counts as enqueued now; the number it had
// while scheduled names nothing any more. On a queue with duplicate
// detection, their ids then name the new numbers. The counter row is
// taken only if no other transaction holds it, so that a lease never
// waits; otherwise the messages stay due for the next lease or eviction.
// It returns the new numbers.
func (e *Engine) activate(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, due []dueRow) ([]int64, error) {
	if len(due) == 0 {
		return nil, nil
	}
	queue := qr.settings.Name
	var last int64
	err := e.queryRow(ctx, tx, qTryLockQueue, []any{t.Service, t.Provider, queue}, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("TryLockQueue: %w", err)
	}
	if last, err = e.takeSeqs(ctx, tx, t, queue, len(due)); err != nil {
		return nil, err
	}
	qr.lastSeq = last
	slices.SortFunc(due, func(a, b dueRow) int {
		return cmp.Or(cmp.Compare(a.visibleAt, b.visibleAt), cmp.Compare(a.seq, b.seq))
	})
	mapping := make([]seqMapping, len(due))
	var keys []renumberRow
	seqs := make([]int64, len(due))
	for i, d := range due {
		seqs[i] = last - int64(len(due)-1-i)
		mapping[i] = seqMapping{Old: d.seq, New: seqs[i]}
		if d.key != "" && qr.settings.DuplicateDetectionWindow > 0 {
			keys = append(keys, renumberRow{Key: d.key, Old: d.seq, New: seqs[i]})
		}
	}
	js, err := jsonText(mapping)
	if err != nil {
		return nil, err
	}
	if _, err := e.exec(ctx, tx, qActivateScheduled, t.Service, t.Provider, queue, js, qr.now); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return seqs, nil
	}
	if js, err = jsonText(keys); err != nil {
		return nil, err
	}
	if _, err := e.exec(ctx, tx, qRenumberDedup, t.Service, t.Provider, queue, js); err != nil {
		return nil, err
	}
	return seqs, nil
}

// renumberRow is one id of RenumberDedup.
type renumberRow struct {
	Key string `json:"k"`
	Old int64  `json:"o"`
	New int64  `json:"n"`
}

func (s *tenantStore) CancelScheduled(ctx context.Context, p *store.CancelParams) error {
	if err := p.Validate(s.e.limits); err != nil {
		return fmt.Errorf("sluice: cancel scheduled: %w", err)
	}
	sorted := slices.Clone(p.Seqs)
	slices.Sort(sorted)
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.e.getQueue(ctx, tx, s.t, p.Queue)
		if err != nil {
			return err
		}
		found, err := s.e.int64s(ctx, tx, qSelectScheduled, s.t.Service, s.t.Provider, p.Queue, qr.now, s.e.d.IntList(sorted))
		if err != nil {
			return err
		}
		// The other numbers may name routed sends: messages sent to this
		// topic or forwarding queue, stored as copies elsewhere.
		var routed []int64
		for _, seq := range sorted {
			if _, ok := slices.BinarySearch(found, seq); !ok {
				routed = append(routed, seq)
			}
		}
		if len(found) > 0 {
			if _, err := s.e.exec(ctx, tx, qDeleteMessages, s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(found)); err != nil {
				return err
			}
		}
		if len(routed) == 0 {
			return nil
		}
		return s.e.cancelRouted(ctx, tx, s.t, p.Queue, qr.now, routed)
	})
	if err != nil {
		return fmt.Errorf("sluice: cancel scheduled: %w", err)
	}
	return nil
}
