package watermill_test

import (
	"database/sql"
	"errors"
	"testing"

	wm "github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/libtest"
	sluicewm "github.com/sluicehq/sluice/watermill"
)

// appDB opens the database of a backend kind as an application would,
// with a database/sql pool of its own.
func appDB(t *testing.T, kind string) *sql.DB {
	t.Helper()
	return libtest.OpenDB(t, kind, libtest.Shared.DSN(kind))
}

// count counts the rows of table whose id is id.
func count(t *testing.T, db *sql.DB, table, id string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+table+" WHERE id = '"+id+"'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A transactional publisher's messages commit with its transaction, or
// not at all; a subscriber with a database commits the handler's writes
// with the message's completion on Ack, and rolls them back on Nack, so
// that a message handled twice writes once.
func TestTransactions(t *testing.T) {
	libtest.ForEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		db := appDB(t, kind)
		table := "wm_effects_" + libtest.RandHex(4)
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id VARCHAR(64) NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
			t.Fatal(err)
		}

		publishTx := func(commit bool, bodies ...string) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			pub, err := sluicewm.NewTxPublisher(c, tx, sluicewm.Config{})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bodies {
				if err := pub.Publish("orders", message.NewMessage(wm.NewUUID(), []byte(b))); err != nil {
					t.Fatalf("Publish in a transaction: %v", err)
				}
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		publishTx(false, "rolled back")
		publishTx(true, "a", "b")
		if st, err := c.GetQueueStats(ctx, "orders"); err != nil || st.Active != 2 {
			t.Fatalf("after a rolled back and a committed transaction the queue holds %+v, %v; want 2", st, err)
		}

		sub, err := sluicewm.NewSubscriber(c, sluicewm.Config{DB: db})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		msgs, err := sub.Subscribe(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		handle := func(m *message.Message) {
			tx, ok := sluicewm.TxFromContext(m.Context())
			if !ok {
				t.Fatal("a message of a subscriber with a DB has no transaction")
			}
			if _, err := tx.ExecContext(m.Context(), "INSERT INTO "+table+" (id) VALUES ('"+string(m.Payload)+"')"); err != nil {
				t.Fatalf("the handler's write: %v", err)
			}
		}
		m := next(t, msgs)
		handle(m)
		m.Nack() // rolled back: written once in all, below
		m = next(t, msgs)
		if string(m.Payload) != "a" {
			t.Fatalf("after a Nack the subscription gave %q, want a again", m.Payload)
		}
		handle(m)
		m.Ack()
		m = next(t, msgs)
		handle(m)
		m.Ack()
		sub.Close() // waits for the completions
		for _, id := range []string{"a", "b"} {
			if n := count(t, db, table, id); n != 1 {
				t.Errorf("the handler's write of %s is there %d times, want once", id, n)
			}
		}
		if st, err := c.GetQueueStats(ctx, "orders"); err != nil || st.Active+st.InFlight != 0 {
			t.Fatalf("after the Acks the queue holds %+v, %v", st, err)
		}
	})
}

// What needs the library's client, or a subscriber, is refused elsewhere.
func TestTransactionsRefused(t *testing.T) {
	libtest.ForEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		db := appDB(t, kind)
		if _, err := sluicewm.NewPublisher(c, sluicewm.Config{DB: db}); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("NewPublisher with a DB = %v, want ErrInvalidArgument", err)
		}
		if _, err := sluicewm.NewTxPublisher(c, nil, sluicewm.Config{}); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("NewTxPublisher without a transaction = %v, want ErrInvalidArgument", err)
		}
		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := sluicewm.NewTxPublisher(c, tx, sluicewm.Config{AutoCreate: true}); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("NewTxPublisher with AutoCreate = %v, want ErrInvalidArgument", err)
		}
		var api sluice.API = struct{ sluice.API }{c} // a client other than the library's
		if _, err := sluicewm.NewSubscriber(api, sluicewm.Config{DB: db}); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("NewSubscriber with a DB on another client = %v, want ErrInvalidArgument", err)
		}
	})
}
