package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
)

// Importing this package registers SQLite for the DSN schemes sqlite://,
// sqlite3:// and file://, and for DSNs with no scheme (a path).
func init() {
	store.Register("sqlite", store.SQLiteSchemes, opener{})
}

// opener is SQLite's store.Opener.
type opener struct{}

func (opener) Open(ctx context.Context, dsn string, o store.OpenOptions) (store.Backend, error) {
	cfg, err := configOf(dsn, o)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg)
}

func (opener) OpenDB(ctx context.Context, db *sql.DB, o store.OpenOptions) (store.Backend, error) {
	return OpenDB(ctx, db, DBConfig{Limits: o.Limits, Logger: o.Logger, SkipMigrations: o.SkipMigrations})
}

func (opener) NewMigrator(ctx context.Context, dsn string, o store.OpenOptions) (store.Migrator, error) {
	cfg, err := configOf(dsn, o)
	if err != nil {
		return nil, err
	}
	return NewMigrator(cfg)
}

func (opener) NewMigratorDB(ctx context.Context, db *sql.DB, o store.OpenOptions) (store.Migrator, error) {
	if err := checkPool(ctx, db); err != nil {
		return nil, err
	}
	return engine.NewMigrator(dialect(), db, o.Logger, nil)
}

func (opener) Migrations() []store.Migration {
	migs, err := engine.ListMigrations(Migrations())
	if err != nil {
		panic(err) // embedded, and parsed by every test that opens a backend
	}
	return migs
}

func (opener) OwnsDriver(d driver.Driver) bool { return ownsDriver(d) }

// configOf reads a DSN and applies the shared options to it.
func configOf(dsn string, o store.OpenOptions) (Config, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return Config{}, err
	}
	cfg.Limits, cfg.Logger, cfg.MaxConns, cfg.SkipMigrations = o.Limits, o.Logger, o.MaxConns, o.SkipMigrations
	return cfg, nil
}

// NewMigrator returns the migrations of the database file cfg names,
// on a connection of its own that Close closes.
func NewMigrator(cfg Config) (store.Migrator, error) {
	w, r, err := openPools(cfg)
	if err != nil {
		return nil, err
	}
	r.Close()
	m, err := engine.NewMigrator(dialect(), w, cfg.Logger, w.Close)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sluice: sqlite: %w", err)
	}
	return m, nil
}

// ownsDriver reports whether d is the driver this package links: of the
// type sql.Open gives its driver name.
func ownsDriver(d driver.Driver) bool {
	db, err := sql.Open(driverName, "")
	if err != nil {
		return false
	}
	defer db.Close()
	return reflect.TypeOf(db.Driver()) == reflect.TypeOf(d)
}
