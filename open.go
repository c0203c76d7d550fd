package sluice

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"

	dsnpkg "github.com/sluicehq/sluice/internal/dsn"
	"github.com/sluicehq/sluice/store"
)

// Options tune Open, OpenDB, NewClient, OpenBackend and NewMigrator.
// Zero values take defaults, and a nil *Options is all defaults: as
// everywhere in sluice, options that may be left out are passed by
// pointer, required settings (a server's Config, an entity's properties
// on update) by value.
type Options struct {
	// Service and Provider name the tenant a client works in (default
	// "default" and "default"): deployments sharing one database see only
	// their own entities.
	Service  string
	Provider string
	// Limits bound message and batch sizes.
	Limits store.Limits
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// StreamPartitions is the number of stream partitions streams hash onto
	// (default 16). The first client to use streams records it in the
	// database; a client or processor configured with another number
	// fails with ErrPartitionCount.
	StreamPartitions int32
	// MaxConns caps the connections of the pool Open opens (default 16 on
	// PostgreSQL and MariaDB/MySQL; on SQLite, the readers' pool, default
	// max(4, GOMAXPROCS), writes having one connection of their own).
	// Negative or above store.MaxPoolConns is ErrInvalidArgument. A pool
	// the application passes (OpenDB) keeps its own size.
	MaxConns int
	// CommitPipelines is how many group commits run at once on PostgreSQL
	// and MariaDB/MySQL, each on a connection of the pool (default 2;
	// SQLite writes through one connection and has one). Producers' writes
	// go to the first half, consumers' to the rest: each queue's sends,
	// each queue's receives and settles, and each stream partition's
	// appends go through one pipeline, so one queue's producers and
	// consumers commit at the same time. A group that waits for a row a
	// caller's open transaction holds (an open SendTx holds its queue's
	// counter row) does not hold its pipeline: the pipeline moves on, and
	// later sends to the entities that had a send in that group wait
	// with it. On PostgreSQL a
	// group that spans queues commits in one round trip, so a database
	// server with 2 cores served the most independent queues with 2 (one
	// pipeline for all sends); raise it where the server has cores to
	// spare. Negative, or not below MaxConns, is ErrInvalidArgument.
	CommitPipelines int
	// SkipMigrations opens without applying migrations (leave them to
	// `sluice migrate up` or a Migrator): the database's schema must be
	// at the version this build requires, else opening fails with a
	// *SchemaVersionError matching ErrSchemaTooOld or ErrSchemaTooNew.
	SkipMigrations bool
}

// orDefault returns opts, or for nil the zero Options, whose fields all
// take their defaults.
func (opts *Options) orDefault() *Options {
	if opts == nil {
		return &Options{}
	}
	return opts
}

// openOptions returns the settings opts gives a backend.
func (opts *Options) openOptions() store.OpenOptions {
	return store.OpenOptions{Limits: opts.Limits, Logger: opts.Logger, MaxConns: opts.MaxConns, CommitPipelines: opts.CommitPipelines, SkipMigrations: opts.SkipMigrations}
}

// RedactDSN returns dsn with its credentials masked, for a message or a
// log: the password of a URL (postgres://, mysql://) and its password
// query parameters, the password settings of a keyword/value DSN
// (password=...), and the password of go-sql-driver/mysql's form
// (user:pass@tcp(host)/db); a SQLite path is returned unchanged. sluice
// shows a DSN nowhere else.
func RedactDSN(dsn string) string { return dsnpkg.Redact(dsn) }

// OpenBackend opens the database a DSN names and, unless
// opts.SkipMigrations, applies migrations:
//
//   - sqlite://PATH, file:PATH or a bare PATH: an embedded SQLite file
//     (?synchronous=NORMAL trades the last commits on power loss for
//     speed; default FULL);
//   - postgres://... or postgresql://...: PostgreSQL (pgx DSN);
//   - mysql://user:pass@host:port/db: MariaDB or MySQL.
//
// The program must import the backend package of the DSN's database
// (as it imports a database/sql driver), e.g.
//
//	import _ "github.com/sluicehq/sluice/store/postgres"
//
// else OpenBackend fails with ErrInvalidArgument naming the package.
// Its errors show the DSN with its credentials masked (RedactDSN).
func OpenBackend(ctx context.Context, dsn string, opts *Options) (store.Backend, error) {
	opts = opts.orDefault()
	o, err := store.Lookup(dsn)
	if err != nil {
		return nil, redactError(fmt.Errorf("sluice: open: %w", err), dsn)
	}
	b, err := o.Open(ctx, dsn, opts.openOptions())
	if err != nil {
		return nil, redactError(err, dsn)
	}
	return b, nil
}

// OpenBackendDB opens a backend on the application's pool, found by its
// driver among the linked backends, and, unless opts.SkipMigrations,
// applies migrations. The backend's Close leaves db open. What each
// database needs of the pool's connections is in the backend package's
// OpenDB (SQLite: WAL mode and a busy timeout; MariaDB/MySQL: UTC, READ
// COMMITTED, utf8mb4); on PostgreSQL a *pgxpool.Pool is taken by
// postgres.OpenPool.
func OpenBackendDB(ctx context.Context, db *sql.DB, opts *Options) (store.Backend, error) {
	opts = opts.orDefault()
	if db == nil {
		return nil, fmt.Errorf("sluice: open: the *sql.DB is nil: %w", ErrInvalidArgument)
	}
	o, err := store.LookupDriver(db.Driver())
	if err != nil {
		return nil, fmt.Errorf("sluice: open: %w", err)
	}
	return o.OpenDB(ctx, db, opts.openOptions())
}

// redactError masks dsn's credentials in err's message wherever it
// quotes dsn (a DSN misread as a SQLite path, say). errors.Is and
// errors.As still see err.
func redactError(err error, dsn string) error {
	if red := dsnpkg.Redact(dsn); red != dsn && strings.Contains(err.Error(), dsn) {
		return &redactedError{msg: strings.ReplaceAll(err.Error(), dsn, red), err: err}
	}
	return err
}

// redactedError is an error whose message was masked.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
