// Package sqlite is sluice's embedded backend: one SQLite file in WAL mode,
// one writer connection that every write goes through (group commit makes
// that cheap), and a pool of readers. It needs no server and, with the
// default driver, no C compiler.
//
// Durability: synchronous=FULL by default, so a transaction is on disk
// before Enqueue returns and survives power loss as well as a SIGKILL;
// synchronous=NORMAL also survives a SIGKILL of the process (the WAL is in
// the operating system's cache) but may lose the last commits on power
// loss. See docs/benchmarks.md for what each costs.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

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

// Config opens a SQLite backend.
type Config struct {
	// Path is the database file; its directory is created if missing.
	Path string
	// Synchronous is SQLite's synchronous setting: "FULL" (default) or
	// "NORMAL". See the package documentation. In a DSN:
	// sqlite://PATH?synchronous=NORMAL.
	Synchronous string
	// Limits bound calls; zero fields take defaults.
	Limits store.Limits
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// MaxConns caps the readers' pool (default max(4, GOMAXPROCS)); writes
	// always go through one connection of their own.
	MaxConns int
	// SkipMigrations opens without migrating: the schema must be at this
	// build's version (see store.OpenOptions.SkipMigrations).
	SkipMigrations bool
	// Driver is the database/sql driver to run on; nil is
	// modernc.org/sqlite. One that is incomplete or not registered with
	// database/sql is ErrInvalidArgument.
	Driver *Driver
}

// options returns the settings a Config shares with every backend.
func (cfg Config) options() store.OpenOptions {
	return store.OpenOptions{Limits: cfg.Limits, Logger: cfg.Logger, MaxConns: cfg.MaxConns, SkipMigrations: cfg.SkipMigrations}
}

// Open opens (creating if needed) and migrates a SQLite database.
func Open(ctx context.Context, cfg Config) (store.Backend, error) {
	w, r, drv, err := openPools(cfg)
	if err != nil {
		return nil, err
	}
	e, err := engine.New(ctx, engine.Config{
		Dialect:        dialect(drv),
		Write:          w,
		Read:           r,
		Limits:         cfg.Limits,
		Logger:         cfg.Logger,
		SkipMigrations: cfg.SkipMigrations,
	})
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	return e, nil
}

// openPools validates cfg and opens the writer's connection and the
// readers' pool on its file, on the driver it returns.
func openPools(cfg Config) (w, r *sql.DB, drv *Driver, err error) {
	if cfg.Path == "" {
		return nil, nil, nil, fmt.Errorf("sluice: sqlite: Config.Path is empty (try a file such as ./sluice-data/sluice.db): %w",
			sluicetype.ErrInvalidArgument)
	}
	if err := cfg.options().Validate(); err != nil {
		return nil, nil, nil, fmt.Errorf("sluice: sqlite: %w", err)
	}
	if drv, err = driverOr(cfg.Driver); err != nil {
		return nil, nil, nil, err
	}
	sync := strings.ToUpper(cfg.Synchronous)
	switch sync {
	case "":
		sync = "FULL"
	case "FULL", "NORMAL":
	default:
		return nil, nil, nil, fmt.Errorf("sluice: sqlite: synchronous %q: use FULL or NORMAL: %w", cfg.Synchronous, sluicetype.ErrInvalidArgument)
	}
	if dir := filepath.Dir(cfg.Path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, nil, fmt.Errorf("sluice: sqlite: %w", err)
		}
	}
	w, err = sql.Open(drv.Name, drv.DSN(cfg.Path, ConnOptions{Synchronous: sync}))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sluice: sqlite: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	r, err = sql.Open(drv.Name, drv.DSN(cfg.Path, ConnOptions{Synchronous: sync, ReadOnly: true}))
	if err != nil {
		w.Close()
		return nil, nil, nil, fmt.Errorf("sluice: sqlite: %w", err)
	}
	n := cmp.Or(cfg.MaxConns, max(4, runtime.GOMAXPROCS(0)))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	return w, r, drv, nil
}

// dialect returns what the engine needs to know of SQLite on a driver.
func dialect(drv *Driver) *engine.Dialect {
	qfs, _ := fs.Sub(queries, "queries")
	mfs, _ := fs.Sub(migrations, "migrations")
	return &engine.Dialect{
		Features:     store.Features{Name: "sqlite", Driver: drv.Module, PositionedReads: true},
		Queries:      qfs,
		Migrations:   mfs,
		Capabilities: engine.Capabilities{LeasePerRequest: true, RowInserts: true},
		IntList:      engine.JSONList,
		Classify:     classify,
	}
}

// classify reports busy and locked databases as retryable (a second
// process writing the same file) and unique-key violations as duplicates.
func classify(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "SQLITE_BUSY"), strings.Contains(msg, "database is locked"),
		strings.Contains(msg, "SQLITE_LOCKED"), strings.Contains(msg, "(5)"), strings.Contains(msg, "(517)"):
		return engine.ErrRetry
	case strings.Contains(msg, "UNIQUE constraint failed"), strings.Contains(msg, "PRIMARY KEY"):
		return engine.ErrDuplicate
	}
	return nil
}
