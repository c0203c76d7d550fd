package store

import (
	"context"
	"io"
)

// Migration is one version of the schema, in one dialect.
type Migration struct {
	// Version numbers the migration; migrations apply in version order.
	Version int
	// Name is its file name, e.g. 0001_init.sql.
	Name string
	// SQL is its statements, as the file holds them.
	SQL string
}

// MigrationStatus says where a database's schema stands.
type MigrationStatus struct {
	// Database is the highest version the database has applied (0: none).
	Database int
	// Required is the highest version this build knows.
	Required int
	// Applied lists the versions the database has applied, in order,
	// including any this build does not know.
	Applied []int
	// Pending lists the migrations this build would apply, in order.
	Pending []Migration
}

// Migrator applies and reports the schema's migrations on one database.
// Close releases a pool it opened, never a pool the caller passed.
type Migrator interface {
	// Migrations lists every migration this build knows, in order.
	Migrations() []Migration
	// Status reads which migrations the database has applied; it changes
	// nothing.
	Status(ctx context.Context) (MigrationStatus, error)
	// Up applies the pending migrations, under a lock that makes
	// concurrent calls from several processes safe (one applies, the
	// others find nothing left to do), and returns those it applied. A
	// database ahead of this build is a *sluicetype.SchemaVersionError.
	Up(ctx context.Context) ([]Migration, error)
	io.Closer
}
