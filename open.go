package sluice

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

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
func OpenBackend(ctx context.Context, dsn string, opts Options) (store.Backend, error) {
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
