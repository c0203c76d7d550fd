package sluice

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

// Migration is one version of the schema in one SQL dialect: its
// number, its file name and its SQL.
type Migration = store.Migration

// MigrationStatus says which migrations a database has applied and
// which this build would apply.
type MigrationStatus = store.MigrationStatus

// Migrator applies and reports the schema's migrations, for deployments
// that migrate as a step of their own (`sluice migrate up`) and open
// with Options.SkipMigrations. Open applies the same migrations through
// the same code unless told not to.
type Migrator struct {
	m store.Migrator
}

// NewMigrator returns the migrator of the database a DSN names (whose
// backend package the program imports, as for OpenBackend). Close
// releases its connection.
func NewMigrator(ctx context.Context, dsn string, opts *Options) (*Migrator, error) {
	opts = opts.orDefault()
	o, err := store.Lookup(dsn)
	if err != nil {
		return nil, redactError(fmt.Errorf("sluice: migrate: %w", err), dsn)
	}
	m, err := o.NewMigrator(ctx, dsn, opts.openOptions())
	if err != nil {
		return nil, redactError(err, dsn)
	}
	return &Migrator{m: m}, nil
}

// NewMigratorDB returns the migrator of the application's pool, found by
// its driver among the linked backends; Close leaves db open.
func NewMigratorDB(ctx context.Context, db *sql.DB, opts *Options) (*Migrator, error) {
	opts = opts.orDefault()
	if db == nil {
		return nil, fmt.Errorf("sluice: migrate: the *sql.DB is nil: %w", ErrInvalidArgument)
	}
	o, err := store.LookupDriver(db.Driver())
	if err != nil {
		return nil, fmt.Errorf("sluice: migrate: %w", err)
	}
	m, err := o.NewMigratorDB(ctx, db, opts.openOptions())
	if err != nil {
		return nil, err
	}
	return &Migrator{m: m}, nil
}

// Migrations returns the schema's migrations for the database a DSN
// names, in the order they apply, without connecting to it: for a DBA
// to review. The DSN's backend package must be imported.
func Migrations(dsn string) ([]Migration, error) {
	o, err := store.Lookup(dsn)
	if err != nil {
		return nil, redactError(fmt.Errorf("sluice: migrations: %w", err), dsn)
	}
	return o.Migrations(), nil
}

// List returns every migration this build knows, in the order they
// apply.
func (m *Migrator) List() []Migration { return m.m.Migrations() }

// Status reads which migrations the database has applied and which are
// pending; it changes nothing.
func (m *Migrator) Status(ctx context.Context) (MigrationStatus, error) { return m.m.Status(ctx) }

// Up applies the pending migrations and returns them. Concurrent calls,
// from this process or others, are safe: they take the database's
// migration lock in turn, and the later ones find nothing to do. A
// database migrated by a newer sluice is a *SchemaVersionError matching
// ErrSchemaTooNew.
func (m *Migrator) Up(ctx context.Context) ([]Migration, error) { return m.m.Up(ctx) }

// Close releases the connection NewMigrator opened (never the pool
// NewMigratorDB was given).
func (m *Migrator) Close() error { return m.m.Close() }
