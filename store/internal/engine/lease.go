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

func (s *tenantStore) Lease(ctx context.Context, p *store.LeaseParams) ([]sluicetype.Leased, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: lease: %w", err)
	}
	r := &writeReq{t: s.t, lease: p}
	if err := s.e.commit.submit(ctx, r); err != nil {
		return nil, fmt.Errorf("sluice: lease: %w", err)
	}
	if qr := r.queue; qr.evictAt <= qr.now {
		s.evictInBackground(p.Queue, qr)
	}
	return r.leased, nil
}

// groupQueue reads the queue a group of requests names. When it does not
// exist, every request of the group fails with ErrQueueNotFound, the
// transaction goes on for the other groups, and ok is false.
func (e *Engine) groupQueue(ctx context.Context, gt *groupTx, group []*writeReq, queue string) (qr queueRow, ok bool, err error) {
	qr, err = gt.queue(ctx, e, group[0].t, queue)
	if errors.Is(err, sluicetype.ErrQueueNotFound) {
		for _, r := range group {
			r.err = err
		}
		return qr, false, nil
	}
	return qr, err == nil, err
}

// leaseChunk bounds the rows one SelectReady of a lease group reads.
const leaseChunk = 2000

// leaseGroup serves the leases of one queue: it resolves ended leases and
// schedules once, reads the first ready messages in sequence order that no
// one else holds for several requests at a time (consumers woken by the
// same enqueue ask together), and hands them out in arrival order, each
// request under a fresh lock token of its own, with one update.
func (e *Engine) leaseGroup(ctx context.Context, gt *groupTx, group []*writeReq) error {
	t, queue := group[0].t, group[0].lease.Queue
	qr, ok, err := e.groupQueue(ctx, gt, group, queue)
	if !ok {
		return err
	}
	if qr.settings.RequiresSession {
		for _, r := range group {
			r.err = fmt.Errorf("queue %q requires sessions: accept a session to receive: %w", queue, sluicetype.ErrSessionRequired)
		}
		return nil
	}
	if qr.nextDue.Valid && qr.nextDue.Int64 <= qr.now {
		if _, err = e.resolveDue(ctx, gt.tx, t, &qr, dueBatch); err != nil {
			return err
		}
	}
	for _, r := range group {
		r.queue = qr
	}
	for start := 0; start < len(group); {
		end, want := start, 0
		for end < len(group) && (end == start || want+group[end].lease.Max <= leaseChunk) {
			want += group[end].lease.Max
			end++
		}
		msgs, err := e.selectReady(ctx, gt.tx, t, queue, qr.now, want)
		if err != nil {
			return err
		}
		drained := len(msgs) < want
		rows := make([]leaseRow, 0, len(msgs))
		for _, r := range group[start:end] {
			n := min(r.lease.Max, len(msgs))
			rows = leaseTo(rows, t, &qr, r, msgs[:n])
			msgs = msgs[n:]
		}
		if err := e.leaseRows(ctx, gt.tx, t, queue, rows); err != nil {
			return err
		}
		if drained {
			// The queue has no more ready messages: the rest of the group
			// gets none now.
			return nil
		}
		start = end
	}
	return nil
}

func (e *Engine) selectReady(ctx context.Context, tx querier, t store.Tenant, queue string, now int64, limit int) ([]sluicetype.Message, error) {
	rows, err := e.query(ctx, tx, qSelectReady, t.Service, t.Provider, queue, now, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	msgs := make([]sluicetype.Message, 0, min(limit, 64))
	for rows.Next() {
		m, err := scanMessage(&rows)
		if err != nil {
			return nil, fmt.Errorf("SelectReady: %w", err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("SelectReady: %w", err)
	}
	return msgs, nil
}

// leaseRows marks the rows leased, in one statement or, where the dialect
// says LeasePerRequest, one per request (per token).
func (e *Engine) leaseRows(ctx context.Context, tx querier, t store.Tenant, queue string, rows []leaseRow) error {
	if len(rows) == 0 {
		return nil
	}
	if !e.d.Capabilities.LeasePerRequest {
		js, err := jsonText(rows)
		if err != nil {
			return err
		}
		_, err = e.exec(ctx, tx, qLeaseMessages, t.Service, t.Provider, queue, js)
		return err
	}
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Token == rows[start].Token {
			end++
		}
		seqs := make([]int64, 0, end-start)
		for _, r := range rows[start:end] {
			seqs = append(seqs, r.Seq)
		}
		if _, err := e.exec(ctx, tx, qLeaseMessages, rows[start].Token, rows[start].Until,
			t.Service, t.Provider, queue, e.d.IntList(seqs)); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// leaseTo hands msgs to one request under a fresh token and adds the
// rows to update to rows.
func leaseTo(rows []leaseRow, t store.Tenant, qr *queueRow, r *writeReq, msgs []sluicetype.Message) []leaseRow {
	p := r.lease
	if len(msgs) == 0 {
		return rows
	}
	var mine []leaseRow
	r.leased, mine = leaseUnder(msgs, newToken(), qr.now+ms(p.Visibility))
	if len(msgs) == p.Max {
		// There may be more than this call took: wake another leaser.
		r.signals = append(r.signals, QueueKey(t, p.Queue))
	}
	return append(rows, mine...)
}

// leaseUnder hands msgs out under one token until a lock end: the leased
// messages as returned, and the rows to update.
func leaseUnder(msgs []sluicetype.Message, token, until int64) ([]sluicetype.Leased, []leaseRow) {
	leased := make([]sluicetype.Leased, len(msgs))
	rows := make([]leaseRow, len(msgs))
	for i, m := range msgs {
		m.DeliveryCount++
		m.State = sluicetype.StateLeased
		m.VisibleAt = fromMS(until)
		leased[i] = sluicetype.Leased{Message: m, Receipt: sluicetype.Receipt{Seq: m.Seq, Token: token}, LockedUntil: fromMS(until)}
		rows[i] = leaseRow{Seq: m.Seq, Token: token, Until: until}
	}
	return leased, rows
}

func (s *tenantStore) LeaseDeferred(ctx context.Context, p *store.LeaseDeferredParams) ([]sluicetype.Leased, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: lease deferred: %w", err)
	}
	sorted := slices.Clone(p.Seqs)
	slices.Sort(sorted)
	var out []sluicetype.Leased
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.e.getQueue(ctx, tx, s.t, p.Queue)
		if err != nil {
			return err
		}
		var session *store.SessionParams
		until := qr.now + ms(p.Visibility)
		switch {
		case qr.settings.RequiresSession && p.Session == nil:
			return fmt.Errorf("queue %q requires sessions: receive deferred messages under a session: %w", p.Queue, sluicetype.ErrSessionRequired)
		case qr.settings.RequiresSession:
			session = p.Session
			if until, err = s.heldSession(ctx, tx, &qr, session); err != nil {
				return err
			}
		case p.Session != nil:
			return fmt.Errorf("queue %q does not require sessions: %w", p.Queue, sluicetype.ErrInvalidArgument)
		}
		// A deferred message whose lease ended is deferred again once the
		// ended leases are resolved.
		if qr.nextDue.Valid && qr.nextDue.Int64 <= qr.now {
			if _, err := s.e.resolveDue(ctx, tx, s.t, &qr, dueBatch); err != nil {
				return err
			}
		}
		rows, err := s.e.query(ctx, tx, qSelectDeferred, s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(sorted))
		if err != nil {
			return err
		}
		found := make(map[int64]sluicetype.Message, len(sorted))
		for rows.Next() {
			m, err := scanMessage(&rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("SelectDeferred: %w", err)
			}
			found[m.Seq] = m
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("SelectDeferred: %w", err)
		}
		msgs := make([]sluicetype.Message, len(p.Seqs))
		for i, seq := range p.Seqs {
			m, ok := found[seq]
			if !ok || session != nil && m.SessionID != session.SessionID {
				return fmt.Errorf("deferred message %d of queue %q: %w", seq, p.Queue, sluicetype.ErrMessageNotFound)
			}
			msgs[i] = m
		}
		token := newToken()
		if session != nil {
			token = session.Token
		}
		var leased []leaseRow
		out, leased = leaseUnder(msgs, token, until)
		slices.SortFunc(leased, func(a, b leaseRow) int { return cmp.Compare(a.Seq, b.Seq) })
		if err := s.e.leaseRows(ctx, tx, s.t, p.Queue, leased); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: lease deferred: %w", err)
	}
	return out, nil
}
