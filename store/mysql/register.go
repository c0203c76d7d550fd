package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"

	driver "github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
)

// Importing this package registers MariaDB and MySQL for the DSN scheme
// mysql://.
func init() {
	store.Register("mysql", []string{"mysql"}, opener{})
}

// opener is MySQL's store.Opener.
type opener struct{}

func (opener) Open(ctx context.Context, dsn string, o store.OpenOptions) (store.Backend, error) {
	return Open(ctx, configOf(dsn, o))
}

func (opener) OpenDB(ctx context.Context, db *sql.DB, o store.OpenOptions) (store.Backend, error) {
	return OpenDB(ctx, db, &DBConfig{Limits: o.Limits, Logger: o.Logger, CommitPipelines: o.CommitPipelines, SkipMigrations: o.SkipMigrations})
}

func (opener) NewMigrator(ctx context.Context, dsn string, o store.OpenOptions) (store.Migrator, error) {
	return NewMigrator(ctx, configOf(dsn, o))
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

func (opener) OwnsDriver(d sqldriver.Driver) bool { return ownsDriver(d) }

// ownsDriver reports whether d is go-sql-driver/mysql's driver.
func ownsDriver(d sqldriver.Driver) bool {
	_, ok := d.(driver.MySQLDriver)
	if !ok {
		_, ok = d.(*driver.MySQLDriver)
	}
	return ok
}

// configOf returns the Config of a DSN and the shared options.
func configOf(dsn string, o store.OpenOptions) Config {
	return Config{DSN: dsn, Limits: o.Limits, Logger: o.Logger, MaxConns: o.MaxConns, CommitPipelines: o.CommitPipelines, SkipMigrations: o.SkipMigrations}
}

// NewMigrator returns the migrations of the database cfg names, on a
// pool of its own that Close closes.
func NewMigrator(ctx context.Context, cfg Config) (store.Migrator, error) {
	cfg.MaxConns = 2
	db, err := openPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m, err := engine.NewMigrator(dialect(), db, cfg.Logger, db.Close)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sluice: mysql: %w", err)
	}
	return m, nil
}
