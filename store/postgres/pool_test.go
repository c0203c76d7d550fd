package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/storetest"
)

// connections counts the server connections of an application name.
func connections(t *testing.T, dsn, app string) int {
	t.Helper()
	return countActivity(t, dsn, "", app)
}

// countActivity counts the server connections of an application name
// whose last statement matches like ("" for any).
func countActivity(t *testing.T, dsn, like, app string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND ($2 = '' OR query ILIKE $2)", app, like).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Config.MaxConns caps the pool: under many concurrent reads a backend
// with MaxConns 2 holds at most 2 connections besides its listener's,
// where the default pool grows past that.
func TestMaxConnsCapsThePool(t *testing.T) {
	t.Parallel()
	base := testDSN(t)
	schema := newSchema(t, base)
	for _, tc := range []struct {
		maxConns int
		capped   bool
	}{{2, true}, {0, false}} {
		app := randomName("sluice-pool-")
		b, err := postgres.Open(t.Context(), postgres.Config{DSN: withParams(t, base, "application_name", app), Schema: schema,
			MaxConns: tc.maxConns, Logger: storetest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		s, err := b.Store(store.Tenant{Service: "pool", Provider: "default"})
		if err != nil {
			t.Fatal(err)
		}
		q := randomName("q")
		if err := s.CreateQueue(t.Context(), &store.QueueSettings{Name: q}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 30 {
					if _, err := s.Peek(t.Context(), &store.PeekParams{Queue: q, Max: 10}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		// The pool keeps its connections idle; one more listens.
		n := connections(t, base, app)
		if tc.capped && n > tc.maxConns+1 {
			t.Errorf("MaxConns %d: %d connections", tc.maxConns, n)
		}
		if !tc.capped && n <= 3 {
			t.Errorf("default pool: only %d connections under 16 concurrent readers; the check above proves nothing", n)
		}
		b.Close()
	}
}
