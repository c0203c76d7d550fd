package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
)

// Importing this package registers PostgreSQL for the DSN schemes
// postgres:// and postgresql://.
func init() {
	store.Register("postgres", []string{"postgres", "postgresql"}, opener{})
}

// opener is PostgreSQL's store.Opener.
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
	if _, err := poolConnConfig(ctx, db); err != nil {
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

// ownsDriver reports whether d is pgx's database/sql driver.
func ownsDriver(d driver.Driver) bool {
	_, ok := d.(*stdlib.Driver)
	return ok
}

// configOf returns the Config of a DSN and the shared options.
func configOf(dsn string, o store.OpenOptions) Config {
	return Config{DSN: dsn, Limits: o.Limits, Logger: o.Logger, MaxConns: o.MaxConns, CommitPipelines: o.CommitPipelines, SkipMigrations: o.SkipMigrations}
}

// NewMigrator returns the migrations of the database cfg names (in
// cfg's schema, created if missing), on a connection of its own that
// Close closes.
func NewMigrator(ctx context.Context, cfg Config) (store.Migrator, error) {
	cc, err := connConfig(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cc)
	db.SetMaxOpenConns(2)
	m, err := engine.NewMigrator(dialect(), db, cfg.Logger, db.Close)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sluice: postgres: %w", err)
	}
	return m, nil
}
