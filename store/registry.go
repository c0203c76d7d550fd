package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/sluicetype"
)

// OpenOptions are the settings every backend takes, whichever way it is
// opened. Zero values take defaults.
type OpenOptions struct {
	// Limits bound calls; zero fields take defaults.
	Limits Limits
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// MaxConns caps the connections of a pool the backend opens itself
	// (0: the backend's default, 16 on PostgreSQL and MariaDB/MySQL, the
	// readers' pool on SQLite); a pool the caller passes keeps its own
	// settings. Negative or above MaxPoolConns is ErrInvalidArgument.
	MaxConns int
	// CommitPipelines is how many group commits run at once, each on a
	// connection of the pool (0: the backend's default, 2 on PostgreSQL
	// and MariaDB/MySQL; SQLite writes through one connection and has one
	// pipeline). Every entity's writes go through one of them: more
	// pipelines let more independent queues and partitions commit at the
	// same time. Negative, or not below MaxConns, is ErrInvalidArgument.
	CommitPipelines int
	// SkipMigrations opens without applying migrations: the database's
	// schema must be at the version this build requires, else Open fails
	// with a *sluicetype.SchemaVersionError (ErrSchemaTooOld or
	// ErrSchemaTooNew).
	SkipMigrations bool
}

// MaxPoolConns is the largest OpenOptions.MaxConns accepted.
const MaxPoolConns = 1000

// Validate checks the options' ranges.
func (o OpenOptions) Validate() error {
	if o.MaxConns < 0 || o.MaxConns > MaxPoolConns {
		return fmt.Errorf("MaxConns %d: want 0 (the default) to %d: %w", o.MaxConns, MaxPoolConns, sluicetype.ErrInvalidArgument)
	}
	if o.CommitPipelines < 0 || o.CommitPipelines >= MaxPoolConns || o.MaxConns > 0 && o.CommitPipelines >= o.MaxConns {
		return fmt.Errorf("CommitPipelines %d: want 0 (the default) to one less than the pool's connections: %w", o.CommitPipelines, sluicetype.ErrInvalidArgument)
	}
	return nil
}

// Opener opens one kind of database. A backend package registers one
// with Register in its init function, so that a program links only the
// backends it imports, as database/sql links only the drivers a program
// imports. It is implemented by this module's backends; it is not meant
// to be implemented elsewhere.
type Opener interface {
	// Open opens the database a DSN names, in the scheme the opener was
	// registered for, and applies migrations unless o says not to.
	Open(ctx context.Context, dsn string, o OpenOptions) (Backend, error)
	// OpenDB opens a backend on the caller's pool, which it does not
	// close; db's driver is one OwnsDriver accepts.
	OpenDB(ctx context.Context, db *sql.DB, o OpenOptions) (Backend, error)
	// NewMigrator returns the migrations of the database a DSN names.
	NewMigrator(ctx context.Context, dsn string, o OpenOptions) (Migrator, error)
	// NewMigratorDB returns the migrations of the database of the
	// caller's pool, which it does not close.
	NewMigratorDB(ctx context.Context, db *sql.DB, o OpenOptions) (Migrator, error)
	// Migrations lists the schema's migrations in this dialect, in the
	// order they apply.
	Migrations() []Migration
	// OwnsDriver reports whether d is the database/sql driver this
	// backend runs on.
	OwnsDriver(d driver.Driver) bool
}

// registration is one registered backend.
type registration struct {
	name    string
	schemes []string
	opener  Opener
}

var (
	registryMu sync.RWMutex
	registry   []registration
)

// SQLiteSchemes are the DSN schemes of SQLite; a DSN with no scheme (a
// bare path, or file:PATH) is a SQLite path too.
var SQLiteSchemes = []string{"sqlite", "sqlite3", "file"}

// knownBackends says which package registers each scheme of this
// module and of its module of SQLite drivers, for the error that a DSN's
// backend is not linked.
var knownBackends = []struct{ name, pkg string }{
	{"sqlite", "github.com/sluicehq/sluice/store/sqlite"},
	{"postgres", "github.com/sluicehq/sluice/store/postgres"},
	{"mysql", "github.com/sluicehq/sluice/store/mysql"},
	{"sqlite-mattn", "github.com/sluicehq/sluice/store/sqlite/sqlitedrivers/mattn"},
	{"sqlite-ncruces", "github.com/sluicehq/sluice/store/sqlite/sqlitedrivers/ncruces"},
}

// Register makes a backend available under its DSN schemes (without
// "://"). name is the backend's Features.Name. It panics when a scheme
// is registered twice, as database/sql's Register does.
func Register(name string, schemes []string, o Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, r := range registry {
		for _, s := range schemes {
			if slices.Contains(r.schemes, s) {
				panic(fmt.Sprintf("store: scheme %q registered twice (%s and %s)", s, r.name, name))
			}
		}
	}
	registry = append(registry, registration{name: name, schemes: slices.Clone(schemes), opener: o})
}

// Scheme returns a DSN's scheme: the text before "://", or "sqlite" for
// a DSN without one (a path, or file:PATH).
func Scheme(dsn string) string {
	scheme, _, found := strings.Cut(dsn, "://")
	if !found || scheme == "" {
		return "sqlite"
	}
	return strings.ToLower(scheme)
}

// Lookup returns the opener registered for a DSN's scheme. A scheme that
// this module knows but whose backend the program does not import, or a
// scheme nobody knows, is ErrInvalidArgument with a message that says
// what to import or write.
func Lookup(dsn string) (Opener, error) {
	scheme := Scheme(dsn)
	registryMu.RLock()
	defer registryMu.RUnlock()
	for _, r := range registry {
		if slices.Contains(r.schemes, scheme) {
			return r.opener, nil
		}
	}
	name := scheme
	switch {
	case slices.Contains(SQLiteSchemes, scheme):
		name = "sqlite"
	case scheme == "postgresql":
		name = "postgres"
	}
	for _, k := range knownBackends {
		if k.name == name {
			return nil, fmt.Errorf("the %s backend is not linked into this program: add "+
				"import _ %q: %w", name, k.pkg, sluicetype.ErrInvalidArgument)
		}
	}
	return nil, fmt.Errorf("unknown database scheme %q (try sqlite://path, postgres://... or mysql://...): %w",
		scheme, sluicetype.ErrInvalidArgument)
}

// LookupDriver returns the opener of the backend that runs on a
// database/sql driver. A driver no linked backend owns is
// ErrInvalidArgument.
func LookupDriver(d driver.Driver) (Opener, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	for _, r := range registry {
		if r.opener.OwnsDriver(d) {
			return r.opener, nil
		}
	}
	return nil, fmt.Errorf("no linked backend runs on the database/sql driver %T (import the backend "+
		"package of its database, e.g. _ \"github.com/sluicehq/sluice/store/postgres\"): %w", d, sluicetype.ErrInvalidArgument)
}
