package sluice_test

import (
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice"
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
	var (
		db  *sql.DB
		err error
	)
	switch kind {
	case "sqlite":
		db, err = sql.Open("sqlite", "file:"+strings.TrimPrefix(dsn, "sqlite://")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	case "postgres":
		db, err = sql.Open("pgx", dsn)
	case "mysql":
		u, perr := url.Parse(dsn)
		if perr != nil {
			t.Fatal(perr)
		}
		cfg := mysql.NewConfig()
		cfg.User, cfg.Net, cfg.Addr, cfg.DBName = u.User.Username(), "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
		db, err = sql.Open("mysql", cfg.FormatDSN())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
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
