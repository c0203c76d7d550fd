package store

import (
	"context"
	"database/sql"
)

// TxSettler is a Store whose settles can join a transaction the caller
// opened on the same database: a message is completed, abandoned,
// dead-lettered or deferred (and a session's state replaced) together
// with the caller's own writes, or not at all. The backends of this
// module implement it.
//
// What the caller's transaction holds until it ends: the settled
// messages' rows and, for a session, the session's row. A lease, a renewal
// or a settle of those same messages from elsewhere waits for it (the
// engine's group commit that carries it waits too, with the other writes
// of its group), so keep such transactions short. Leases of other messages
// do not wait on PostgreSQL and MariaDB/MySQL (they skip locked rows); on
// SQLite the caller's transaction holds the database's only write lock
// from its first write, and every other write waits for it.
//
// Dead-lettering in the caller's transaction is not reported to a
// DeadLetterObserver: its commit is the caller's.
type TxSettler interface {
	// SettleTx settles messages in tx, all or none. It checks every
	// receipt first, by the database's clock, and writes nothing when one
	// does not hold its message (ErrLockLost), or, with p.Session, when
	// the session lock does not hold (ErrSessionLockLost): tx is then left
	// as it was, usable, for the caller to commit its other writes or roll
	// back. After any other error tx may be aborted (PostgreSQL refuses
	// every statement after a failed one): roll it back.
	SettleTx(ctx context.Context, tx Tx, p *SettleTxParams) error
	// SetSessionStateTx replaces a held session's state in tx (nil clears
	// it); ErrSessionLockLost, with nothing written and tx usable, when
	// the lock does not hold.
	SetSessionStateTx(ctx context.Context, tx Tx, p *SessionStateParams) error
}

// SettleTxParams settle messages of one queue in a caller's transaction.
type SettleTxParams struct {
	// SettleParams say what to do with which messages: Complete, Abandon,
	// DeadLetter or Defer (Extend and Release have no use in a caller's
	// transaction and are refused). A receipt may appear once.
	SettleParams
	// Session, on a queue that requires sessions, is the session lock the
	// caller holds: the messages must be leased under it. It must be nil
	// on other queues.
	Session *SessionParams
}

// Validate checks a settle in a caller's transaction.
func (p *SettleTxParams) Validate(l Limits) error {
	if err := p.SettleParams.Validate(l); err != nil {
		return err
	}
	switch p.Action {
	case Complete, Abandon, DeadLetter, Defer:
	default:
		return invalid("%s in a caller's transaction: complete, abandon, dead-letter or defer", p.Action)
	}
	seen := make(map[int64]bool, len(p.Receipts))
	for _, rc := range p.Receipts {
		if seen[rc.Seq] {
			return invalid("message %d given twice in one settle", rc.Seq)
		}
		seen[rc.Seq] = true
	}
	if p.Session != nil {
		if err := p.Session.Validate(false); err != nil {
			return err
		}
		if p.Session.Queue != p.Queue {
			return invalid("session of queue %q settles messages of queue %q", p.Session.Queue, p.Queue)
		}
	}
	return nil
}

// TxBeginner is a Backend that opens transactions on its own database,
// for a caller that writes its rows and sluice's in one transaction
// (EnqueueTx, AppendTx, SettleTx) with no pool of its own. The backends
// of this module implement it. On SQLite the transaction holds the
// backend's only write connection until it ends: make no other sluice
// call that writes while it is open, or that call waits for it.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// TxHandledRecorder is a Store that records, in a transaction the caller
// opened on the same database, that a subscription's handler handled a
// stream event: the record commits with the handler's effects, or not at
// all, so that a delivery of the event after a crash, or after a
// rollback, can tell whether its effects are in. The backends of this
// module implement it.
type TxHandledRecorder interface {
	// MarkHandledTx records p's event in tx and reports whether it was
	// recorded for the first time; false means a committed transaction
	// recorded it before (one recording it concurrently is waited for).
	// Records at or below the subscription's stored position on the
	// partition, which no delivery consults again, are deleted now and
	// then in the same transaction.
	MarkHandledTx(ctx context.Context, tx Tx, p *HandledParams) (first bool, err error)
}

// HandledParams name a stream event delivered to a subscription.
type HandledParams struct {
	Subscription string
	Partition    int32
	// Position is the event's position in the partition (from 1).
	Position int64
}

// Validate checks a handled event's names and numbers.
func (p *HandledParams) Validate() error {
	if err := ValidateName("subscription id", p.Subscription); err != nil {
		return err
	}
	if p.Partition < 0 {
		return invalid("partition %d: must not be negative", p.Partition)
	}
	if p.Position < 1 {
		return invalid("position %d: positions start at 1", p.Position)
	}
	return nil
}
