package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/storetest"
)

// appPool opens a pgx pool on a fresh schema, created here, that its
// connections' search_path names; closed when the test ends.
func appPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	pool, err := pgxpool.New(t.Context(), withParams(t, dsn, "search_path", schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return pool
}

// openOnPool opens a backend on the application's pool, closed when the
// test ends.
func openOnPool(t *testing.T, pool *pgxpool.Pool) store.Backend {
	t.Helper()
	b, err := postgres.OpenPool(t.Context(), pool, &postgres.DBConfig{Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// pgxTx is a wrapped pgx.Tx with the suite's Commit and Rollback.
type pgxTx struct{ postgres.Tx }

func (p pgxTx) Commit() error   { return p.Unwrap().Commit(context.Background()) }
func (p pgxTx) Rollback() error { return p.Unwrap().Rollback(context.Background()) }

// TestConformanceTx runs the suite's tests of settles and handled
// records in a caller's transaction on pgx transactions of the
// application's pool (postgres.WrapTx), which the backend shares.
func TestConformanceTx(t *testing.T) {
	pool := appPool(t)
	storetest.RunTx(t, func(t *testing.T) store.Backend { return openOnPool(t, pool) },
		func(ctx context.Context) (storetest.Tx, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return nil, err
			}
			return pgxTx{postgres.WrapTx(tx)}, nil
		})
}

// Messages sent and records appended in a pgx transaction commit with
// it, and the commit sends the notification that wakes receivers in
// other processes; a rollback leaves nothing.
func TestWrapTxEnqueueAppendNotify(t *testing.T) {
	pool := appPool(t)
	ctx := t.Context()
	st := tenantStore(t, openOnPool(t, pool), store.Tenant{Service: "tx", Provider: "default"})
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN sluice"); err != nil {
		t.Fatal(err)
	}
	write := func(commit bool) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		p := &store.EnqueueAllParams{Batches: []store.EnqueueParams{{Queue: "q", Messages: []store.NewMessage{{Payload: []byte("m")}}}}}
		if _, err := st.(store.TxEnqueuer).EnqueueTx(ctx, postgres.WrapTx(tx), p); err != nil {
			t.Fatalf("EnqueueTx: %v", err)
		}
		ap := &store.AppendParams{Partition: 1, Records: []store.NewRecord{{Namespace: "ns", Key: "k", Payload: []byte("r")}}}
		if _, err := st.(store.TxAppender).AppendTx(ctx, postgres.WrapTx(tx), ap); err != nil {
			t.Fatalf("AppendTx: %v", err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(false)
	write(true)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(wctx)
	if err != nil {
		t.Fatalf("no notification within 10 s of the commit: %v", err)
	}
	if !strings.HasPrefix(n.Payload, "tx|") {
		t.Fatalf("notification %q, want one of a caller's transaction (tx|...)", n.Payload)
	}
	ls, err := st.Lease(ctx, &store.LeaseParams{Queue: "q", Max: 10, Visibility: time.Minute})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Lease after a rolled-back and a committed send: %d messages, %v; want 1", len(ls), err)
	}
	recs, err := st.Read(ctx, &store.ReadParams{Partition: 1, Max: 10})
	if err != nil || len(recs) != 1 {
		t.Fatalf("Read after a rolled-back and a committed append: %d records, %v; want 1", len(recs), err)
	}
}

// A wrapped pgx.Tx is refused by a backend of another dialect, a value
// that is no transaction by every backend, and Transactions need a pool.
func TestWrapTxRefused(t *testing.T) {
	pool := appPool(t)
	ctx := t.Context()
	st := tenantStore(t, openOnPool(t, pool), store.Tenant{Service: "tx", Provider: "default"})
	p := &store.HandledParams{Subscription: "s", Position: 1}
	db := struct{ store.Tx }{} // neither a *sql.Tx nor a NativeTx
	if _, err := st.(store.TxHandledRecorder).MarkHandledTx(ctx, db, p); !errors.Is(err, sluicetype.ErrInvalidArgument) {
		t.Fatalf("MarkHandledTx on %T: %v, want ErrInvalidArgument", db, err)
	}
	if _, err := (postgres.Transactions{}).Begin(ctx); !errors.Is(err, sluicetype.ErrInvalidArgument) {
		t.Fatalf("Transactions without a pool: %v, want ErrInvalidArgument", err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	other := otherDialect{postgres.WrapTx(tx)}
	if _, err := st.(store.TxHandledRecorder).MarkHandledTx(ctx, other, p); !errors.Is(err, sluicetype.ErrInvalidArgument) {
		t.Fatalf("MarkHandledTx on another dialect's transaction: %v, want ErrInvalidArgument", err)
	}
}

// otherDialect is a native transaction of another backend.
type otherDialect struct{ postgres.Tx }

func (otherDialect) TxDialect() string { return "other" }

// A nil *DBConfig is all defaults: OpenDB and OpenPool open a backend on
// the application's pool that sends and leases, and closing it leaves
// the pool open.
func TestOpenNilDBConfig(t *testing.T) {
	pool := appPool(t)
	for name, open := range map[string]func() (store.Backend, error){
		"OpenPool": func() (store.Backend, error) { return postgres.OpenPool(t.Context(), pool, nil) },
		"OpenDB": func() (store.Backend, error) {
			db := stdlib.OpenDBFromPool(pool)
			t.Cleanup(func() { db.Close() })
			return postgres.OpenDB(t.Context(), db, nil)
		},
	} {
		b, err := open()
		if err != nil {
			t.Fatalf("%s with a nil config: %v", name, err)
		}
		flows(t, b)
		if err := b.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
		if err := pool.Ping(t.Context()); err != nil {
			t.Errorf("the pool after the backend of %s closed: %v", name, err)
		}
	}
}
