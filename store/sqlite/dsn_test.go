package sqlite_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store/sqlite"
)

// ParseDSN reads every SQLite form and its one parameter, synchronous;
// anything else is ErrInvalidArgument.
func TestParseDSN(t *testing.T) {
	for dsn, want := range map[string]sqlite.Config{
		"sqlite:///tmp/a.db":                {Path: "/tmp/a.db"},
		"sqlite3://a.db?synchronous=NORMAL": {Path: "a.db", Synchronous: "NORMAL"},
		"file://a.db":                       {Path: "a.db"},
		"file:a.db?synchronous=full":        {Path: "a.db", Synchronous: "full"},
		"data/a.db":                         {Path: "data/a.db"},
		"sqlite://a.db?synchronous=NORMAL&": {Path: "a.db", Synchronous: "NORMAL"},
	} {
		got, err := sqlite.ParseDSN(dsn)
		if err != nil || got.Path != want.Path || got.Synchronous != want.Synchronous {
			t.Errorf("ParseDSN(%q) = %+v, %v; want %+v", dsn, got, err, want)
		}
	}
	for _, dsn := range []string{
		"postgres://h/db", "sqlite://a.db?cache=shared", "sqlite://a.db?synchronous=FULL&synchronous=NORMAL", "a.db?%zz",
	} {
		if _, err := sqlite.ParseDSN(dsn); !errors.Is(err, sluicetype.ErrInvalidArgument) {
			t.Errorf("ParseDSN(%q): %v, want ErrInvalidArgument", dsn, err)
		}
	}
}

// Open refuses a synchronous setting other than FULL or NORMAL, an empty
// path and a pool size out of range, with ErrInvalidArgument.
func TestOpenRefusesBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	for _, cfg := range []sqlite.Config{
		{Path: path, Synchronous: "OFF"}, {Path: ""}, {Path: path, MaxConns: -1},
	} {
		if _, err := sqlite.Open(t.Context(), cfg); !errors.Is(err, sluicetype.ErrInvalidArgument) {
			t.Errorf("Open(%+v): %v, want ErrInvalidArgument", cfg, err)
		}
	}
	b, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Synchronous: "normal", MaxConns: 1})
	if err != nil {
		t.Fatalf("synchronous=normal, one reader: %v", err)
	}
	b.Close()
}
