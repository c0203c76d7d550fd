package sluice_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store/storetest"
)

// forEachFreshDB runs f, in parallel, on a database of each kind that no
// test has used.
func forEachFreshDB(t *testing.T, f func(t *testing.T, kind, dsn string)) {
	t.Helper()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, kind, freshDSN(t, kind))
		})
	}
}

// newMigrator returns a migrator of dsn, closed when the test ends.
func newMigrator(t *testing.T, dsn string) *sluice.Migrator {
	t.Helper()
	m, err := sluice.NewMigrator(t.Context(), dsn, &sluice.Options{Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// wantSchemaError checks that err is a *SchemaVersionError with these
// versions, matching sentinel.
func wantSchemaError(t *testing.T, what string, err, sentinel error, database, required int) {
	t.Helper()
	var sv *sluice.SchemaVersionError
	if !errors.Is(err, sentinel) || !errors.As(err, &sv) || sv.Database != database || sv.Required != required {
		t.Fatalf("%s: %v (%#v), want %v at version %d of %d", what, err, sv, sentinel, database, required)
	}
}

// A Migrator lists the migrations, reports an empty database's status,
// applies them once, and a client opened with SkipMigrations works only
// on a database at this build's version.
func TestMigrator(t *testing.T) {
	forEachFreshDB(t, func(t *testing.T, kind, dsn string) {
		ctx := t.Context()
		m := newMigrator(t, dsn)
		list := m.List()
		if len(list) == 0 || list[0].Version != 1 || list[0].Name != "0001_init.sql" || list[0].SQL == "" {
			t.Fatalf("List: %d migrations, first %+v", len(list), list[0])
		}
		required := list[len(list)-1].Version
		st, err := m.Status(ctx)
		if err != nil || st.Database != 0 || st.Required != required || len(st.Pending) != len(list) || len(st.Applied) != 0 {
			t.Fatalf("Status of an empty database: %+v, %v", st, err)
		}
		_, err = sluice.Open(ctx, dsn, &sluice.Options{SkipMigrations: true})
		wantSchemaError(t, "Open an empty database without migrating", err, sluice.ErrSchemaTooOld, 0, required)

		done, err := m.Up(ctx)
		if err != nil || len(done) != len(list) {
			t.Fatalf("Up: applied %d of %d, %v", len(done), len(list), err)
		}
		if done, err := m.Up(ctx); err != nil || len(done) != 0 {
			t.Fatalf("Up again: applied %d, %v", len(done), err)
		}
		st, err = m.Status(ctx)
		if err != nil || st.Database != required || len(st.Pending) != 0 || len(st.Applied) != len(list) {
			t.Fatalf("Status once migrated: %+v, %v", st, err)
		}
		c, err := sluice.Open(ctx, dsn, &sluice.Options{SkipMigrations: true, Logger: storetest.Logger(t)})
		if err != nil {
			t.Fatalf("Open a migrated database without migrating: %v", err)
		}
		defer c.Close()
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "after migrate up")
		if got := receive(t, newReceiver(t, c, q, sluice.ReceiveAndDelete), 1); string(got[0].Body) != "after migrate up" {
			t.Fatalf("received %q", got[0].Body)
		}
	})
}

// A database missing one migration in the middle is behind, whatever its
// highest version.
func TestSkipMigrationsFindsAGap(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := freshDSN(t, "sqlite")
	m := newMigrator(t, dsn)
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	db := appDB(t, "sqlite", dsn, true)
	if _, err := db.ExecContext(ctx, "DELETE FROM sluice_migrations WHERE version = 5"); err != nil {
		t.Fatal(err)
	}
	required := m.List()[len(m.List())-1].Version
	_, err := sluice.Open(ctx, dsn, &sluice.Options{SkipMigrations: true})
	wantSchemaError(t, "Open with version 5 missing", err, sluice.ErrSchemaTooOld, 4, required)
}

// A database a newer sluice migrated is refused, with both versions,
// whether opened with or without migrating, or migrated.
func TestSchemaTooNew(t *testing.T) {
	forEachFreshDB(t, func(t *testing.T, kind, dsn string) {
		ctx := t.Context()
		m := newMigrator(t, dsn)
		if _, err := m.Up(ctx); err != nil {
			t.Fatal(err)
		}
		required := m.List()[len(m.List())-1].Version
		db := appDB(t, kind, dsn, true)
		if _, err := db.ExecContext(ctx, "INSERT INTO sluice_migrations (version, applied_at) VALUES (9999, 0)"); err != nil {
			t.Fatal(err)
		}
		for _, skip := range []bool{false, true} {
			_, err := sluice.Open(ctx, dsn, &sluice.Options{SkipMigrations: skip})
			wantSchemaError(t, "Open", err, sluice.ErrSchemaTooNew, 9999, required)
		}
		_, err := m.Up(ctx)
		wantSchemaError(t, "Up", err, sluice.ErrSchemaTooNew, 9999, required)
		st, err := m.Status(ctx)
		if err != nil || st.Database != 9999 || len(st.Pending) != 0 {
			t.Fatalf("Status: %+v, %v", st, err)
		}
	})
}

// Migrators of several processes running Up at once on one database
// apply each migration exactly once between them.
func TestConcurrentMigrate(t *testing.T) {
	forEachFreshDB(t, func(t *testing.T, kind, dsn string) {
		const n = 4
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			applied = map[int]int{}
		)
		migs := make([]*sluice.Migrator, n)
		for i := range migs {
			migs[i] = newMigrator(t, dsn)
		}
		for _, m := range migs {
			wg.Go(func() {
				done, err := m.Up(t.Context())
				if err != nil {
					t.Errorf("Up: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, d := range done {
					applied[d.Version]++
				}
			})
		}
		wg.Wait()
		for _, mig := range migs[0].List() {
			if applied[mig.Version] != 1 {
				t.Errorf("migration %s applied %d times", mig.Name, applied[mig.Version])
			}
		}
		st, err := migs[0].Status(t.Context())
		if err != nil || len(st.Pending) != 0 || len(st.Applied) != len(migs[0].List()) {
			t.Fatalf("Status: %+v, %v", st, err)
		}
	})
}
