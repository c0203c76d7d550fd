package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/storetest"
)

// withParams returns dsn with query parameters set.
func withParams(t *testing.T, dsn string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// flows sends a message through b and leases it back.
func flows(t *testing.T, b store.Backend) {
	t.Helper()
	ctx := t.Context()
	s, err := b.Store(store.Tenant{Service: "pgb", Provider: "default"})
	if err != nil {
		t.Fatal(err)
	}
	q := randomName("q")
	if err := s.CreateQueue(ctx, &store.QueueSettings{Name: q}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: []store.NewMessage{{Payload: []byte("through the pooler")}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Lease(ctx, &store.LeaseParams{Queue: q, Max: 1, Visibility: time.Minute})
	if err != nil || len(got) != 1 || string(got[0].Payload) != "through the pooler" {
		t.Fatalf("Lease: %v, %v", got, err)
	}
}

// listeners counts the connections of an application name whose last
// statement was a LISTEN.
func listeners(t *testing.T, dsn, app string) int {
	t.Helper()
	return countActivity(t, dsn, "LISTEN%", app)
}

// Behind PgBouncer's transaction pooling (sluice_pgbouncer=transaction in
// the DSN) sluice issues no LISTEN, says so in its Features, and messages
// still flow; without it, it listens on one connection.
func TestPgBouncerTransactionModeDoesNotListen(t *testing.T) {
	t.Parallel()
	base := testDSN(t)
	schema := newSchema(t, base)
	for _, tc := range []struct {
		mode   string
		listen int
	}{{"transaction", 0}, {"session", 1}} {
		app := randomName("sluice-pgb-")
		dsn := withParams(t, base, "application_name", app, "sluice_pgbouncer", tc.mode)
		b, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema, Logger: storetest.Logger(t)})
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		flows(t, b)
		if got := b.Features().CrossProcessWake; got != (tc.listen == 1) {
			t.Errorf("%s: CrossProcessWake %v", tc.mode, got)
		}
		if got := listeners(t, base, app); got != tc.listen {
			t.Errorf("%s: %d connections listening, want %d", tc.mode, got, tc.listen)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := postgres.Open(t.Context(), postgres.Config{DSN: withParams(t, base, "sluice_pgbouncer", "statement"), Schema: schema})
	if !errors.Is(err, sluicetype.ErrInvalidArgument) {
		t.Fatalf("sluice_pgbouncer=statement: %v, want ErrInvalidArgument", err)
	}
}

// prepareCounter is a pgx tracer that counts named statements prepared.
type prepareCounter struct{ n atomic.Int64 }

func (p *prepareCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (p *prepareCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (p *prepareCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if d.Name != "" {
		p.n.Add(1)
	}
	return ctx
}
func (p *prepareCounter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// On an application's pgx pool in PgBouncer's transaction mode (whose
// exec mode prepares nothing), sluice prepares no named statement; in
// session mode it prepares its queries. The pool stays open.
func TestPgBouncerTransactionModePreparesNothing(t *testing.T) {
	t.Parallel()
	base := testDSN(t)
	schema := newSchema(t, base)
	// Open creates the schema.
	b, err := postgres.Open(t.Context(), postgres.Config{DSN: base, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	for _, tc := range []struct {
		mode     string
		prepared bool
	}{{"transaction", false}, {"", true}} {
		pc, err := pgxpool.ParseConfig(withParams(t, base, "search_path", schema))
		if err != nil {
			t.Fatal(err)
		}
		var prepares prepareCounter
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		pc.ConnConfig.Tracer = &prepares
		pool, err := pgxpool.NewWithConfig(t.Context(), pc)
		if err != nil {
			t.Fatal(err)
		}
		b, err := postgres.OpenPool(t.Context(), pool, &postgres.DBConfig{PgBouncer: tc.mode, Logger: storetest.Logger(t)})
		if err != nil {
			t.Fatalf("OpenPool %q: %v", tc.mode, err)
		}
		flows(t, b)
		if got := prepares.n.Load(); (got > 0) != tc.prepared {
			t.Errorf("mode %q: %d named statements prepared", tc.mode, got)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := pool.Ping(t.Context()); err != nil {
			t.Errorf("the pool after the backend closed: %v", err)
		}
		pool.Close()
	}
}
