package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/storetest"
)

// These tests run sluice through a real PgBouncer (testdb.PgBouncerEnv,
// testdb.PgBouncerSessionEnv), each in a database of its own.

// newBouncerDB returns a database of the test's own behind the PgBouncer
// that env names, dropped when the test ends. With migrate, sluice's
// schema is migrated into it over a direct connection, since migrations
// take a session lock that transaction pooling cannot keep.
func newBouncerDB(t *testing.T, env string, migrate bool) testdb.BouncerDB {
	t.Helper()
	db, drop, err := testdb.PgBouncer(t.Context(), env)
	testdb.Check(t, err)
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop database %s: %v", db.Name, err)
		}
	})
	if migrate {
		b, err := postgres.Open(t.Context(), postgres.Config{DSN: db.Direct, Logger: storetest.Logger(t)})
		if err != nil {
			t.Fatalf("migrate %s: %v", db.Name, err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// sessionMaxConns caps the pools of the backends opened through session
// pooling, where every connection of theirs, idle or not, holds a server
// connection of PgBouncer's (.ci/run allows 20 a user), so that several
// backends at once stay within it.
const sessionMaxConns = 4

// openBouncer opens a backend on dsn with at most maxConns connections (0:
// the default) and closes it when the test ends.
func openBouncer(t *testing.T, dsn string, skipMigrations bool, maxConns int) store.Backend {
	t.Helper()
	b, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, SkipMigrations: skipMigrations, MaxConns: maxConns,
		Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// watchSessions starts watching db's server connections for statements
// that need a session (see testdb.SessionWatch).
func watchSessions(t *testing.T, db testdb.BouncerDB) *testdb.SessionWatch {
	t.Helper()
	w, err := testdb.WatchSessions(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// checkNoSessionState fails the test if w saw a LISTEN, a PREPARE or a
// session advisory lock on db's server connections, or if any of them
// holds a named prepared statement. Call it once sluice's backends on db
// are closed.
func checkNoSessionState(t *testing.T, db testdb.BouncerDB, w *testdb.SessionWatch) {
	t.Helper()
	seen, err := w.Stop()
	if err != nil {
		t.Errorf("watching pg_stat_activity: %v", err)
	}
	if len(seen) > 0 {
		t.Errorf("statements that need a session ran through transaction pooling: %q", seen)
	}
	prepared, err := testdb.PreparedStatements(t.Context(), db)
	if err != nil {
		t.Fatalf("pg_prepared_statements: %v", err)
	}
	if len(prepared) > 0 {
		t.Errorf("named statements left on PgBouncer's server connections: %q", prepared)
	}
}

// The conformance suite passes through PgBouncer's transaction pooling
// with sluice_pgbouncer=transaction, and sluice leaves no LISTEN, no
// session lock and no named prepared statement on the server
// connections.
func TestThroughPgBouncerTransactionConformance(t *testing.T) {
	db := newBouncerDB(t, testdb.PgBouncerEnv, true)
	w := watchSessions(t, db)
	dsn := withParams(t, db.Bouncer, "sluice_pgbouncer", "transaction")
	t.Run("Suite", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Backend {
			b := openBouncer(t, dsn, true, 0)
			if b.Features().CrossProcessWake {
				t.Error("CrossProcessWake through transaction pooling")
			}
			return b
		})
	})
	checkNoSessionState(t, db, w)
}

// The conformance suite passes through PgBouncer's session pooling
// without any setting, migrations included.
func TestThroughPgBouncerSessionConformance(t *testing.T) {
	db := newBouncerDB(t, testdb.PgBouncerSessionEnv, false)
	storetest.Run(t, func(t *testing.T) store.Backend {
		b := openBouncer(t, db.Bouncer, false, sessionMaxConns)
		if !b.Features().CrossProcessWake {
			t.Error("no CrossProcessWake through session pooling")
		}
		return b
	})
}

// schemaCheck identifies the first statement Open sends, the schema's
// existence check (createSchema).
const schemaCheck = "FROM pg_namespace WHERE nspname"

// Without sluice_pgbouncer=transaction, transaction pooling breaks sluice:
// pgx prepares named statements, which stay on PgBouncer's server
// connections, and the next client to prepare the same one on such a
// connection fails (SQLSTATE 42P05, prepared statement already exists).
// The test makes that deterministic by holding every other server
// connection, so that the next Open lands on the one holding the schema
// check. With the setting, an Open on that same connection works.
func TestThroughPgBouncerTransactionWithoutSetting(t *testing.T) {
	db := newBouncerDB(t, testdb.PgBouncerEnv, true)
	first, err := postgres.Open(t.Context(), postgres.Config{DSN: db.Bouncer, SkipMigrations: true, Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	flows(t, first)
	// Closing the backend returns its server connections to PgBouncer.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	held, leaky := holdLeaky(t, db)
	defer testdb.ReleaseAll(held)
	leaky.Release()

	_, err = postgres.Open(t.Context(), postgres.Config{DSN: db.Bouncer, SkipMigrations: true})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42P05" {
		t.Fatalf("Open without sluice_pgbouncer=transaction on a server connection holding its statements: %v, want SQLSTATE 42P05", err)
	}
	t.Logf("without sluice_pgbouncer=transaction: %v", err)

	b := openBouncer(t, withParams(t, db.Bouncer, "sluice_pgbouncer", "transaction"), true, 0)
	flows(t, b)
}

// A schema that the connections do not get (PgBouncer dropped the
// search_path sent at connect) fails Open with ErrInvalidArgument before
// any table is created, instead of migrating into the default schema.
func TestThroughPgBouncerSchemaNotApplied(t *testing.T) {
	db := newBouncerDB(t, testdb.PgBouncerSessionEnv, false)
	_, err := postgres.Open(t.Context(), postgres.Config{DSN: db.Bouncer, Schema: "elsewhere", MaxConns: sessionMaxConns,
		Logger: storetest.Logger(t)})
	if !errors.Is(err, sluicetype.ErrInvalidArgument) || !strings.Contains(err.Error(), `"elsewhere"`) {
		t.Fatalf("Open with a schema PgBouncer cannot pass = %v, want ErrInvalidArgument naming it", err)
	}
	conn, err := pgx.Connect(t.Context(), db.Direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var tables int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'sluice%'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d sluice tables created after the refused Open, want none", tables)
	}
}

// holdLeaky holds every server connection of db's pool and returns them
// with the one that holds the schema check as a named statement. A server
// connection the closed backend still had may take a moment to go back to
// the pool (until then a hold gets a fresh one): it tries again, for a
// few seconds, until one holds the statement.
func holdLeaky(t *testing.T, db testdb.BouncerDB) ([]*testdb.HeldServer, *testdb.HeldServer) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		held, err := testdb.HoldServers(t.Context(), db)
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for _, h := range held {
			all = append(all, h.Prepared...)
			for _, p := range h.Prepared {
				if strings.HasPrefix(p, "stmtcache_") && strings.Contains(p, schemaCheck) {
					return held, h
				}
			}
		}
		testdb.ReleaseAll(held)
		if time.Now().After(deadline) {
			t.Fatalf("no server connection holds the schema check as a named statement; found %q", all)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
