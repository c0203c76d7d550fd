package sluice_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// appTable creates an application's table of ids on db and returns its
// name.
func appTable(t *testing.T, db *sql.DB) string {
	t.Helper()
	name := "app_" + randHex(4)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+name+" (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+name) })
	return name
}

// insertApp writes an application row in tx.
func insertApp(t *testing.T, kind string, tx *sql.Tx, table, id string) {
	t.Helper()
	if err := insertAppErr(t.Context(), kind, tx, table, id); err != nil {
		t.Fatalf("insert into %s: %v", table, err)
	}
}

func insertAppErr(ctx context.Context, kind string, tx *sql.Tx, table, id string) error {
	ph := "?"
	if kind == "postgres" {
		ph = "$1"
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (id) VALUES ("+ph+")", id)
	return err
}

// appRows counts the rows of an application's table.
func appRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// CompleteTx commits with the application's write, or not at all; the
// message does not learn the outcome until its next settlement.
func TestCompleteTx(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		db := rawDB(t, kind)
		table := appTable(t, db)
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: time.Second})
		send(t, newSender(t, c, q), "order-1")
		r := newReceiver(t, c, q, sluice.PeekLock)

		m := receive(t, r, 1)[0]
		tx := begin(t, db)
		insertApp(t, kind, tx, table, "rolled back")
		if err := r.CompleteTx(ctx, tx, m); err != nil {
			t.Fatalf("CompleteTx: %v", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n := appRows(t, db, table); n != 0 {
			t.Fatalf("%d application rows after a rollback", n)
		}
		again := receive(t, r, 1)[0] // once the one-second lock ends
		if again.SequenceNumber != m.SequenceNumber || again.DeliveryCount != 2 {
			t.Fatalf("after a rollback: message %d delivered %d times, want %d twice", again.SequenceNumber, again.DeliveryCount, m.SequenceNumber)
		}
		if err := r.Complete(ctx, m); !errors.Is(err, sluice.ErrLockLost) {
			t.Fatalf("Complete with the ended lock: %v, want ErrLockLost", err)
		}

		tx = begin(t, db)
		insertApp(t, kind, tx, table, "order-1")
		if err := r.CompleteTx(ctx, tx, again); err != nil {
			t.Fatalf("CompleteTx: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if n := appRows(t, db, table); n != 1 {
			t.Fatalf("%d application rows after the commit, want 1", n)
		}
		if err := r.Complete(ctx, again); !errors.Is(err, sluice.ErrLockLost) {
			t.Fatalf("Complete after a committed CompleteTx: %v, want ErrLockLost", err)
		}
		wantEmptyQueue(t, c, q)
	})
}

func wantEmptyQueue(t *testing.T, c *sluice.Client, q string) {
	t.Helper()
	st, err := c.GetQueueStats(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if st != (sluice.QueueStats{}) {
		t.Fatalf("queue %s holds %+v, want nothing", q, st)
	}
}

// AbandonTx, DeadLetterTx and DeferTx apply once the transaction
// commits, property changes included.
func TestSettleTxActions(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		db := rawDB(t, kind)
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "abandon", "dead", "defer")
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 3)
		if len(ms) != 3 {
			t.Fatalf("received %d messages, want 3", len(ms))
		}
		tx := begin(t, db)
		if err := r.AbandonTx(ctx, tx, ms[0], &sluice.AbandonOptions{PropertiesToModify: map[string]string{"tries": "1"}}); err != nil {
			t.Fatalf("AbandonTx: %v", err)
		}
		if err := r.DeadLetterTx(ctx, tx, ms[1], &sluice.DeadLetterOptions{Reason: "invalid", Description: "no customer"}); err != nil {
			t.Fatalf("DeadLetterTx: %v", err)
		}
		if err := r.DeferTx(ctx, tx, ms[2], nil); err != nil {
			t.Fatalf("DeferTx: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
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
		tx = begin(t, db)
		if err := dlq.CompleteTx(ctx, tx, dead[0]); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Fatalf("CompleteTx of a dead letter: %v, want ErrInvalidArgument", err)
		}
		if err := tx.Rollback(); err != nil { // on SQLite it holds the write lock
			t.Fatal(err)
		}
		def, err := r.ReceiveDeferred(ctx, ms[2].SequenceNumber)
		if err != nil || len(def) != 1 {
			t.Fatalf("ReceiveDeferred after DeferTx: %v, %v", def, err)
		}
	})
}

// Bad calls are refused with ErrInvalidArgument; a lost lock with
// ErrLockLost, leaving the transaction usable.
func TestSettleTxRefused(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		db := rawDB(t, kind)
		table := appTable(t, db)
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "a", "b")
		rd := newReceiver(t, c, q, sluice.ReceiveAndDelete)
		deleted := receive(t, rd, 1)[0]
		r := newReceiver(t, c, q, sluice.PeekLock)
		m := receive(t, r, 1)[0]
		if err := r.Complete(ctx, &sluice.ReceivedMessage{LockToken: m.LockToken}); err != nil {
			t.Fatal(err)
		}
		tx := begin(t, db)
		for what, err := range map[string]error{
			"in ReceiveAndDelete mode": rd.CompleteTx(ctx, tx, deleted),
			"a nil transaction":        r.CompleteTx(ctx, nil, m),
			"a nil message":            r.CompleteTx(ctx, tx, nil),
			"a peeked message":         r.CompleteTx(ctx, tx, &sluice.ReceivedMessage{SequenceNumber: m.SequenceNumber}),
		} {
			if !errors.Is(err, sluice.ErrInvalidArgument) {
				t.Errorf("CompleteTx %s: %v, want ErrInvalidArgument", what, err)
			}
		}
		insertApp(t, kind, tx, table, "kept")
		if err := r.CompleteTx(ctx, tx, m); !errors.Is(err, sluice.ErrLockLost) {
			t.Fatalf("CompleteTx of a completed message: %v, want ErrLockLost", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit after ErrLockLost: %v", err)
		}
		if n := appRows(t, db, table); n != 1 {
			t.Fatalf("%d application rows after ErrLockLost and commit, want 1", n)
		}
	})
}

// A session's message, the session's state and the application's row
// commit together, or none of them.
func TestSessionSettleTx(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		db := rawDB(t, kind)
		table := appTable(t, db)
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
		step := func(m *sluice.ReceivedMessage, id string, commit bool) {
			t.Helper()
			tx := begin(t, db)
			insertApp(t, kind, tx, table, id)
			if err := sr.CompleteTx(ctx, tx, m); err != nil {
				t.Fatalf("CompleteTx: %v", err)
			}
			if err := sr.SetSessionStateTx(ctx, tx, []byte(id)); err != nil {
				t.Fatalf("SetSessionStateTx: %v", err)
			}
			if !commit {
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		wantState := func(want string) {
			t.Helper()
			got, err := sr.SessionState(ctx)
			if err != nil || string(got) != want {
				t.Fatalf("session state %q, %v; want %q", got, err, want)
			}
		}
		step(ms[0], "rolled back", false)
		wantState("")
		step(ms[0], "0", true)
		wantState("0")
		step(ms[1], "1", true)
		wantState("1")
		if n := appRows(t, db, table); n != 2 {
			t.Fatalf("%d application rows, want 2", n)
		}
		wantEmptyQueue(t, c, q)

		if err := sr.Close(ctx); err != nil {
			t.Fatal(err)
		}
		tx := begin(t, db)
		if err := sr.SetSessionStateTx(ctx, tx, []byte("late")); !errors.Is(err, sluice.ErrSessionLockLost) {
			t.Fatalf("SetSessionStateTx after Close: %v, want ErrSessionLockLost", err)
		}
		if err := sr.CompleteTx(ctx, tx, ms[1]); !errors.Is(err, sluice.ErrSessionLockLost) {
			t.Fatalf("CompleteTx after Close: %v, want ErrSessionLockLost", err)
		}
		if err := tx.Rollback(); err != nil { // before the deferred Close, on SQLite
			t.Fatal(err)
		}
	})
}

// A Processor leaves a message its handler settled in a transaction to
// that transaction: no renewal while it is open (which would wait for its
// row lock), no completion of its own after a commit (which would fail
// with ErrLockLost), and after a rollback the message comes back when its
// lock ends. OnError hears nothing.
func TestProcessorSettleTx(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		db := rawDB(t, kind)
		table := appTable(t, db)
		const lock = time.Second
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: lock})
		send(t, newSender(t, c, q), "order-1")
		var (
			mu         sync.Mutex
			deliveries []int
			errs       []error
			done       = make(chan struct{})
		)
		h := func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			mu.Lock()
			deliveries = append(deliveries, m.DeliveryCount)
			mu.Unlock()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := insertAppErr(ctx, kind, tx, table, string(m.Body)); err != nil {
				return err
			}
			if err := r.CompleteTx(ctx, tx, m); err != nil {
				return err
			}
			if m.DeliveryCount == 1 {
				return nil // rolled back: the message comes back once its lock ends
			}
			// Hold the transaction past the processor's renewal time (half
			// the lock); a renewal would wait for the row and then find the
			// message gone.
			time.Sleep(lock * 7 / 10)
			if err := tx.Commit(); err != nil {
				return err
			}
			close(done)
			return nil
		}
		p := startProcessor(t, c, q, h, &sluice.ProcessorOptions{OnError: func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}})
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the second delivery did not commit within a minute")
		}
		stop(t, p)
		mu.Lock()
		defer mu.Unlock()
		if len(errs) > 0 {
			t.Errorf("OnError heard %v", errs)
		}
		if len(deliveries) != 2 || deliveries[0] != 1 || deliveries[1] != 2 {
			t.Errorf("delivery counts %v, want [1 2]", deliveries)
		}
		if n := appRows(t, db, table); n != 1 {
			t.Errorf("%d application rows, want 1", n)
		}
		wantEmptyQueue(t, c, q)
	})
}
