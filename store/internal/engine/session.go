package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Sessions. A queue that requires sessions keeps one row per session in
// sluice_sessions: its lock (token and end) and state, and an "active"
// flag that is set whenever a message of the session may have become
// available (an enqueue, the end of a lease or schedule, a resubmit, a
// release). Accepting the next session walks the index of active,
// unlocked sessions (active, lock_until <= now), so sessions that are
// locked are never read, and clears the flag of a session it finds
// without available messages: a false "active" costs one probe once, and
// every way a message becomes available sets the flag again in the same
// transaction.
//
// A session's messages are leased under the session's token with the
// session's lock end, so their locks end with the session's; renewing the
// session renews them.

// sessionCandidates bounds the sessions one round of an accept locks
// and probes; an accept runs up to 8 rounds.
const sessionCandidates = 4

// withSessions fails the enqueues of a group that hold a message without
// a session id (the queue requires sessions) and returns the others.
func withSessions(group []*writeReq) []*writeReq {
	kept := group[:0:0]
	for _, r := range group {
		ok := true
		for i := range r.enq.Messages {
			// A copy dead-lettered on arrival needs no session.
			if m := &r.enq.Messages[i]; m.SessionID == "" && m.DeadLetterReason == "" {
				r.err = fmt.Errorf("message %d has no session id, and queue %q requires sessions: %w",
					i, r.enq.Queue, sluicetype.ErrSessionRequired)
				ok = false
				break
			}
		}
		if ok {
			kept = append(kept, r)
		}
	}
	return kept
}

// activateSessions marks the sessions of newly inserted ready messages
// active, creating their rows, on a queue that requires sessions.
func (e *Engine) activateSessions(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, rows []messageRow) error {
	if !qr.settings.RequiresSession {
		return nil
	}
	var seqs []int64
	for _, r := range rows {
		if r.State == int(sluicetype.StateReady) {
			seqs = append(seqs, r.Seq)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	_, err := e.exec(ctx, tx, qActivateSessions, t.Service, t.Provider, qr.settings.Name, e.d.IntList(seqs))
	return err
}

// sessionQueue reads a queue in tx and checks that it requires sessions.
func (s *tenantStore) sessionQueue(ctx context.Context, tx querier, queue string) (queueRow, error) {
	qr, err := s.e.getQueue(ctx, tx, s.t, queue)
	if err != nil {
		return qr, err
	}
	if !qr.settings.RequiresSession {
		return qr, fmt.Errorf("queue %q does not require sessions: %w", queue, sluicetype.ErrInvalidArgument)
	}
	return qr, nil
}

// trimBatch bounds the idle sessions one eviction batch deletes.
const trimBatch = 64

// trimSessions deletes rows of sessions that hold nothing: no lock, no
// state, no message, and found empty by an accept (not active). A
// session seen again gets a new row.
func (s *tenantStore) trimSessions(ctx context.Context, tx querier, qr *queueRow) error {
	q := qr.settings.Name
	rows, err := s.e.query(ctx, tx, qSelectIdleSessions, s.t.Service, s.t.Provider, q, qr.now, trimBatch)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("SelectIdleSessions: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("SelectIdleSessions: %w", err)
	}
	for _, id := range ids {
		if _, err := s.e.exec(ctx, tx, qDeleteIdleSession, s.t.Service, s.t.Provider, q, id, qr.now,
			s.t.Service, s.t.Provider, q, id); err != nil {
			return err
		}
	}
	return nil
}

func (s *tenantStore) AcceptSession(ctx context.Context, p *store.AcceptSessionParams) (store.SessionLock, error) {
	if err := p.Validate(); err != nil {
		return store.SessionLock{}, fmt.Errorf("sluice: accept session: %w", err)
	}
	var lock store.SessionLock
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.sessionQueue(ctx, tx, p.Queue)
		if err != nil {
			return err
		}
		if qr.nextDue.Valid && qr.nextDue.Int64 <= qr.now {
			// Ended leases and schedules make messages available, and
			// their sessions active.
			if _, err := s.e.resolveDue(ctx, tx, s.t, &qr, dueBatch); err != nil {
				return err
			}
		}
		id := p.SessionID
		if id == "" {
			if id, err = s.nextSession(ctx, tx, &qr); err != nil || id == "" {
				// None free: commit the flags cleared on the way, so that
				// the next accept does not probe the same sessions again.
				return err
			}
		} else if _, err := s.e.exec(ctx, tx, qEnsureSession, s.t.Service, s.t.Provider, p.Queue, id); err != nil {
			return err
		}
		token, until := newToken(), qr.now+ms(p.Duration)
		n, err := s.e.exec(ctx, tx, qLockSession, token, until, s.t.Service, s.t.Provider, p.Queue, id, qr.now)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("session %q of queue %q is held by another receiver: %w", id, p.Queue, sluicetype.ErrSessionCannotBeLocked)
		}
		lock = store.SessionLock{SessionID: id, Token: token, LockedUntil: fromMS(until)}
		return nil
	})
	if err != nil {
		return store.SessionLock{}, fmt.Errorf("sluice: accept session: %w", err)
	}
	if lock.Token == 0 {
		return store.SessionLock{}, fmt.Errorf("sluice: accept session: queue %q: %w", p.Queue, sluicetype.ErrNoSessionAvailable)
	}
	return lock, nil
}

// nextSession finds an active, unlocked session with an available
// message, clearing the flag of those it finds without one; "" when there
// is none.
func (s *tenantStore) nextSession(ctx context.Context, tx querier, qr *queueRow) (string, error) {
	q := qr.settings.Name
	for round := 0; round < 8; round++ {
		rows, err := s.e.query(ctx, tx, qSelectSessionCandidates, s.t.Service, s.t.Provider, q, qr.now, sessionCandidates)
		if err != nil {
			return "", err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return "", fmt.Errorf("SelectSessionCandidates: %w", err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", fmt.Errorf("SelectSessionCandidates: %w", err)
		}
		for _, id := range ids {
			var one int
			err := s.e.queryRow(ctx, tx, qHasReadySessionMessage, []any{s.t.Service, s.t.Provider, q, id, qr.now}, &one)
			if err == nil {
				return id, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return "", fmt.Errorf("HasReadySessionMessage: %w", err)
			}
			if _, err := s.e.exec(ctx, tx, qDeactivateSession, s.t.Service, s.t.Provider, q, id); err != nil {
				return "", err
			}
		}
		if len(ids) < sessionCandidates {
			break
		}
	}
	return "", nil
}

// heldSession reads a session's lock in tx (locking the row where the
// dialect does) and returns its end; it fails with ErrSessionLockLost
// unless p's token holds it now.
func (s *tenantStore) heldSession(ctx context.Context, tx querier, qr *queueRow, p *store.SessionParams) (int64, error) {
	var (
		token sql.NullInt64
		until int64
	)
	err := s.e.queryRow(ctx, tx, qSelectSessionLock, []any{s.t.Service, s.t.Provider, p.Queue, p.SessionID}, &token, &until)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("SelectSessionLock: %w", err)
	}
	if err != nil || !token.Valid || token.Int64 != p.Token || until <= qr.now {
		return 0, fmt.Errorf("session %q of queue %q: %w", p.SessionID, p.Queue, sluicetype.ErrSessionLockLost)
	}
	return until, nil
}

func (s *tenantStore) LeaseSession(ctx context.Context, p *store.LeaseSessionParams) ([]sluicetype.Leased, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: lease session: %w", err)
	}
	var out []sluicetype.Leased
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		out = nil
		qr, err := s.sessionQueue(ctx, tx, p.Queue)
		if err != nil {
			return err
		}
		until, err := s.heldSession(ctx, tx, &qr, &p.SessionParams)
		if err != nil {
			return err
		}
		if qr.nextDue.Valid && qr.nextDue.Int64 <= qr.now {
			if _, err := s.e.resolveDue(ctx, tx, s.t, &qr, dueBatch); err != nil {
				return err
			}
		}
		// A message of the session whose lease or schedule ended, and that
		// is not ready yet (another transaction resolving it holds it, or
		// it was beyond this one's batch), or that an abandon delays,
		// comes before every later one: lease only what precedes it.
		var first sql.NullInt64
		if err := s.e.queryRow(ctx, tx, qFirstSessionDue, []any{s.t.Service, s.t.Provider, p.Queue, p.SessionID, qr.now,
			s.t.Service, s.t.Provider, p.Queue, p.SessionID, qr.now}, &first); err != nil {
			return fmt.Errorf("FirstSessionDue: %w", err)
		}
		rows, err := s.e.query(ctx, tx, qSelectSessionReady, s.t.Service, s.t.Provider, p.Queue, p.SessionID, qr.now, p.Max)
		if err != nil {
			return err
		}
		var msgs []sluicetype.Message
		for rows.Next() {
			m, err := scanMessage(&rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("SelectSessionReady: %w", err)
			}
			if first.Valid && m.Seq > first.Int64 {
				break
			}
			msgs = append(msgs, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("SelectSessionReady: %w", err)
		}
		var lease []leaseRow
		out, lease = leaseUnder(msgs, p.Token, until)
		return s.e.leaseRows(ctx, tx, s.t, p.Queue, lease)
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: lease session: %w", err)
	}
	return out, nil
}

func (s *tenantStore) RenewSession(ctx context.Context, p *store.SessionParams) (time.Time, error) {
	if err := p.Validate(true); err != nil {
		return time.Time{}, fmt.Errorf("sluice: renew session: %w", err)
	}
	var until int64
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.sessionQueue(ctx, tx, p.Queue)
		if err != nil {
			return err
		}
		if _, err := s.heldSession(ctx, tx, &qr, p); err != nil {
			return err
		}
		until = qr.now + ms(p.Duration)
		if _, err := s.e.exec(ctx, tx, qRenewSession, until, s.t.Service, s.t.Provider, p.Queue, p.SessionID, p.Token); err != nil {
			return err
		}
		_, err = s.e.exec(ctx, tx, qExtendSessionMessages, until, s.t.Service, s.t.Provider, p.Queue, p.SessionID, p.Token)
		return err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("sluice: renew session: %w", err)
	}
	return fromMS(until), nil
}

func (s *tenantStore) ReleaseSession(ctx context.Context, p *store.SessionParams) error {
	if err := p.Validate(false); err != nil {
		return fmt.Errorf("sluice: release session: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.sessionQueue(ctx, tx, p.Queue)
		if err != nil {
			return err
		}
		if _, err := s.heldSession(ctx, tx, &qr, p); err != nil {
			return err
		}
		// A release is not a delivery (Service Bus counts a session lock
		// that expires, not a close): the messages go back with the
		// delivery their lease counted given back, and none is
		// dead-lettered for it.
		if _, err := s.e.exec(ctx, tx, qReleaseSessionMessages, s.t.Service, s.t.Provider, p.Queue, p.SessionID, p.Token); err != nil {
			return err
		}
		_, err = s.e.exec(ctx, tx, qReleaseSession, s.t.Service, s.t.Provider, p.Queue, p.SessionID, p.Token)
		return err
	})
	if err != nil {
		return fmt.Errorf("sluice: release session: %w", err)
	}
	s.e.hub.Signal(QueueKey(s.t, p.Queue))
	return nil
}

func (s *tenantStore) SessionState(ctx context.Context, p *store.SessionParams) ([]byte, error) {
	if err := p.Validate(false); err != nil {
		return nil, fmt.Errorf("sluice: session state: %w", err)
	}
	var state []byte
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.sessionQueue(ctx, tx, p.Queue)
		if err != nil {
			return err
		}
		if _, err := s.heldSession(ctx, tx, &qr, p); err != nil {
			return err
		}
		return s.e.queryRow(ctx, tx, qGetSessionState, []any{s.t.Service, s.t.Provider, p.Queue, p.SessionID}, &state)
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: session state: %w", err)
	}
	return state, nil
}

func (s *tenantStore) SetSessionState(ctx context.Context, p *store.SessionStateParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sluice: set session state: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error { return s.setSessionState(ctx, tx, p) })
	if err != nil {
		return fmt.Errorf("sluice: set session state: %w", err)
	}
	return nil
}

// setSessionState replaces a held session's state in tx.
func (s *tenantStore) setSessionState(ctx context.Context, tx querier, p *store.SessionStateParams) error {
	qr, err := s.sessionQueue(ctx, tx, p.Queue)
	if err != nil {
		return err
	}
	if _, err := s.heldSession(ctx, tx, &qr, &p.SessionParams); err != nil {
		return err
	}
	var state any
	if p.State != nil {
		state = slices.Clone(p.State)
	}
	_, err = s.e.exec(ctx, tx, qSetSessionState, state, s.t.Service, s.t.Provider, p.Queue, p.SessionID)
	return err
}

func (s *tenantStore) SessionHeld(ctx context.Context, p *store.SessionParams) (bool, error) {
	if err := p.Validate(false); err != nil {
		return false, fmt.Errorf("sluice: session held: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.sessionQueue(ctx, tx, p.Queue)
		if err != nil {
			return err
		}
		_, err = s.heldSession(ctx, tx, &qr, p)
		return err
	})
	if errors.Is(err, sluicetype.ErrSessionLockLost) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sluice: session held: %w", err)
	}
	return true, nil
}
