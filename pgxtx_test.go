package sluice_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/storetest"
)

// pgxClient opens a pgx pool on the shared PostgreSQL schema and a client
// of a fresh tenant on it (postgres.OpenPool), as an application on pgx
// does; both closed when the test ends.
func pgxClient(t *testing.T) (*sluice.Client, *pgxpool.Pool) {
	t.Helper()
	shared.Backend(t, "postgres") // skips the test when PostgreSQL is not configured
	pool, err := pgxpool.New(t.Context(), shared.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := postgres.OpenPool(t.Context(), pool, &postgres.DBConfig{Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c, err := sluice.NewClient(b, &sluice.Options{Service: "t-" + randHex(6), Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, pool
}

// pgxTable creates an application's table of ids and returns its name.
func pgxTable(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	name := "app_" + randHex(4)
	if _, err := pool.Exec(t.Context(), "CREATE TABLE "+name+" (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+name) })
	return name
}

func pgxInsert(ctx context.Context, tx pgx.Tx, table, id string) error {
	_, err := tx.Exec(ctx, "INSERT INTO "+table+" (id) VALUES ($1)", id)
	return err
}

func pgxRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func pgxBegin(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// CompleteTx in a pgx transaction commits with the application's row,
// or neither does and the message comes back.
func TestPgxCompleteTx(t *testing.T) {
	t.Parallel()
	c, pool := pgxClient(t)
	ctx := t.Context()
	table := pgxTable(t, pool)
	q := createQueue(t, c, &sluice.QueueProperties{LockDuration: time.Second})
	send(t, newSender(t, c, q), "order-1")
	r := newReceiver(t, c, q, sluice.PeekLock)

	m := receive(t, r, 1)[0]
	tx := pgxBegin(t, pool)
	if err := pgxInsert(ctx, tx, table, "rolled back"); err != nil {
		t.Fatal(err)
	}
	if err := r.CompleteTx(ctx, postgres.WrapTx(tx), m); err != nil {
		t.Fatalf("CompleteTx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pgxRows(t, pool, table); n != 0 {
		t.Fatalf("%d application rows after a rollback", n)
	}
	again := receive(t, r, 1)[0] // once the one-second lock ends
	if again.SequenceNumber != m.SequenceNumber || again.DeliveryCount != 2 {
		t.Fatalf("after a rollback: message %d delivered %d times, want %d twice", again.SequenceNumber, again.DeliveryCount, m.SequenceNumber)
	}

	tx = pgxBegin(t, pool)
	if err := pgxInsert(ctx, tx, table, "order-1"); err != nil {
		t.Fatal(err)
	}
	if err := r.CompleteTx(ctx, postgres.WrapTx(tx), again); err != nil {
		t.Fatalf("CompleteTx: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pgxRows(t, pool, table); n != 1 {
		t.Fatalf("%d application rows after the commit, want 1", n)
	}
	if err := r.Complete(ctx, again); !errors.Is(err, sluice.ErrLockLost) {
		t.Fatalf("Complete after a committed CompleteTx: %v, want ErrLockLost", err)
	}
	wantEmptyQueue(t, c, q)
}

// AbandonTx, DeadLetterTx and DeferTx in a pgx transaction apply once it
// commits; a lost lock leaves the transaction usable.
func TestPgxSettleTxActions(t *testing.T) {
	t.Parallel()
	c, pool := pgxClient(t)
	ctx := t.Context()
	table := pgxTable(t, pool)
	q := createQueue(t, c, nil)
	send(t, newSender(t, c, q), "abandon", "dead", "defer", "lost")
	r := newReceiver(t, c, q, sluice.PeekLock)
	ms := receive(t, r, 4)
	if len(ms) != 4 {
		t.Fatalf("received %d messages, want 4", len(ms))
	}
	if err := r.Complete(ctx, ms[3]); err != nil {
		t.Fatal(err)
	}
	tx := pgxBegin(t, pool)
	wtx := postgres.WrapTx(tx)
	if err := r.AbandonTx(ctx, wtx, ms[0], &sluice.AbandonOptions{PropertiesToModify: map[string]string{"tries": "1"}}); err != nil {
		t.Fatalf("AbandonTx: %v", err)
	}
	if err := r.DeadLetterTx(ctx, wtx, ms[1], &sluice.DeadLetterOptions{Reason: "invalid", Description: "no customer"}); err != nil {
		t.Fatalf("DeadLetterTx: %v", err)
	}
	if err := r.DeferTx(ctx, wtx, ms[2], nil); err != nil {
		t.Fatalf("DeferTx: %v", err)
	}
	if err := r.CompleteTx(ctx, wtx, ms[3]); !errors.Is(err, sluice.ErrLockLost) {
		t.Fatalf("CompleteTx of a completed message: %v, want ErrLockLost", err)
	}
	if err := pgxInsert(ctx, tx, table, "kept"); err != nil {
		t.Fatalf("the pgx transaction after ErrLockLost: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pgxRows(t, pool, table); n != 1 {
		t.Fatalf("%d application rows, want 1", n)
	}
	again := receive(t, r, 3)
	if len(again) != 1 || again[0].SequenceNumber != ms[0].SequenceNumber || again[0].ApplicationProperties["tries"] != "1" || again[0].DeliveryCount != 2 {
		t.Fatalf("after AbandonTx: received %+v, want the abandoned message with tries=1, delivered twice", again)
	}
	dlq, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	dead := receive(t, dlq, 1)
	if dead[0].SequenceNumber != ms[1].SequenceNumber || dead[0].DeadLetterReason != "invalid" || dead[0].DeadLetterDescription != "no customer" {
		t.Fatalf("dead letter after DeadLetterTx: %+v", dead[0])
	}
	def, err := r.ReceiveDeferred(ctx, ms[2].SequenceNumber)
	if err != nil || len(def) != 1 {
		t.Fatalf("ReceiveDeferred after DeferTx: %v, %v", def, err)
	}
}

// A session's settlements and state commit with a pgx transaction, or
// not at all.
func TestPgxSessionTx(t *testing.T) {
	t.Parallel()
	c, pool := pgxClient(t)
	ctx := t.Context()
	table := pgxTable(t, pool)
	q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
	s := newSender(t, c, q)
	for i := range 2 {
		if _, err := s.Send(ctx, sessionMsg("cart", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	sr, err := c.AcceptSession(ctx, q, "cart", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	ms, err := sr.Receive(ctx, 2)
	if err != nil || len(ms) != 2 {
		t.Fatalf("Receive: %d messages, %v", len(ms), err)
	}
	state := func(want string) {
		t.Helper()
		got, err := sr.SessionState(ctx)
		if err != nil || string(got) != want {
			t.Fatalf("session state %q, %v; want %q", got, err, want)
		}
	}
	// Rolled back: nothing of it remains.
	tx := pgxBegin(t, pool)
	if err := sr.CompleteTx(ctx, postgres.WrapTx(tx), ms[0]); err != nil {
		t.Fatalf("CompleteTx: %v", err)
	}
	if err := sr.SetSessionStateTx(ctx, postgres.WrapTx(tx), []byte("rolled back")); err != nil {
		t.Fatalf("SetSessionStateTx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	state("")
	// Committed: the first completed, the second abandoned, the state set.
	tx = pgxBegin(t, pool)
	if err := pgxInsert(ctx, tx, table, "0"); err != nil {
		t.Fatal(err)
	}
	if err := sr.CompleteTx(ctx, postgres.WrapTx(tx), ms[0]); err != nil {
		t.Fatalf("CompleteTx: %v", err)
	}
	if err := sr.AbandonTx(ctx, postgres.WrapTx(tx), ms[1], nil); err != nil {
		t.Fatalf("AbandonTx: %v", err)
	}
	if err := sr.SetSessionStateTx(ctx, postgres.WrapTx(tx), []byte("0")); err != nil {
		t.Fatalf("SetSessionStateTx: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	state("0")
	again, err := sr.Receive(ctx, 2)
	if err != nil || len(again) != 1 || again[0].SequenceNumber != ms[1].SequenceNumber {
		t.Fatalf("after the commit: received %v, %v; want the abandoned message only", again, err)
	}
	if n := pgxRows(t, pool, table); n != 1 {
		t.Fatalf("%d application rows, want 1", n)
	}
	if err := sr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tx = pgxBegin(t, pool)
	if err := sr.SetSessionStateTx(ctx, postgres.WrapTx(tx), []byte("late")); !errors.Is(err, sluice.ErrSessionLockLost) {
		t.Fatalf("SetSessionStateTx after Close: %v, want ErrSessionLockLost", err)
	}
	if err := tx.Rollback(ctx); err != nil { // it holds the session's row: before the deferred Close
		t.Fatal(err)
	}
}

// SendTx and PublishTx in a pgx transaction commit with it, or vanish.
func TestPgxSendPublishTx(t *testing.T) {
	t.Parallel()
	c, pool := pgxClient(t)
	ctx := t.Context()
	q := createQueue(t, c, nil)
	if _, err := c.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSubscription(ctx, "events", "audit", nil); err != nil {
		t.Fatal(err)
	}
	s, ts := newSender(t, c, q), newSender(t, c, "events")
	id := sluice.StreamID{Namespace: "outbox", Key: "order-1"}
	col := newCollector()
	startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
		p.Handle("shipper", col.handle, &sluice.ConsumerOptions{Namespace: "outbox"})
	})
	write := func(body string, commit bool) []int64 {
		t.Helper()
		tx := pgxBegin(t, pool)
		if _, err := s.SendTx(ctx, postgres.WrapTx(tx), &sluice.Message{Body: []byte(body)}); err != nil {
			t.Fatalf("SendTx: %v", err)
		}
		if _, err := ts.SendTx(ctx, postgres.WrapTx(tx), &sluice.Message{Body: []byte(body)}); err != nil {
			t.Fatalf("SendTx to a topic: %v", err)
		}
		pos, err := c.PublishTx(ctx, postgres.WrapTx(tx), id, sluice.Event{Body: []byte(body)})
		if err != nil {
			t.Fatalf("PublishTx: %v", err)
		}
		end := tx.Rollback
		if commit {
			end = tx.Commit
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
		return pos
	}
	write("rolled back", false)
	pos := write("a", true)
	if got := bodies(receive(t, newReceiver(t, c, q, sluice.ReceiveAndDelete), 10)); len(got) != 1 || got[0] != "a" {
		t.Fatalf("after commit the queue gave %v, want [a]", got)
	}
	if got := drain(t, c, sluice.SubscriptionPath("events", "audit")); len(got) != 1 || got[0] != "a" {
		t.Fatalf("after commit the subscription gave %v, want [a]", got)
	}
	col.waitCount(t, 1, 30*time.Second)
	if got := col.positions("ns/outbox/shipper", "order-1"); len(got) != 1 || got[0] != pos[0] {
		t.Fatalf("stream events %v, want the committed one %v only", got, pos)
	}
}

// HandleTxWith hands the handler a pgx transaction (postgres.Transactions):
// a failed delivery rolls its write back, the retry writes it once, and
// an event whose transaction committed is not handed over again.
func TestPgxHandleTx(t *testing.T) {
	t.Parallel()
	c, pool := pgxClient(t)
	table := pgxTable(t, pool)
	noop := func(context.Context, pgx.Tx, *sluice.StreamEvent) error { return nil }
	p := c.NewStreamProcessor(nil)
	if err := sluice.HandleTxWith(p, "x", nil, noop, nil); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Fatalf("HandleTxWith with no transaction source: %v, want ErrInvalidArgument", err)
	}
	var failed atomic.Bool
	done := make(chan int64, 10)
	startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
		err := sluice.HandleTxWith(p, "fx", postgres.Transactions{Pool: pool}, func(ctx context.Context, tx pgx.Tx, ev *sluice.StreamEvent) error {
			if err := pgxInsert(ctx, tx, table, fmt.Sprint(ev.Position)); err != nil {
				return err
			}
			if !failed.Swap(true) {
				return errors.New("fails once, after its write")
			}
			done <- ev.Position
			return nil
		}, &sluice.ConsumerOptions{Namespace: "tx", RetryBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
	})
	pos := publish(t, c, sluice.StreamID{Namespace: "tx", Key: "k"}, "a", "b")
	for _, want := range pos {
		select {
		case got := <-done:
			if got != want {
				t.Fatalf("handled position %d, want %d", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("position %d not handled within 30 s", want)
		}
	}
	// The handler reports before its transaction commits: wait for it.
	for deadline := time.Now().Add(30 * time.Second); pgxRows(t, pool, table) != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows 30 s after a failed delivery and its retry, want 2", pgxRows(t, pool, table))
		}
	}
}

// Transactions of the wrong kind are refused with ErrInvalidArgument: a
// *sql.DB on every backend, a pgx transaction on SQLite and MariaDB.
func TestTxWrongType(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		db := rawDB(t, kind)
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "m")
		r := newReceiver(t, c, q, sluice.PeekLock)
		m := receive(t, r, 1)[0]
		if err := r.CompleteTx(ctx, db, m); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Fatalf("CompleteTx on a *sql.DB: %v, want ErrInvalidArgument", err)
		}
		if _, err := newSender(t, c, q).SendTx(ctx, db, &sluice.Message{Body: []byte("x")}); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Fatalf("SendTx on a *sql.DB: %v, want ErrInvalidArgument", err)
		}
		if kind == "postgres" {
			return
		}
		_, pool := pgxClient(t)
		tx := pgxBegin(t, pool)
		if err := r.CompleteTx(ctx, postgres.WrapTx(tx), m); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Fatalf("CompleteTx on %s with a pgx transaction: %v, want ErrInvalidArgument", kind, err)
		}
		if _, err := c.PublishTx(ctx, postgres.WrapTx(tx), sluice.StreamID{Namespace: "n", Key: "k"}, sluice.Event{}); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Fatalf("PublishTx on %s with a pgx transaction: %v, want ErrInvalidArgument", kind, err)
		}
		if err := r.Complete(ctx, m); err != nil {
			t.Fatalf("Complete after the refusals: %v", err)
		}
	})
}

// appTx is an application's transaction in a crash test's child
// process: what sluice writes in, and the application's own insert and
// commit.
type appTx struct {
	sluice.Tx
	insert func(ctx context.Context, table, id string) error
	commit func(ctx context.Context) error
}

// crashApp is a crash test's application: how it opens its transactions.
type crashApp struct {
	begin func(ctx context.Context) (appTx, error)
	// db is its *sql.DB (nil for "pgx").
	db *sql.DB
	// pool is its pgx pool ("pgx" only).
	pool *pgxpool.Pool
}

// childApp opens a crash test's child process's client on dsn and its
// application: for a kind of database, on a *sql.DB of its own; for
// "pgx" (PostgreSQL), on a pgxpool.Pool of its own with postgres.OpenPool,
// its transactions pgx's.
func childApp(t *testing.T, kind, dsn, service string) (*sluice.Client, crashApp) {
	t.Helper()
	ctx := context.Background()
	if kind != "pgx" {
		c, err := sluice.Open(ctx, dsn, &sluice.Options{Service: service})
		if err != nil {
			t.Fatal(err)
		}
		db := rawDBFor(t, kind, dsn)
		return c, crashApp{db: db, begin: func(ctx context.Context) (appTx, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return appTx{}, err
			}
			return appTx{
				Tx:     tx,
				insert: func(ctx context.Context, table, id string) error { return insertAppErr(ctx, kind, tx, table, id) },
				commit: func(context.Context) error { return tx.Commit() },
			}, nil
		}}
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	b, err := postgres.OpenPool(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sluice.NewClient(b, &sluice.Options{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	return c, crashApp{pool: pool, begin: func(ctx context.Context) (appTx, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return appTx{}, err
		}
		return appTx{
			Tx:     postgres.WrapTx(tx),
			insert: func(ctx context.Context, table, id string) error { return pgxInsert(ctx, tx, table, id) },
			commit: tx.Commit,
		}, nil
	}}
}
