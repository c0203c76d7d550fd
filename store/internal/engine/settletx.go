package engine

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var _ store.TxSettler = (*tenantStore)(nil)

// SettleTx settles messages in the caller's transaction, all or none.
// Its locks come in the engine's order: the session's row (as a session's
// own operations take it), then the messages' rows in sequence order (as
// a group's settles take them); it takes no queue counter row, so a
// caller that also sends in tx should settle first, as the group commit
// does. Every check runs before the first write, so that a lost lock
// leaves tx as it was.
func (s *tenantStore) SettleTx(ctx context.Context, tx store.Tx, p *store.SettleTxParams) error {
	op := fmt.Sprintf("sluice: %s", p.Action)
	if err := p.Validate(s.e.limits); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	q, err := s.e.foreign(tx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	qr, err := s.heldForSettle(ctx, q, p)
	if err != nil {
		return fmt.Errorf("%s: %w", op, s.e.wrap(err))
	}
	held, err := s.e.selectHeld(ctx, q, s.t, &qr, receiptSeqs(p.Receipts))
	if err != nil {
		return fmt.Errorf("%s: %w", op, s.e.wrap(err))
	}
	for _, rc := range p.Receipts {
		if h, ok := held[rc.Seq]; !ok || h.token != rc.Token {
			return fmt.Errorf("%s: message %d: %w", op, rc.Seq, sluicetype.ErrLockLost)
		}
	}
	r := &writeReq{t: s.t, settle: &p.SettleParams}
	var completed []int64
	if err := s.e.settleOne(ctx, q, s.t, &qr, r, held, &completed); err != nil {
		return fmt.Errorf("%s: %w", op, s.e.wrap(err))
	}
	if len(completed) == 0 {
		return nil
	}
	slices.Sort(completed)
	if _, err := s.e.exec(ctx, q, qDeleteMessages, s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(completed)); err != nil {
		return fmt.Errorf("%s: %w", op, s.e.wrap(err))
	}
	return nil
}

// heldForSettle reads the queue of a settle in tx and, on a queue that
// requires sessions, checks (and locks) the session lock the caller
// names.
func (s *tenantStore) heldForSettle(ctx context.Context, q querier, p *store.SettleTxParams) (queueRow, error) {
	qr, err := s.e.getQueue(ctx, q, s.t, p.Queue)
	if err != nil {
		return qr, err
	}
	switch {
	case qr.settings.RequiresSession && p.Session == nil:
		return qr, fmt.Errorf("queue %q requires sessions: settle its messages under their session's lock: %w", p.Queue, sluicetype.ErrSessionRequired)
	case !qr.settings.RequiresSession && p.Session != nil:
		return qr, fmt.Errorf("queue %q does not require sessions: %w", p.Queue, sluicetype.ErrInvalidArgument)
	case p.Session != nil:
		if _, err := s.heldSession(ctx, q, &qr, p.Session); err != nil {
			return qr, err
		}
		for _, rc := range p.Receipts {
			if rc.Token != p.Session.Token {
				return qr, fmt.Errorf("message %d is not held under session %q's lock: %w", rc.Seq, p.Session.SessionID, sluicetype.ErrLockLost)
			}
		}
	}
	return qr, nil
}

func receiptSeqs(rs []sluicetype.Receipt) []int64 {
	out := make([]int64, len(rs))
	for i, rc := range rs {
		out[i] = rc.Seq
	}
	return out
}

// SetSessionStateTx replaces a held session's state in the caller's
// transaction, which keeps the session's row locked until it ends.
func (s *tenantStore) SetSessionStateTx(ctx context.Context, tx store.Tx, p *store.SessionStateParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sluice: set session state: %w", err)
	}
	q, err := s.e.foreign(tx)
	if err != nil {
		return fmt.Errorf("sluice: set session state: %w", err)
	}
	if err := s.setSessionState(ctx, q, p); err != nil {
		return fmt.Errorf("sluice: set session state: %w", s.e.wrap(err))
	}
	return nil
}

var _ store.TxBeginner = (*Engine)(nil)

// BeginTx opens a transaction on the engine's write pool.
func (e *Engine) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	if e.isClosed() {
		return nil, fmt.Errorf("sluice: begin: %w", sluicetype.ErrClosed)
	}
	tx, err := e.w.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("sluice: begin: %w", e.wrap(err))
	}
	return tx, nil
}
