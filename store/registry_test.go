package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// This package's tests link no backend: every DSN's lookup fails, with
// ErrInvalidArgument and a message naming the package to import.
func TestLookupUnlinkedBackend(t *testing.T) {
	for dsn, pkg := range map[string]string{
		"postgres://h/db":      "github.com/sluicehq/sluice/store/postgres",
		"postgresql://h/db":    "github.com/sluicehq/sluice/store/postgres",
		"mysql://root@h/db":    "github.com/sluicehq/sluice/store/mysql",
		"sqlite:///tmp/x.db":   "github.com/sluicehq/sluice/store/sqlite",
		"SQLITE3://x.db":       "github.com/sluicehq/sluice/store/sqlite",
		"file:x.db":            "github.com/sluicehq/sluice/store/sqlite",
		"./data/sluice.db":     "github.com/sluicehq/sluice/store/sqlite",
		"sqlite-mattn:///x.db": "github.com/sluicehq/sluice/store/sqlite/sqlitedrivers/mattn",
		"sqlite-ncruces://x":   "github.com/sluicehq/sluice/store/sqlite/sqlitedrivers/ncruces",
		"oracle://scott@h/db":  "unknown database scheme",
	} {
		_, err := store.Lookup(dsn)
		if !errors.Is(err, sluicetype.ErrInvalidArgument) || !strings.Contains(err.Error(), pkg) {
			t.Errorf("Lookup(%q): %v, want ErrInvalidArgument naming %s", dsn, err, pkg)
		}
	}
}

// Scheme reads the text before "://", case-insensitively; a DSN without
// one is a SQLite path.
func TestScheme(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://h/db": "postgres", "MySQL://h/db": "mysql", "x.db": "sqlite", "file:x.db": "sqlite",
		"": "sqlite", "://x": "sqlite", "host=h dbname=d": "sqlite",
	} {
		if got := store.Scheme(dsn); got != want {
			t.Errorf("Scheme(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// OpenOptions.MaxConns takes 0 to MaxPoolConns.
func TestOpenOptionsValidate(t *testing.T) {
	for n, ok := range map[int]bool{-1: false, 0: true, 1: true, store.MaxPoolConns: true, store.MaxPoolConns + 1: false} {
		err := store.OpenOptions{MaxConns: n}.Validate()
		if (err == nil) != ok || (err != nil && !errors.Is(err, sluicetype.ErrInvalidArgument)) {
			t.Errorf("MaxConns %d: %v", n, err)
		}
	}
}
