package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/sqlite"
	msqlite "modernc.org/sqlite"
)

// otherDriver is modernc.org/sqlite under a type and a database/sql name
// of its own: a second real SQLite driver, as far as sluice can tell,
// without linking one into this module.
type otherDriver struct{ msqlite.Driver }

const otherName = "sluice-test-other"

var other = &sqlite.Driver{Name: otherName, Module: "example.com/other", DSN: sqlite.PragmaDSN}

func init() {
	sql.Register(otherName, &otherDriver{})
	sqlite.Register([]string{"sqlite-test-other"}, other)
}

// Open runs on Config.Driver, which the backend's Features name; nil is
// modernc.org/sqlite.
func TestOpenOnConfiguredDriver(t *testing.T) {
	for _, tc := range []struct {
		driver *sqlite.Driver
		module string
	}{{nil, "modernc.org/sqlite"}, {other, "example.com/other"}} {
		b, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), Driver: tc.driver})
		if err != nil {
			t.Fatalf("Open on %s: %v", tc.module, err)
		}
		if got := b.Features().Driver; got != tc.module {
			t.Errorf("Features().Driver = %q, want %q", got, tc.module)
		}
		b.Close()
	}
}

// An incomplete driver, or one database/sql does not know, is
// ErrInvalidArgument before anything is created on disk.
func TestOpenRefusesBadDriver(t *testing.T) {
	for _, d := range []*sqlite.Driver{
		{},
		{Name: otherName, Module: "example.com/other"},
		{Name: otherName, DSN: sqlite.PragmaDSN},
		{Module: "example.com/other", DSN: sqlite.PragmaDSN},
		{Name: "sluice-test-unregistered", Module: "example.com/none", DSN: sqlite.PragmaDSN},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		_, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(dir, "a.db"), Driver: d})
		if !errors.Is(err, sluicetype.ErrInvalidArgument) {
			t.Errorf("Open on %+v: %v, want ErrInvalidArgument", d, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("Open on %+v created %s (%v)", d, dir, err)
		}
		if _, err := sqlite.OpenDB(t.Context(), nil, &sqlite.DBConfig{Driver: d}); !errors.Is(err, sluicetype.ErrInvalidArgument) {
			t.Errorf("OpenDB on %+v: %v, want ErrInvalidArgument", d, err)
		}
	}
}

// pool opens an application's pool on a driver's name, with the pragmas
// OpenDB requires.
func pool(t *testing.T, name string) *sql.DB {
	t.Helper()
	db, err := sql.Open(name, sqlite.PragmaDSN(filepath.Join(t.TempDir(), "app.db"), sqlite.ConnOptions{Synchronous: "FULL"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// OpenDB accepts a pool on the configured driver only, and the registry
// finds the backend of a pool on a registered driver.
func TestOpenDBOnConfiguredDriver(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		pool   string
		driver *sqlite.Driver
		ok     bool
	}{
		{"sqlite", nil, true},
		{otherName, other, true},
		{otherName, nil, false},
		{"sqlite", other, false},
	} {
		b, err := sqlite.OpenDB(ctx, pool(t, tc.pool), &sqlite.DBConfig{Driver: tc.driver})
		switch {
		case tc.ok && err != nil:
			t.Errorf("OpenDB(pool on %s, %+v): %v", tc.pool, tc.driver, err)
		case !tc.ok && !errors.Is(err, sluicetype.ErrInvalidArgument):
			t.Errorf("OpenDB(pool on %s, %+v): %v, want ErrInvalidArgument", tc.pool, tc.driver, err)
		}
		if err == nil {
			b.Close()
		}
	}
	db := pool(t, otherName)
	o, err := store.LookupDriver(db.Driver())
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.OpenDB(ctx, db, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Features().Driver; got != other.Module {
		t.Errorf("the registry's backend for a pool on %s runs on %q", otherName, got)
	}
}

// A scheme registered for a driver opens and migrates on that driver,
// reading the same DSN parameter as sqlite://.
func TestRegisteredScheme(t *testing.T) {
	ctx := t.Context()
	dsn := "sqlite-test-other://" + filepath.Join(t.TempDir(), "a.db") + "?synchronous=NORMAL"
	o, err := store.Lookup(dsn)
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.Open(ctx, dsn, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Features().Driver; got != other.Module {
		t.Errorf("%s opened on %q", dsn, got)
	}
	m, err := o.NewMigrator(ctx, dsn, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := o.Open(ctx, "sqlite-test-other://a.db?cache=shared", store.OpenOptions{}); !errors.Is(err, sluicetype.ErrInvalidArgument) {
		t.Errorf("an unknown parameter: %v, want ErrInvalidArgument", err)
	}
}

// Register refuses what it could not open, as database/sql's Register
// does: with a panic at init.
func TestRegisterPanics(t *testing.T) {
	for name, call := range map[string]func(){
		"no scheme":        func() { sqlite.Register(nil, other) },
		"nil driver":       func() { sqlite.Register([]string{"sqlite-test-nil"}, nil) },
		"incomplete":       func() { sqlite.Register([]string{"sqlite-test-incomplete"}, &sqlite.Driver{Name: otherName}) },
		"scheme taken":     func() { sqlite.Register([]string{"sqlite"}, other) },
		"scheme twice too": func() { sqlite.Register([]string{"sqlite-test-other"}, other) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			call()
		}()
	}
}

// A nil *DBConfig is all defaults: OpenDB opens a backend on a pool of
// modernc.org/sqlite and refuses a pool on another driver.
func TestOpenDBNilConfig(t *testing.T) {
	b, err := sqlite.OpenDB(t.Context(), pool(t, "sqlite"), nil)
	if err != nil {
		t.Fatalf("OpenDB with a nil config: %v", err)
	}
	defer b.Close()
	if got := b.Features().Driver; got != "modernc.org/sqlite" {
		t.Errorf("Features().Driver = %q, want modernc.org/sqlite", got)
	}
	if _, err := sqlite.OpenDB(t.Context(), pool(t, otherName), nil); !errors.Is(err, sluicetype.ErrInvalidArgument) {
		t.Errorf("OpenDB of a pool on %s with a nil config: %v, want ErrInvalidArgument", otherName, err)
	}
}

// NewMigrator opens its connection within its context, as PostgreSQL's
// and MySQL's do: a cancelled context fails it, and a live one migrates.
func TestNewMigratorContext(t *testing.T) {
	cfg := sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := sqlite.NewMigrator(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("NewMigrator on a cancelled context: %v, want context.Canceled", err)
	}
	m, err := sqlite.NewMigrator(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(t.Context()); err != nil {
		t.Errorf("Up: %v", err)
	}
}
