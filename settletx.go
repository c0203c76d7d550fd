package sluice

import (
	"context"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Settling in the caller's transaction.
//
// CompleteTx, AbandonTx, DeadLetterTx and DeferTx settle a message in a
// transaction tx that the application opened on the same database (with
// a driver and settings that reach sluice's tables: on PostgreSQL, a
// search_path that includes sluice's schema; on SQLite, BEGIN IMMEDIATE,
// as the modernc driver's _txlock=immediate gives): a *sql.Tx, or on
// PostgreSQL a pgx.Tx wrapped by postgres.WrapTx (see Tx). The settlement
// commits with the application's own writes in tx, or not at all: a
// handler that writes its effects and completes its message in one
// transaction has exactly-once effects on that database. If tx rolls
// back (or the process dies before it commits), the message stays locked
// until its lock ends and is then delivered again, its delivery counted.
//
// Each call checks the lock first, by the database's clock: when it does
// not hold the message (ErrLockLost; ErrSessionLockLost for a session
// whose lock ended), nothing is written and tx is left as it was, for the
// application to commit its other writes or roll back. After any other
// error, roll tx back.
//
// The message's row (and a session's row) stays locked until tx ends: a
// renewal or another settlement of that message waits for it, and with
// it the group commit that carries it, that is every write of this
// process's client meanwhile (a Processor renews the locks of the
// messages its handlers hold). So commit soon after settling, and settle
// before sending in tx (SendTx), which is the order the engine locks
// rows in. On SQLite tx holds the database's only write
// lock from its first write: make no other sluice call that writes while
// it is open.
//
// The ReceivedMessage does not learn the outcome: it is not marked
// settled, since the call cannot know whether tx will commit. After a
// commit, a later Complete (or any settlement) of it fails with
// ErrLockLost, the message being gone; after a rollback, one succeeds
// while its lock holds. A Processor leaves a message its handler settled
// in a transaction to that transaction: it stops renewing the message's
// lock (a renewal would wait for tx's row lock) and, when the handler
// returns nil, does not complete it; if tx rolled back, the message
// comes back when its lock ends. A handler that returns an error is
// abandoned as usual. Settlements in tx are not reported to
// ObserveMessages, nor its dead-lettering to the storage's dead-letter
// observers: their commit is the caller's. A lost lock is reported, as
// for any settlement.

// CompleteTx removes a message received in PeekLock mode, in the
// caller's transaction tx (see the notes on settling in a transaction).
func (r *Receiver) CompleteTx(ctx context.Context, tx Tx, m *ReceivedMessage) error {
	return r.settleTx(ctx, tx, "complete", m, store.SettleParams{Action: store.Complete}, nil, nil)
}

// AbandonTx releases a message's lock in the caller's transaction tx, as
// Abandon does once tx commits. nil opts change nothing else.
func (r *Receiver) AbandonTx(ctx context.Context, tx Tx, m *ReceivedMessage, opts *AbandonOptions) error {
	var changes map[string]string
	if opts != nil {
		changes = opts.PropertiesToModify
	}
	return r.settleTx(ctx, tx, "abandon", m, store.SettleParams{Action: store.Abandon}, changes, nil)
}

// DeadLetterTx moves a message to the queue's dead-letter queue in the
// caller's transaction tx.
func (r *Receiver) DeadLetterTx(ctx context.Context, tx Tx, m *ReceivedMessage, opts *DeadLetterOptions) error {
	p := store.SettleParams{Action: store.DeadLetter}
	var changes map[string]string
	if opts != nil {
		p.Reason, p.Description, changes = opts.Reason, opts.Description, opts.PropertiesToModify
	}
	return r.settleTx(ctx, tx, "dead-letter", m, p, changes, nil)
}

// DeferTx sets a message aside in the caller's transaction tx, as Defer
// does once tx commits.
func (r *Receiver) DeferTx(ctx context.Context, tx Tx, m *ReceivedMessage, opts *DeferOptions) error {
	var changes map[string]string
	if opts != nil {
		changes = opts.PropertiesToModify
	}
	return r.settleTx(ctx, tx, "defer", m, store.SettleParams{Action: store.Defer}, changes, nil)
}

// settleTx settles m in tx, under session when it is not nil, and under
// the client's instrumentation.
func (r *Receiver) settleTx(ctx context.Context, tx Tx, op string, m *ReceivedMessage, p store.SettleParams, changes map[string]string, session *store.SessionParams) error {
	return r.traceSettleTx(ctx, settleAction(p.Action), m, func(ctx context.Context) error {
		return r.settleInTx(ctx, tx, op, m, p, changes, session)
	})
}

// settleInTx does settleTx's work.
func (r *Receiver) settleInTx(ctx context.Context, tx Tx, op string, m *ReceivedMessage, p store.SettleParams, changes map[string]string, session *store.SessionParams) error {
	ts, ok := r.c.st.(store.TxSettler)
	switch {
	case !ok:
		return errInvalid(op, "this backend cannot join a caller's transaction")
	case tx == nil:
		return errInvalid(op, "nil transaction")
	case r.mode == ReceiveAndDelete:
		return errInvalid(op, "a receiver in ReceiveAndDelete mode has nothing to settle")
	case r.dead:
		return errInvalid(op, "dead letters cannot be settled in a transaction: complete or abandon them with Complete or Abandon")
	}
	receipt, err := r.check(op, m)
	if err != nil {
		return err
	}
	if p.Properties, err = r.merged(ctx, op, m, receipt, changes); err != nil {
		return err
	}
	// A partitioned queue's message is settled in its partition.
	part, own := splitSeq(receipt.Seq)
	p.Queue, p.Receipts = partitionQueue(r.queue, part), []sluicetype.Receipt{{Seq: own, Token: receipt.Token}}
	err = ts.SettleTx(ctx, tx, &store.SettleTxParams{SettleParams: p, Session: session})
	r.noteLockLost(err)
	if err == nil {
		m.settledTx.Store(true)
	}
	return err
}

// CompleteTx removes a message of the session in the caller's
// transaction tx, under the session's lock (see the notes on settling in
// a transaction); SetSessionStateTx in the same tx records the session's
// progress with it.
func (s *SessionReceiver) CompleteTx(ctx context.Context, tx Tx, m *ReceivedMessage) error {
	p := s.params()
	return s.r.settleTx(ctx, tx, "complete", m, store.SettleParams{Action: store.Complete}, nil, &p)
}

// AbandonTx makes a message of the session available again in the
// caller's transaction tx; it comes next, before later messages of the
// session.
func (s *SessionReceiver) AbandonTx(ctx context.Context, tx Tx, m *ReceivedMessage, opts *AbandonOptions) error {
	var changes map[string]string
	if opts != nil {
		changes = opts.PropertiesToModify
	}
	p := s.params()
	return s.r.settleTx(ctx, tx, "abandon", m, store.SettleParams{Action: store.Abandon}, changes, &p)
}

// DeadLetterTx moves a message of the session to the dead-letter queue in
// the caller's transaction tx.
func (s *SessionReceiver) DeadLetterTx(ctx context.Context, tx Tx, m *ReceivedMessage, opts *DeadLetterOptions) error {
	sp := store.SettleParams{Action: store.DeadLetter}
	var changes map[string]string
	if opts != nil {
		sp.Reason, sp.Description, changes = opts.Reason, opts.Description, opts.PropertiesToModify
	}
	p := s.params()
	return s.r.settleTx(ctx, tx, "dead-letter", m, sp, changes, &p)
}

// DeferTx sets a message of the session aside in the caller's
// transaction tx.
func (s *SessionReceiver) DeferTx(ctx context.Context, tx Tx, m *ReceivedMessage, opts *DeferOptions) error {
	var changes map[string]string
	if opts != nil {
		changes = opts.PropertiesToModify
	}
	p := s.params()
	return s.r.settleTx(ctx, tx, "defer", m, store.SettleParams{Action: store.Defer}, changes, &p)
}

// SetSessionStateTx replaces the session's state in the caller's
// transaction tx (nil clears it): it commits with tx, or not at all.
// ErrSessionLockLost, with nothing written and tx usable, once the
// session lock has ended.
func (s *SessionReceiver) SetSessionStateTx(ctx context.Context, tx Tx, state []byte) error {
	const op = "set session state"
	ts, ok := s.r.c.st.(store.TxSettler)
	switch {
	case !ok:
		return errInvalid(op, "this backend cannot join a caller's transaction")
	case tx == nil:
		return errInvalid(op, "nil transaction")
	}
	return ts.SetSessionStateTx(ctx, tx, &store.SessionStateParams{SessionParams: s.params(), State: state})
}
