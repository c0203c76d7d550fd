package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
)

// DBConfig opens a SQLite backend on the application's pool (OpenDB).
// Every field may be left out: zero values take defaults, and a nil
// *DBConfig is all defaults.
type DBConfig struct {
	// Limits bound calls; zero fields take defaults.
	Limits store.Limits
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// SkipMigrations opens without migrating: the schema must be at this
	// build's version (see store.OpenOptions.SkipMigrations).
	SkipMigrations bool
	// Driver is the database/sql driver the pool runs on; nil is
	// modernc.org/sqlite. A pool on another driver is ErrInvalidArgument.
	Driver *Driver
}

// OpenDB opens a backend on the application's *sql.DB, which must run on
// cfg.Driver (modernc.org/sqlite when nil) and which OpenDB never
// closes: the backend's Close leaves it open. Reads and writes share it.
//
// sluice does not change the pool's connections: it checks one of them
// and fails with ErrInvalidArgument unless it is in WAL mode
// (journal_mode=WAL) with a busy timeout (busy_timeout > 0), since a
// pragma set on one connection would not reach the pool's others; set
// them in the DSN, e.g. file:app.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)
// on modernc.org/sqlite (PragmaDSN builds such a DSN).
// Adding _txlock=immediate spares write transactions the SQLITE_BUSY
// retries of a read lock upgraded to a write lock. A nil cfg takes the
// defaults.
func OpenDB(ctx context.Context, db *sql.DB, cfg *DBConfig) (store.Backend, error) {
	if cfg == nil {
		cfg = &DBConfig{}
	}
	drv, err := driverOr(cfg.Driver)
	if err != nil {
		return nil, err
	}
	if err := checkPool(ctx, db, drv); err != nil {
		return nil, err
	}
	return engine.New(ctx, engine.Config{
		Dialect:        dialect(drv),
		Write:          db,
		Read:           db,
		Limits:         cfg.Limits,
		Logger:         cfg.Logger,
		SkipMigrations: cfg.SkipMigrations,
		KeepPools:      true,
	})
}

// checkPool checks that db runs on drv, and the pragmas of one of its
// connections.
func checkPool(ctx context.Context, db *sql.DB, drv *Driver) error {
	if db == nil {
		return fmt.Errorf("sluice: sqlite: the *sql.DB is nil: %w", sluicetype.ErrInvalidArgument)
	}
	if !drv.owns(db.Driver()) {
		return fmt.Errorf("sluice: sqlite: the *sql.DB runs on driver %T, not %s (set DBConfig.Driver to the pool's): %w",
			db.Driver(), drv.Module, sluicetype.ErrInvalidArgument)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sluice: sqlite: %w", err)
	}
	defer conn.Close()
	var mode string
	var busy int
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("sluice: sqlite: read journal_mode: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		return fmt.Errorf("sluice: sqlite: read busy_timeout: %w", err)
	}
	if !strings.EqualFold(mode, "wal") || busy <= 0 {
		return fmt.Errorf("sluice: sqlite: the *sql.DB's connections have journal_mode=%s and busy_timeout=%d; sluice needs "+
			"journal_mode=WAL and a busy_timeout above 0 on every connection: set them in the DSN "+
			"(e.g. ?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)): %w", mode, busy, sluicetype.ErrInvalidArgument)
	}
	return nil
}
