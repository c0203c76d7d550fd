// Package postgres is sluice's PostgreSQL backend. It runs the shared
// storage engine over pgx's database/sql adapter, with SQL written for
// PostgreSQL: leases take rows with FOR UPDATE SKIP LOCKED, so concurrent
// leasers in many processes never wait on each other, and every enqueue,
// abandon and append sends a NOTIFY that wakes waiting leasers and readers
// in every other process at once (store.Features.CrossProcessWake).
//
// The tables live in one schema (Config.Schema, default public), created
// if missing, so several deployments can share one database.
//
// Durability: the backend leaves synchronous_commit as the server has it
// (on by default): a write is durable before Enqueue or Append returns.
// Group commit amortizes the flush over the writes that arrive together.
package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/internal/dsn"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the schema's migrations in this dialect, one SQL
// file a version (0001_init.sql, ...), for an operator or a DBA to read.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the directory is embedded
	}
	return sub
}

//go:embed queries/*.sql
var queries embed.FS

// defaultMaxConns is the size of the pool Open opens. Each commit
// pipeline (engine.Config.Pipelines) holds one connection while its
// group commits; the rest serves eviction, resubmits, checkpoints and
// reads.
const defaultMaxConns = 16

// schemaLockKey serializes CREATE SCHEMA IF NOT EXISTS between processes
// opening the same database at once ("sluice" in ASCII, plus one; the
// migration lock uses the key without the one).
const schemaLockKey = 126879297332070

// Config opens a PostgreSQL backend.
type Config struct {
	// DSN is a pgx connection string, postgres://user:pass@host:port/db?...
	// or "host=... user=... dbname=...". It may carry
	// sluice_pgbouncer=transaction (see PgBouncer).
	DSN string
	// Schema is the PostgreSQL schema holding sluice's tables, created if
	// missing. It defaults to the search_path parameter of the DSN (taken
	// as one schema name, e.g. postgres://host/db?search_path=sluice), then
	// to "public". Connections use it as their only search_path.
	Schema string
	// Limits bound calls; zero fields take defaults.
	Limits store.Limits
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// VacuumInterval is how often sluice vacuums its tables itself when
	// autovacuum is off for them (on the server, or for sluice_messages):
	// default 10s; negative, never. Dead row versions left by leases and
	// completions otherwise slow every lease down without bound.
	VacuumInterval time.Duration
	// MaxConns caps the pool's connections (default 16), besides the one
	// that listens for wake-ups.
	MaxConns int
	// CommitPipelines is how many group commits run at once, each on a
	// connection of the pool (default 2; see
	// store.OpenOptions.CommitPipelines).
	CommitPipelines int
	// SkipMigrations opens without migrating: the schema must be at this
	// build's version (see store.OpenOptions.SkipMigrations).
	SkipMigrations bool
	// PgBouncer says the DSN reaches PostgreSQL through PgBouncer in
	// transaction pooling mode ("transaction"; "" or "session": directly,
	// or through session pooling, where everything works). In
	// transaction mode a server connection is not the client's beyond
	// one transaction, so sluice gives up what needs the session: it
	// does not LISTEN (other processes' writes are noticed on the next
	// poll, Features.CrossProcessWake is false), it prepares no named
	// statement (every query is sent with its text) and it never vacuums
	// its tables itself (keep autovacuum on). In a DSN:
	// sluice_pgbouncer=transaction.
	PgBouncer string

	// readyFloorGap is engine.Config.ReadyFloorGap, for tests.
	readyFloorGap int64
}

// options returns the settings a Config shares with every backend.
func (cfg Config) options() store.OpenOptions {
	return store.OpenOptions{Limits: cfg.Limits, Logger: cfg.Logger, MaxConns: cfg.MaxConns, CommitPipelines: cfg.CommitPipelines, SkipMigrations: cfg.SkipMigrations}
}

// Open connects to PostgreSQL, creates the schema if needed, applies
// migrations and starts listening for wake-ups from other processes.
func Open(ctx context.Context, cfg Config) (store.Backend, error) {
	cc, err := connConfig(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cc)
	n := cmp.Or(cfg.MaxConns, defaultMaxConns)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(5 * time.Minute)
	b, err := start(ctx, db, cc, cfg, false)
	if err != nil {
		db.Close()
		return nil, err
	}
	return b, nil
}

// connConfig validates cfg, completes it from its DSN, creates its
// schema and returns the configuration of sluice's connections.
func connConfig(ctx context.Context, cfg *Config) (*pgx.ConnConfig, error) {
	if cfg.DSN == "" {
		return nil, fmt.Errorf("sluice: postgres: Config.DSN is empty (try postgres://user:password@localhost:5432/dbname): %w",
			sluicetype.ErrInvalidArgument)
	}
	if err := cfg.options().Validate(); err != nil {
		return nil, fmt.Errorf("sluice: postgres: %w", err)
	}
	cc, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("sluice: postgres: DSN: %w", redactParseError(err))
	}
	if v, ok := cc.RuntimeParams[pgBouncerParam]; ok {
		// sluice's parameter, not the server's.
		delete(cc.RuntimeParams, pgBouncerParam)
		if cfg.PgBouncer == "" {
			cfg.PgBouncer = v
		}
	}
	if err := checkPgBouncer(cfg.PgBouncer); err != nil {
		return nil, err
	}
	if cfg.Schema == "" {
		// A search_path given in the DSN names the schema.
		sp := cc.RuntimeParams["search_path"]
		if strings.ContainsAny(sp, `,"$ `) {
			return nil, fmt.Errorf("sluice: postgres: the DSN's search_path %q is not one schema name: "+
				"name the one schema that holds sluice's tables (or set Config.Schema): %w", sp, sluicetype.ErrInvalidArgument)
		}
		cfg.Schema = cmp.Or(sp, "public")
	}
	if cfg.PgBouncer == pgBouncerTransaction {
		// A statement pgx would prepare (its default cache) lives on one
		// server connection, which the next transaction may not get, and
		// stays there for the next client of that connection to collide
		// with: set before createSchema's connection too.
		cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if err := createSchema(ctx, cc, cfg.Schema); err != nil {
		return nil, fmt.Errorf("sluice: postgres: schema %q: %w", cfg.Schema, err)
	}
	// Every connection, pooled or listening, resolves sluice's tables in
	// the configured schema only.
	cc.RuntimeParams["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	// A process paused in the middle of one of sluice's transactions
	// (SIGSTOP, a frozen VM) would hold its row locks, and stall every
	// other node's leases and writes, until it ran again: the server ends
	// such a transaction after this long. sluice's own transactions never
	// wait on their client that long. A DSN that sets it keeps its value.
	if _, ok := cc.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cc.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.Itoa(int(store.IdleTransactionTimeout.Milliseconds()))
	}
	return cc, nil
}

// start runs the engine on db and, unless cfg says PgBouncer's
// transaction mode or cc is nil, a listener on a connection of cc.
// keepPools leaves db open on Close.
func start(ctx context.Context, db *sql.DB, cc *pgx.ConnConfig, cfg Config, keepPools bool) (store.Backend, error) {
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	bouncer := cfg.PgBouncer == pgBouncerTransaction
	var l *listener
	if !bouncer && cc != nil {
		var err error
		if l, err = startListener(ctx, cc, log); err != nil {
			return nil, fmt.Errorf("sluice: postgres: listen: %w", err)
		}
	}
	if cfg.Schema != "" {
		if err := checkSchema(ctx, db, cfg.Schema); err != nil {
			if l != nil {
				l.stop()
			}
			return nil, err
		}
	}
	d := dialect()
	d.Features.CrossProcessWake = l != nil
	stopVacuumer := func() {}
	e, err := engine.New(ctx, engine.Config{
		Dialect:        d,
		Write:          db,
		Read:           db,
		Limits:         cfg.Limits,
		Logger:         cfg.Logger,
		Pipelines:      cfg.CommitPipelines,
		SkipMigrations: cfg.SkipMigrations,
		KeepPools:      keepPools,
		Unprepared:     bouncer,
		ReadyFloorGap:  cfg.readyFloorGap,
		OnClose: func() {
			stopVacuumer()
			if l != nil {
				l.stop()
			}
		},
	})
	if err != nil {
		if l != nil {
			l.stop()
		}
		return nil, err
	}
	// The vacuumer's election is a session lock, which transaction
	// pooling cannot keep: behind it, autovacuum must do the work.
	if cfg.VacuumInterval >= 0 && !bouncer {
		v, err := startVacuumer(ctx, db, log, cmp.Or(cfg.VacuumInterval, defaultVacuumInterval))
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("sluice: postgres: vacuum: %w", err)
		}
		stopVacuumer = v.stop
	}
	if l != nil {
		l.start(e.Hub())
	}
	return e, nil
}

// checkSchema checks that db's connections resolve tables in the schema
// sluice was configured with, before migrations create any: a server, or
// PgBouncer before 1.20, may drop the search_path startup parameter (as
// ignore_startup_parameters asks), and the tables would land in the
// server's default schema, silently.
func checkSchema(ctx context.Context, db *sql.DB, want string) error {
	var got sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&got); err != nil {
		return fmt.Errorf("sluice: postgres: schema: %w", err)
	}
	if got.String != want {
		return fmt.Errorf("sluice: postgres: connections resolve tables in schema %q, not %q: the search_path sent at connect "+
			"did not reach the server (PgBouncer's ignore_startup_parameters drops it): set it on the server "+
			"(ALTER ROLE ... SET search_path) or use the schema the connections get: %w", got.String, want, sluicetype.ErrInvalidArgument)
	}
	return nil
}

// dialect returns what the engine needs to know of PostgreSQL.
func dialect() *engine.Dialect {
	qfs, _ := fs.Sub(queries, "queries")
	mfs, _ := fs.Sub(migrations, "migrations")
	return &engine.Dialect{
		Features:   store.Features{Name: dialectName, Driver: "github.com/jackc/pgx/v5", CrossProcessWake: true, SharedStreams: true, PositionedReads: true},
		Queries:    qfs,
		Migrations: mfs,
		Capabilities: engine.Capabilities{
			TxMigrations: true, NotifyOnReserve: true, Notify: true, CompleteStatement: true, ArrayInserts: true,
			EnqueueStatement: true, LeaseStatement: true, BumpHeadReturning: true, AppendStatement: true,
			ReadyFloor: true,
		},
		IntList:  intList,
		CopyFrom: copyFrom,
		Pipeline: pipeline,
		Classify: classify,
	}
}

// copyFrom loads rows into table with COPY on a driver connection of
// pgx's database/sql driver (inside the transaction open on it).
func copyFrom(ctx context.Context, driverConn any, table string, columns []string, rows [][]any) error {
	c, ok := driverConn.(*stdlib.Conn)
	if !ok {
		return fmt.Errorf("copy: a connection of type %T, not pgx's", driverConn)
	}
	_, err := c.Conn().CopyFrom(ctx, pgx.Identifier{table}, columns, pgx.CopyFromRows(rows))
	return err
}

// redactParseError returns pgx's DSN parse error with the connection
// string it carries masked: its message masks the credentials already,
// but its ConnString, which a caller may print, holds them. errors.As
// still finds a *pgconn.ParseConfigError.
func redactParseError(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return err
	}
	red := *pe
	red.ConnString = dsn.Redact(pe.ConnString)
	return &red
}

// createSchema creates the schema name if it does not exist. It looks
// first, since CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on
// the database even when the schema exists. Two processes running CREATE
// SCHEMA IF NOT EXISTS at once can still collide, so it runs under a
// transaction-scoped advisory lock.
func createSchema(ctx context.Context, cc *pgx.ConnConfig, name string) error {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer closeConn(conn)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLockKey)); err != nil {
			return err
		}
		// An identifier cannot be a parameter; Sanitize quotes it.
		_, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{name}.Sanitize())
		return err
	})
}

// intList passes a list parameter as itself: pgx encodes []int64 as a
// bigint[], which the queries expand with unnest($n::bigint[]).
func intList(v []int64) any { return v }

// classify reports serialization failures, deadlocks and lock timeouts as
// retryable, unique-key violations as duplicates, and a connection lost
// once a request may have gone out as engine.ErrNoReply.
func classify(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		if noReply(err) {
			return engine.ErrNoReply
		}
		return nil
	}
	switch pe.Code {
	case "40001", "40P01", "55P03": // serialization_failure, deadlock_detected, lock_not_available
		return engine.ErrRetry
	case "23505": // unique_violation
		return engine.ErrDuplicate
	}
	return nil
}

// noReply reports whether err is a connection that broke, or timed out,
// once a request may have gone out. pgx marks the failures that happen
// before anything was sent as safe to retry (its database/sql driver
// turns them into driver.ErrBadConn, which database/sql retries on
// another connection); a failed connect sent nothing; a deadline that
// passed after sending is a pgconn timeout. A context's error otherwise
// (database/sql's, before sending) proves nothing went out.
//
// One exception: pgx reports a reply lost to a simple-protocol statement
// (the COMMIT of a transaction) as "conn closed" (pgconn.ErrConnClosed),
// marked safe to retry although the COMMIT went out: it peeks at the
// reply, which closes the connection on the error, then reads it from
// the closed connection. A statement about to be sent on a closed
// connection is refused as driver.ErrBadConn instead, so ErrConnClosed
// from a COMMIT, or from reading a statement's rows, means a request
// that may have run.
func noReply(err error) bool {
	var ce *pgconn.ConnectError
	switch {
	case errors.Is(err, pgconn.ErrConnClosed):
		return true
	case pgconn.SafeToRetry(err), errors.Is(err, driver.ErrBadConn), errors.As(err, &ce):
		return false
	case pgconn.Timeout(err):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// dialectName is the backend's name (Features.Name), which its wrapped
// transactions carry (Tx.TxDialect).
const dialectName = "postgres"

// pipeline sends stmts at once on a driver connection of pgx's
// database/sql driver, outside a transaction: pgx's batch, which the
// server runs as one implicit transaction (one Sync at its end).
func pipeline(ctx context.Context, driverConn any, stmts []engine.PipelineStmt) error {
	c, ok := driverConn.(*stdlib.Conn)
	if !ok {
		return fmt.Errorf("pipeline on a connection of type %T, not pgx's: %w", driverConn, errors.ErrUnsupported)
	}
	b := &pgx.Batch{}
	for _, s := range stmts {
		b.Queue(s.SQL, s.Args...)
	}
	br := c.Conn().SendBatch(ctx, b)
	for _, s := range stmts {
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return err
		}
		s.Read(txRows{rows})
		rows.Close()
		if err := rows.Err(); err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
}
