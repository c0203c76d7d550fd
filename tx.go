package sluice

import "github.com/sluicehq/sluice/store"

// Tx is the application's transaction that the *Tx calls (SendTx,
// PublishTx, CompleteTx and the other settlements in a transaction,
// SetSessionStateTx) write in, on the database sluice's tables are in.
// A *sql.Tx is one, on every backend. On PostgreSQL a pgx.Tx is one once
// wrapped: postgres.WrapTx(tx) (package store/postgres). Any other value,
// a *sql.DB included, fails with ErrInvalidArgument, as does a wrapped
// transaction of another backend's database: writes outside the
// application's transaction would not be atomic with its own.
type Tx = store.Tx
