package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/storetest"
)

// testDSN returns the test database's DSN from SLUICE_TEST_POSTGRES. It
// skips the test when the variable is unset, except in CI, where a missing
// database is a failure rather than a silent skip.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("SLUICE_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SLUICE_TEST_POSTGRES is not set: CI must run the PostgreSQL tests " +
				"(e.g. SLUICE_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable')")
		}
		t.Skip("SLUICE_TEST_POSTGRES is not set; set it to a PostgreSQL DSN " +
			"(e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run these tests")
	}
	return dsn
}

// newSchema returns the name of a schema no other test uses, dropped with
// everything in it when the test ends. Open creates it.
func newSchema(t testing.TB, dsn string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "sluice_test_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// openSchema opens a backend on schema and closes it when the test ends.
func openSchema(t *testing.T, dsn, schema string) store.Backend {
	t.Helper()
	b, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// tenantStore returns a store of a tenant of its own on b.
func tenantStore(t *testing.T, b store.Backend, tn store.Tenant) store.Store {
	t.Helper()
	st, err := b.Store(tn)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitWake waits for a wake-up on ch.
func waitWake(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake-up within 10s: %s", what)
	}
}

// drainWakes discards wake-ups already delivered to ch.
func drainWakes(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestCrossInstanceWake checks that LISTEN/NOTIFY carries wake-ups between
// two backends opened separately on the same schema: an enqueue through one
// wakes a queue watcher on the other, and an append a partition watcher.
func TestCrossInstanceWake(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	a := openSchema(t, dsn, schema)
	b := openSchema(t, dsn, schema)
	if !a.Features().CrossProcessWake {
		t.Fatal("Features().CrossProcessWake is false")
	}
	tn := store.Tenant{Service: "wake", Provider: "p"}
	sa, sb := tenantStore(t, a, tn), tenantStore(t, b, tn)
	ctx := t.Context()
	if err := sa.CreateQueue(ctx, &store.QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}

	ch, stop := sa.WatchQueue("q")
	defer stop()
	other, stopOther := sa.WatchQueue("other")
	defer stopOther()
	drainWakes(ch)
	if _, err := sb.Enqueue(ctx, &store.EnqueueParams{Queue: "q", Messages: []store.NewMessage{{Payload: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, ch, "enqueue on the second backend should wake the first's queue watcher")
	select {
	case <-other:
		t.Error("a watcher of another queue was woken")
	case <-time.After(100 * time.Millisecond):
	}

	pch, pstop := sa.WatchPartition(3)
	defer pstop()
	drainWakes(pch)
	if _, err := sb.Append(ctx, &store.AppendParams{Partition: 3, Records: []store.NewRecord{{Namespace: "n", Key: "k", Payload: []byte("r")}}}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, pch, "append on the second backend should wake the first's partition watcher")
}

// TestListenerReconnects kills the listening connection from the server
// side and checks that the backend reconnects and hears wake-ups again.
func TestListenerReconnects(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	app := "sluice_test_" + strings.TrimPrefix(schema, "sluice_test_")
	// The application name lets the test find the backend's connections
	// in pg_stat_activity.
	a := openSchema(t, withParam(dsn, "application_name", app), schema)
	b := openSchema(t, dsn, schema)
	tn := store.Tenant{Service: "reconnect", Provider: "p"}
	sa, sb := tenantStore(t, a, tn), tenantStore(t, b, tn)
	ctx := t.Context()
	if err := sa.CreateQueue(ctx, &store.QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	ch, stop := sa.WatchQueue("q")
	defer stop()

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query = 'LISTEN sluice'`, app).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d listening connections, want 1", killed)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		drainWakes(ch)
		if _, err := sb.Enqueue(ctx, &store.EnqueueParams{Queue: "q", Messages: []store.NewMessage{{Payload: []byte("x")}}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener did not reconnect within 20s")
		}
	}
}

// withParam adds a run-time parameter to a URL or keyword/value DSN.
func withParam(dsn, key, value string) string {
	switch {
	case !strings.Contains(dsn, "://"):
		return dsn + " " + key + "=" + value
	case strings.Contains(dsn, "?"):
		return dsn + "&" + key + "=" + value
	}
	return dsn + "?" + key + "=" + value
}

// TestSchemaFromDSN checks that a search_path in the DSN names the schema
// when Config.Schema is empty, and that a list of schemas is refused.
func TestSchemaFromDSN(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	b, err := postgres.Open(t.Context(), postgres.Config{DSN: withParam(dsn, "search_path", schema)})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no table in schema %s named by the DSN's search_path", schema)
	}
	_, err = postgres.Open(t.Context(), postgres.Config{DSN: withParam(dsn, "search_path", "a,b")})
	if err == nil || !strings.Contains(err.Error(), "not one schema name") {
		t.Fatalf("search_path a,b: got %v, want an error", err)
	}
}

// TestCloseStopsListener checks that Close stops the listening goroutine
// and that Close may be called twice.
func TestCloseStopsListener(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	b, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if !eventually(listenerRunning) {
		t.Fatalf("no listener goroutine after Open; goroutines:\n%s", stacks())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !eventually(func() bool { return !listenerRunning() }) {
		// Other tests run in parallel may hold listeners of their own;
		// this test runs alone (no t.Parallel), so any listener is a leak.
		t.Fatalf("a listener goroutine outlived Close; goroutines:\n%s", stacks())
	}
}

// listenerRunning reports whether any backend's listening goroutine
// exists. A goroutine not yet scheduled shows only its go-statement
// wrapper, so the match is on the listener type, not on its run method.
func listenerRunning() bool {
	return strings.Contains(stacks(), "postgres.(*listener).")
}

// eventually reports whether cond holds within a few seconds: a goroutine
// may not have been scheduled yet after go, or may still be unwinding
// after it closed its done channel.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// stacks returns the stacks of all goroutines.
func stacks() string {
	buf := make([]byte, 1<<24)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestOpenErrors checks Open's configuration errors.
func TestOpenErrors(t *testing.T) {
	if _, err := postgres.Open(t.Context(), postgres.Config{}); err == nil || !strings.Contains(err.Error(), "DSN is empty") {
		t.Fatalf("empty DSN: got %v", err)
	}
	if _, err := postgres.Open(t.Context(), postgres.Config{DSN: "postgres://%zz"}); err == nil {
		t.Fatal("bad DSN: no error")
	}
}

// TestReopenKeepsData opens a schema twice in turn: the second Open finds
// the schema migrated and the data in place, and two concurrent Opens of a
// fresh schema both succeed.
func TestReopenKeepsData(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	errs := make(chan error, 4)
	backends := make(chan store.Backend, 4)
	for range 4 {
		go func() {
			b, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema})
			errs <- err
			backends <- b
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
		if b := <-backends; b != nil {
			b.Close()
		}
	}
	if t.Failed() {
		return
	}
	tn := store.Tenant{Service: "reopen", Provider: "p"}
	a := openSchema(t, dsn, schema)
	if err := tenantStore(t, a, tn).CreateQueue(t.Context(), &store.QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := openSchema(t, dsn, schema)
	if _, err := tenantStore(t, b, tn).GetQueue(t.Context(), "q"); err != nil {
		t.Fatalf("after reopening: %v", err)
	}
}

// TestVacuumsWithoutAutovacuum turns autovacuum off for a schema's
// messages table and checks that the backend vacuums it itself once it
// holds more dead rows than autovacuum would allow: the dead versions
// completed messages leave are gone within a few intervals.
func TestVacuumsWithoutAutovacuum(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	openSchema(t, dsn, schema).Close()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	table := pgx.Identifier{schema, "sluice_messages"}.Sanitize()
	if _, err := conn.Exec(t.Context(), "ALTER TABLE "+table+" SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	b, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema, VacuumInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := b.Store(store.Tenant{Service: "svc", Provider: "prov"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	// More dead rows than autovacuum's threshold for the table (1,000).
	for range 2 {
		msgs := make([]store.NewMessage, 1000)
		for i := range msgs {
			msgs[i] = store.NewMessage{Payload: []byte("x")}
		}
		if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: "q", Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		got, err := st.Lease(ctx, &store.LeaseParams{Queue: "q", Max: 1000, Visibility: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		p := store.SettleParams{Queue: "q", Action: store.Complete}
		for _, l := range got {
			p.Receipts = append(p.Receipts, l.Receipt)
		}
		if _, err := st.Settle(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var vacuumed bool
		err := conn.QueryRow(ctx, `SELECT last_vacuum IS NOT NULL AND n_dead_tup = 0
			FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'sluice_messages'`, schema).Scan(&vacuumed)
		if err != nil {
			t.Fatal(err)
		}
		if vacuumed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("sluice_messages was not vacuumed within 20s with autovacuum off")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A client paused inside a transaction that holds partitions' checkpoint
// rows (creating a subscription, saving, trimming) holds up saves, not
// the leases of any node.
func TestLeasesBesideDataLocks(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	b := openSchema(t, dsn, schema)
	storetest.LeasesBesideDataLocks(t, b, func(ctx context.Context, tn store.Tenant) (func(), error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		tx, err := conn.Begin(ctx)
		if err == nil {
			_, err = tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema, "sluice_partition_checkpoints"}.Sanitize()+
				" WHERE service = $1 AND provider = $2 FOR UPDATE", tn.Service, tn.Provider)
		}
		if err != nil {
			conn.Close(ctx)
			return nil, err
		}
		return func() {
			tx.Rollback(context.Background())
			conn.Close(context.Background())
		}, nil
	})
}
