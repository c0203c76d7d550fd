package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// DBConfig opens a PostgreSQL backend on the application's pool (OpenDB,
// OpenPool). Every field may be left out: zero values take defaults, and
// a nil *DBConfig is all defaults.
type DBConfig struct {
	// Limits bound calls; zero fields take defaults.
	Limits store.Limits
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// VacuumInterval is Config.VacuumInterval.
	VacuumInterval time.Duration
	// CommitPipelines is how many group commits run at once, each on a
	// connection of the pool (default 2, at most a quarter of the pool's
	// MaxOpenConns; see store.OpenOptions.CommitPipelines).
	CommitPipelines int
	// SkipMigrations opens without migrating: the schema must be at this
	// build's version (see store.OpenOptions.SkipMigrations).
	SkipMigrations bool
	// PgBouncer is Config.PgBouncer: "transaction" when the pool reaches
	// PostgreSQL through PgBouncer's transaction pooling.
	PgBouncer string
}

// config returns the Config of an application's pool; a nil c is all
// defaults.
func (c *DBConfig) config() Config {
	if c == nil {
		return Config{}
	}
	return Config{Limits: c.Limits, Logger: c.Logger, VacuumInterval: c.VacuumInterval,
		CommitPipelines: c.CommitPipelines, SkipMigrations: c.SkipMigrations, PgBouncer: c.PgBouncer}
}

// OpenDB opens a backend on the application's *sql.DB, which must run on
// pgx's database/sql driver (github.com/jackc/pgx/v5/stdlib) and which
// the backend never closes. sluice's tables live in the first schema of
// the connections' search_path (current_schema()), which must exist; the
// pool's size and settings stay the application's (Open also sets
// idle_in_transaction_session_timeout on its connections; set it in the
// pool's configuration to keep that guard). Wake-ups from other
// processes come through one more connection, opened with the settings
// of one of the pool's (unless PgBouncer is "transaction"). A nil cfg
// takes the defaults.
func OpenDB(ctx context.Context, db *sql.DB, cfg *DBConfig) (store.Backend, error) {
	cc, err := poolConnConfig(ctx, db)
	if err != nil {
		return nil, err
	}
	return openShared(ctx, db, cc, cfg)
}

// OpenPool opens a backend on the application's pgx pool, which the
// backend never closes, as OpenDB does on a *sql.DB: the engine runs on
// database/sql over the pool (stdlib.OpenDBFromPool), batches included.
// A nil cfg takes the defaults.
func OpenPool(ctx context.Context, pool *pgxpool.Pool, cfg *DBConfig) (store.Backend, error) {
	if pool == nil {
		return nil, fmt.Errorf("sluice: postgres: the *pgxpool.Pool is nil: %w", sluicetype.ErrInvalidArgument)
	}
	db := stdlib.OpenDBFromPool(pool)
	// The pool's bound, where the engine sizes its commit pipelines.
	db.SetMaxOpenConns(int(pool.Config().MaxConns))
	b, err := openShared(ctx, db, pool.Config().ConnConfig, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	// Closing db releases its handles only; the pool stays the caller's.
	return closeAlso{Backend: b, db: db}, nil
}

// openShared starts a backend on a pool the application owns.
func openShared(ctx context.Context, db *sql.DB, cc *pgx.ConnConfig, cfg *DBConfig) (store.Backend, error) {
	conf := cfg.config()
	if err := checkPgBouncer(conf.PgBouncer); err != nil {
		return nil, err
	}
	cc = cc.Copy()
	// A connected pgx connection's settings carry the handler that
	// buffers its own notifications; the listener needs its own.
	cc.OnNotification = nil
	return start(ctx, db, cc, conf, true)
}

// poolConnConfig checks that db runs on pgx and returns the settings of
// one of its connections.
func poolConnConfig(ctx context.Context, db *sql.DB) (*pgx.ConnConfig, error) {
	if db == nil {
		return nil, fmt.Errorf("sluice: postgres: the *sql.DB is nil: %w", sluicetype.ErrInvalidArgument)
	}
	if !ownsDriver(db.Driver()) {
		return nil, fmt.Errorf("sluice: postgres: the *sql.DB runs on driver %T, not pgx's (github.com/jackc/pgx/v5/stdlib): %w",
			db.Driver(), sluicetype.ErrInvalidArgument)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sluice: postgres: %w", err)
	}
	defer conn.Close()
	var cc *pgx.ConnConfig
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("connection of type %T, not pgx's: %w", dc, sluicetype.ErrInvalidArgument)
		}
		cc = c.Conn().Config().Copy()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: postgres: %w", err)
	}
	return cc, nil
}

// closeAlso is a backend that closes one more handle after itself.
type closeAlso struct {
	store.Backend
	db *sql.DB
}

// Close closes the backend, then the handle.
func (c closeAlso) Close() error {
	err := c.Backend.Close()
	if cerr := c.db.Close(); err == nil {
		err = cerr
	}
	return err
}
