package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
)

// Importing this package registers SQLite on modernc.org/sqlite for the
// DSN schemes sqlite://, sqlite3:// and file://, and for DSNs with no
// scheme (a path).
func init() {
	store.Register("sqlite", store.SQLiteSchemes, opener{driver: moderncDriver, schemes: store.SQLiteSchemes})
}

// Register makes SQLite on driver d available under more DSN schemes
// (without "://"), each read as SCHEME://PATH[?synchronous=FULL|NORMAL],
// for sluice.Open, sluice.OpenDB on a pool of d's driver, and the
// migrations. A driver's package calls it in its init function. It
// panics when d is incomplete or not registered with database/sql, when
// schemes is empty, or when a scheme is registered twice, as
// database/sql's Register does.
func Register(schemes []string, d *Driver) {
	if len(schemes) == 0 {
		panic("sqlite: Register with no scheme")
	}
	if d == nil {
		panic("sqlite: Register of a nil Driver")
	}
	if err := d.validate(); err != nil {
		panic(fmt.Sprintf("sqlite: Register: %v", err))
	}
	store.Register("sqlite", schemes, opener{driver: d, schemes: schemes})
}

// opener is SQLite's store.Opener on one driver, for its DSN schemes.
type opener struct {
	driver  *Driver
	schemes []string
}

func (o opener) Open(ctx context.Context, dsn string, opts store.OpenOptions) (store.Backend, error) {
	// CommitPipelines, which SQLite's Config lacks, is checked here.
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("sluice: sqlite: %w", err)
	}
	cfg, err := o.configOf(dsn, opts)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg)
}

func (o opener) OpenDB(ctx context.Context, db *sql.DB, opts store.OpenOptions) (store.Backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("sluice: sqlite: %w", err)
	}
	return OpenDB(ctx, db, &DBConfig{Limits: opts.Limits, Logger: opts.Logger, SkipMigrations: opts.SkipMigrations, Driver: o.driver})
}

func (o opener) NewMigrator(ctx context.Context, dsn string, opts store.OpenOptions) (store.Migrator, error) {
	cfg, err := o.configOf(dsn, opts)
	if err != nil {
		return nil, err
	}
	return NewMigrator(ctx, cfg)
}

func (o opener) NewMigratorDB(ctx context.Context, db *sql.DB, opts store.OpenOptions) (store.Migrator, error) {
	if err := checkPool(ctx, db, o.driver); err != nil {
		return nil, err
	}
	return engine.NewMigrator(dialect(o.driver), db, opts.Logger, nil)
}

func (opener) Migrations() []store.Migration {
	migs, err := engine.ListMigrations(Migrations())
	if err != nil {
		panic(err) // embedded, and parsed by every test that opens a backend
	}
	return migs
}

func (o opener) OwnsDriver(d driver.Driver) bool { return o.driver.owns(d) }

// configOf reads a DSN and applies the shared options to it.
func (o opener) configOf(dsn string, opts store.OpenOptions) (Config, error) {
	cfg, err := parseDSN(dsn, o.schemes)
	if err != nil {
		return Config{}, err
	}
	cfg.Limits, cfg.Logger, cfg.MaxConns, cfg.SkipMigrations = opts.Limits, opts.Logger, opts.MaxConns, opts.SkipMigrations
	cfg.Driver = o.driver
	return cfg, nil
}

// NewMigrator returns the migrations of the database file cfg names,
// on a connection of its own that Close closes. It opens that connection
// within ctx, as PostgreSQL's and MySQL's connect, so that a file that
// cannot be opened fails here rather than at the first Up or Status.
func NewMigrator(ctx context.Context, cfg Config) (store.Migrator, error) {
	w, r, drv, err := openPools(cfg)
	if err != nil {
		return nil, err
	}
	r.Close()
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("sluice: sqlite: %w", err)
	}
	m, err := engine.NewMigrator(dialect(drv), w, cfg.Logger, w.Close)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sluice: sqlite: %w", err)
	}
	return m, nil
}
