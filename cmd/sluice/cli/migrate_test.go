package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
)

// freshDB returns the DSN of a database of the kind no test has used,
// dropped when the test ends.
func freshDB(t *testing.T, kind string) string {
	t.Helper()
	var (
		dsn  string
		drop func() error
		err  error
	)
	switch kind {
	case "sqlite":
		return "sqlite://" + filepath.Join(t.TempDir(), "fresh.db")
	case "postgres":
		dsn, drop, err = testdb.Postgres(t.Context())
	case "mysql":
		dsn, drop, err = testdb.MySQL(t.Context())
	}
	testdb.Check(t, err)
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop the test database: %v", err)
		}
	})
	return dsn
}

// sluice migrate status, up and print, on each kind of database.
func TestMigrateActions(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := freshDB(t, kind)
			migs, err := sluice.Migrations(db)
			if err != nil {
				t.Fatal(err)
			}
			last := migs[len(migs)-1]
			steps := []struct {
				args []string
				code int
				want []string
			}{
				{[]string{"migrate", "status", "--db", db}, ExitOK,
					[]string{fmt.Sprintf("schema at version 0000, this sluice requires %04d (%d pending: run sluice migrate up)", last.Version, len(migs)),
						"pending 0001_init.sql", "pending " + last.Name}},
				{[]string{"migrate", "up", "--db", db}, ExitOK,
					[]string{fmt.Sprintf("schema at version %04d (%s); applied %d migration(s)", last.Version, last.Name, len(migs))}},
				{[]string{"migrate", "status", "--db", db}, ExitOK,
					[]string{fmt.Sprintf("schema at version %04d, this sluice requires %04d (up to date)", last.Version, last.Version)}},
				{[]string{"migrate", "--db", db}, ExitOK, []string{"applied 0 migration(s)"}},
				{[]string{"migrate", "print", "--db", db}, ExitOK, []string{"-- ==== 0001_init.sql ====", "-- ==== " + last.Name + " ===="}},
				{[]string{"migrate", "down", "--db", db}, ExitUsage, nil},
				{[]string{"migrate", "up", "extra", "--db", db}, ExitUsage, nil},
			}
			for _, s := range steps {
				code, out, errOut := run(t, s.args...)
				if code != s.code {
					t.Fatalf("%s: exit %d, want %d: %s %s", strings.Join(s.args[:2], " "), code, s.code, out, errOut)
				}
				for _, w := range s.want {
					if !strings.Contains(out, w) {
						t.Errorf("%s: output lacks %q:\n%.400s", strings.Join(s.args[:2], " "), w, out)
					}
				}
			}
		})
	}
}

// serve --no-migrate refuses a database whose schema is behind, naming
// both versions, instead of migrating it.
func TestServeNoMigrate(t *testing.T) {
	t.Parallel()
	db := freshDB(t, "sqlite")
	code, _, errOut := run(t, "serve", "--db", db, "--no-migrate", "--addr", "127.0.0.1:0", "--self-check=false")
	if code == ExitOK || !strings.Contains(errOut, "schema version 0, this sluice requires") || !strings.Contains(errOut, "sluice migrate up") {
		t.Fatalf("serve --no-migrate on an empty database: exit %d, %s", code, errOut)
	}
}
