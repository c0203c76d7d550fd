package sluice

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	dsnpkg "github.com/sluicehq/sluice/internal/dsn"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/mysql"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/sqlite"
)

// Options tune Open, NewClient and OpenBackend. Zero values take
// defaults.
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
	// SQLiteSynchronous is SQLite's synchronous setting ("FULL" or
	// "NORMAL"; default FULL).
	SQLiteSynchronous string
	// StreamPartitions is the number of partitions streams hash onto
	// (default 16). The first client to use streams records it in the
	// database; a client or processor configured with another number
	// fails with ErrPartitionCount.
	StreamPartitions int32
}

// RedactDSN returns dsn with its credentials masked, for a message or a
// log: the password of a URL (postgres://, mysql://) and its password
// query parameters, the password settings of a keyword/value DSN
// (password=...), and the password of go-sql-driver/mysql's form
// (user:pass@tcp(host)/db); a SQLite path is returned unchanged. sluice
// shows a DSN nowhere else.
func RedactDSN(dsn string) string { return dsnpkg.Redact(dsn) }

// Migrations returns the schema's migrations for the database a DSN names
// (any scheme OpenBackend takes), one SQL file a version in the order
// they apply, without connecting to it: for a DBA to review. OpenBackend
// applies those not yet applied.
func Migrations(dsn string) (fs.FS, error) {
	scheme, _, found := strings.Cut(dsn, "://")
	if !found {
		scheme = "sqlite"
	}
	switch scheme {
	case "sqlite", "sqlite3", "file":
		return sqlite.Migrations(), nil
	case "postgres", "postgresql":
		return postgres.Migrations(), nil
	case "mysql":
		return mysql.Migrations(), nil
	}
	return nil, fmt.Errorf("sluice: unknown database scheme %q (try sqlite://path, postgres://... or mysql://...): %w", scheme, ErrInvalidArgument)
}

// OpenBackend opens the database a DSN names and applies migrations:
//
//   - sqlite://PATH, file:PATH or a bare PATH: an embedded SQLite file;
//   - postgres://... or postgresql://...: PostgreSQL (pgx DSN);
//   - mysql://user:pass@host:port/db: MariaDB or MySQL.
//
// Its errors show the DSN with its credentials masked (RedactDSN).
func OpenBackend(ctx context.Context, dsn string, opts Options) (store.Backend, error) {
	b, err := openBackend(ctx, dsn, opts)
	if err != nil {
		return nil, redactError(err, dsn)
	}
	return b, nil
}

func openBackend(ctx context.Context, dsn string, opts Options) (store.Backend, error) {
	scheme, rest, found := strings.Cut(dsn, "://")
	if !found {
		scheme, rest = "sqlite", strings.TrimPrefix(dsn, "file:")
	}
	switch scheme {
	case "sqlite", "sqlite3", "file":
		return sqlite.Open(ctx, sqlite.Config{Path: rest, Synchronous: opts.SQLiteSynchronous, Limits: opts.Limits, Logger: opts.Logger})
	case "postgres", "postgresql":
		return postgres.Open(ctx, postgres.Config{DSN: dsn, Limits: opts.Limits, Logger: opts.Logger})
	case "mysql":
		return mysql.Open(ctx, mysql.Config{DSN: dsn, Limits: opts.Limits, Logger: opts.Logger})
	}
	return nil, fmt.Errorf("sluice: unknown database scheme %q (try sqlite://path, postgres://... or mysql://...)", scheme)
}

// redactError masks dsn's credentials in err's message wherever it
// quotes dsn (a DSN misread as a SQLite path, say), and in pgx's parse
// error, whose message masks them already but whose ConnString, which a
// caller may print, holds them. errors.Is and errors.As still see err.
func redactError(err error, dsn string) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		red := *pe
		red.ConnString = dsnpkg.Redact(pe.ConnString)
		err = fmt.Errorf("sluice: postgres: DSN: %w", &red)
	}
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
