package sluice_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/libtest"
)

// rawDB opens the database of a backend kind with a plain database/sql
// pool of the application's own, as an application would.
func rawDB(t *testing.T, kind string) *sql.DB {
	t.Helper()
	return rawDBFor(t, kind, shared.DSN(kind))
}

// rawDBFor is rawDB for the database of a DSN.
func rawDBFor(t *testing.T, kind, dsn string) *sql.DB {
	t.Helper()
	return libtest.OpenDB(t, kind, dsn)
}

// SendTx commits with the application's transaction, or not at all.
func TestSendTx(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		db := rawDB(t, kind)
		q := createQueue(t, c, nil)
		if _, err := c.CreateTopic(ctx, "events", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateSubscription(ctx, "events", "audit", nil); err != nil {
			t.Fatal(err)
		}
		s, ts := newSender(t, c, q), newSender(t, c, "events")

		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SendTx(ctx, tx, &sluice.Message{Body: []byte("rolled back")}); err != nil {
			t.Fatalf("SendTx: %v", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}

		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		seqs, err := s.SendTx(ctx, tx, &sluice.Message{Body: []byte("a")}, &sluice.Message{Body: []byte("b")})
		if err != nil {
			t.Fatalf("SendTx: %v", err)
		}
		if _, err := ts.SendTx(ctx, tx, &sluice.Message{Body: []byte("e")}); err != nil {
			t.Fatalf("SendTx to a topic: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if len(seqs) != 2 || seqs[1] != seqs[0]+1 {
			t.Fatalf("SendTx numbers %v", seqs)
		}
		if got := bodies(receive(t, newReceiver(t, c, q, sluice.ReceiveAndDelete), 10)); strings.Join(got, ",") != "a,b" {
			t.Fatalf("after commit received %v, want [a b] (and not the rolled-back one)", got)
		}
		if got := drain(t, c, sluice.SubscriptionPath("events", "audit")); strings.Join(got, ",") != "e" {
			t.Fatalf("subscription received %v", got)
		}
		// A numbering gap would show here: the rolled-back send took none.
		if seqs[0] != 1 {
			t.Fatalf("first committed number %d, want 1", seqs[0])
		}
	})
}
