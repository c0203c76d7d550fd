package engine

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

func (s *tenantStore) Settle(ctx context.Context, p *store.SettleParams) ([]store.SettleResult, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: %s: %w", p.Action, err)
	}
	r := &writeReq{t: s.t, settle: p}
	if err := s.e.commit.submit(ctx, r); err != nil {
		return nil, fmt.Errorf("sluice: %s: %w", p.Action, err)
	}
	return r.settled, nil
}

type heldRow struct {
	token int64
	count int
}

// settleGroup settles the requests of one queue. It locks every message
// they name in one statement, in sequence order, then applies each
// request against what it found: a receipt whose lease ended, whose token
// differs, or whose message an earlier request of the group settled gets
// ErrLockLost.
func (e *Engine) settleGroup(ctx context.Context, gt *groupTx, group []*writeReq) error {
	if e.d.Capabilities.CompleteStatement && allComplete(group) {
		return e.completeGroup(ctx, gt.tx, group)
	}
	t, queue := group[0].t, group[0].settle.Queue
	tx := gt.tx
	qr, ok, err := e.groupQueue(ctx, gt, group, queue)
	if !ok {
		return err
	}
	var all []int64
	for _, r := range group {
		for _, rc := range r.settle.Receipts {
			all = append(all, rc.Seq)
		}
	}
	held, err := e.selectHeld(ctx, tx, t, &qr, all)
	if err != nil {
		return err
	}
	// Completions of the whole group go in one statement.
	var completed []int64
	for _, r := range group {
		if err := e.settleOne(ctx, tx, t, &qr, r, held, &completed); err != nil {
			return err
		}
	}
	if len(completed) == 0 {
		return nil
	}
	slices.Sort(completed)
	_, err = e.exec(ctx, tx, qDeleteMessages, t.Service, t.Provider, queue, e.d.IntList(completed))
	return err
}

// selectHeld locks, in sequence order, the rows of seqs whose lease has
// not ended by the database's clock, and returns their lock tokens and
// delivery counts by sequence number.
func (e *Engine) selectHeld(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, seqs []int64) (map[int64]heldRow, error) {
	sorted := slices.Compact(slices.Sorted(slices.Values(seqs)))
	held := make(map[int64]heldRow, len(sorted))
	rows, err := e.query(ctx, tx, qSelectHeld, t.Service, t.Provider, qr.settings.Name, qr.now, e.d.IntList(sorted))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			seq int64
			h   heldRow
		)
		if err := rows.Scan(&seq, &h.token, &h.count); err != nil {
			return nil, fmt.Errorf("SelectHeld: %w", err)
		}
		held[seq] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("SelectHeld: %w", err)
	}
	return held, nil
}

func allComplete(group []*writeReq) bool {
	for _, r := range group {
		if r.settle.Action != store.Complete {
			return false
		}
	}
	return true
}

// completeGroup settles a group of completions with one statement, where
// the dialect has CompleteMessages (in the group's transaction, or alone
// when q is the write pool): it deletes, in sequence order, the messages
// whose current lease the receipts name, and returns them. A receipt that
// names a message a receipt before it completed gets ErrLockLost, as in
// settleGroup.
func (e *Engine) completeGroup(ctx context.Context, q querier, group []*writeReq) error {
	s, err := e.completeStmt(group)
	if err != nil {
		return err
	}
	return e.runStmt(ctx, q, s)
}

// completeStmt is CompleteMessages for a group of completions of one
// queue.
func (e *Engine) completeStmt(group []*writeReq) (*pipedStmt, error) {
	t, queue := group[0].t, group[0].settle.Queue
	seen := make(map[sluicetype.Receipt]bool)
	var receipts []receiptRow
	for _, r := range group {
		for _, rc := range r.settle.Receipts {
			if !seen[rc] {
				seen[rc] = true
				receipts = append(receipts, receiptRow{Seq: rc.Seq, Token: rc.Token})
			}
		}
	}
	slices.SortFunc(receipts, func(a, b receiptRow) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Token, b.Token))
	})
	js, err := jsonText(receipts)
	if err != nil {
		return nil, err
	}
	s := &pipedStmt{name: qCompleteMessages, reqs: group, args: []any{t.Service, t.Provider, queue, js}}
	s.read = func(rs rows) error {
		found := false
		done := make(map[sluicetype.Receipt]bool, len(receipts))
		for rs.Next() {
			found = true
			var seq, token sql.NullInt64
			if err := rs.Scan(&seq, &token); err != nil {
				return fmt.Errorf("CompleteMessages: %w", err)
			}
			if seq.Valid {
				done[sluicetype.Receipt{Seq: seq.Int64, Token: token.Int64}] = true
			}
		}
		if err := rs.Err(); err != nil {
			return fmt.Errorf("CompleteMessages: %w", err)
		}
		if !found {
			for _, r := range group {
				r.err = fmt.Errorf("queue %q: %w", queue, sluicetype.ErrQueueNotFound)
			}
			return nil
		}
		for _, r := range group {
			r.settled = make([]store.SettleResult, len(r.settle.Receipts))
			for i, rc := range r.settle.Receipts {
				if !done[rc] {
					r.settled[i].Err = fmt.Errorf("message %d: %w", rc.Seq, sluicetype.ErrLockLost)
					continue
				}
				delete(done, rc)
			}
		}
		return nil
	}
	return s, nil
}

// settleOne applies one request; completions are added to completed for
// the caller to delete in one go.
func (e *Engine) settleOne(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, r *writeReq, held map[int64]heldRow, completed *[]int64) error {
	p := r.settle
	r.settled = make([]store.SettleResult, len(p.Receipts))
	var mine, exhausted []int64
	for i, rc := range p.Receipts {
		h, ok := held[rc.Seq]
		if !ok || h.token != rc.Token {
			r.settled[i].Err = fmt.Errorf("message %d: %w", rc.Seq, sluicetype.ErrLockLost)
			continue
		}
		if p.Action != store.Extend {
			delete(held, rc.Seq)
		}
		if p.Action == store.Abandon && h.count >= qr.settings.MaxDeliveryCount {
			exhausted = append(exhausted, rc.Seq)
			continue
		}
		mine = append(mine, rc.Seq)
	}
	slices.Sort(mine)
	mine = slices.Compact(mine)
	if p.Properties != nil {
		if err := e.setProperties(ctx, tx, t, qr, p.Properties, append(slices.Clone(mine), exhausted...)); err != nil {
			return err
		}
	}
	switch p.Action {
	case store.Complete:
		*completed = append(*completed, mine...)
	case store.DeadLetter:
		return e.deadLetter(ctx, tx, t, qr, mine, p.Reason, p.Description)
	case store.Abandon:
		desc := fmt.Sprintf("abandoned on the last of %d allowed deliveries", qr.settings.MaxDeliveryCount)
		if err := e.deadLetter(ctx, tx, t, qr, exhausted, sluicetype.ReasonMaxDeliveryCountExceeded, desc); err != nil {
			return err
		}
		if len(mine) == 0 {
			return nil
		}
		list := e.d.IntList(mine)
		if p.Delay > 0 {
			_, err := e.exec(ctx, tx, qMakeScheduled, qr.now+ms(p.Delay), t.Service, t.Provider, qr.settings.Name, list)
			return err
		}
		if _, err := e.exec(ctx, tx, qMakeReady, t.Service, t.Provider, qr.settings.Name, list); err != nil {
			return err
		}
		e.noteLowered(t, qr.settings.Name)
		key := QueueKey(t, qr.settings.Name)
		r.signals = append(r.signals, key)
		return e.notify(ctx, tx, key)
	case store.Defer:
		if len(mine) == 0 {
			return nil
		}
		_, err := e.exec(ctx, tx, qMakeDeferred, t.Service, t.Provider, qr.settings.Name, e.d.IntList(mine))
		return err
	case store.Release:
		if len(mine) == 0 {
			return nil
		}
		if _, err := e.exec(ctx, tx, qReleaseMessages, t.Service, t.Provider, qr.settings.Name, e.d.IntList(mine)); err != nil {
			return err
		}
		e.noteLowered(t, qr.settings.Name)
		key := QueueKey(t, qr.settings.Name)
		r.signals = append(r.signals, key)
		return e.notify(ctx, tx, key)
	case store.Extend:
		if len(mine) == 0 {
			return nil
		}
		until := qr.now + ms(p.Extension)
		if _, err := e.exec(ctx, tx, qExtendLeases, until, t.Service, t.Provider, qr.settings.Name, e.d.IntList(mine)); err != nil {
			return err
		}
		for i := range r.settled {
			if r.settled[i].Err == nil {
				r.settled[i].LockedUntil = fromMS(until)
			}
		}
	}
	return nil
}

// setProperties replaces the application properties of messages.
func (e *Engine) setProperties(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, props map[string]string, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	slices.Sort(seqs)
	enc, err := encodeProps(props)
	if err != nil {
		return err
	}
	_, err = e.exec(ctx, tx, qSetProperties, nullable(enc), t.Service, t.Provider, qr.settings.Name, e.d.IntList(seqs))
	return err
}
