package sluice_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

// OpenDB runs a client on the application's own pool, migrating it, and
// leaves the pool open when the client closes.
func TestOpenDB(t *testing.T) {
	forEachFreshDB(t, func(t *testing.T, kind, dsn string) {
		ctx := t.Context()
		db := appDB(t, kind, dsn, true)
		c, err := sluice.OpenDB(ctx, db, &sluice.Options{Logger: storetest.Logger(t)})
		if err != nil {
			t.Fatalf("OpenDB: %v", err)
		}
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "on the application's pool")
		if got := receive(t, newReceiver(t, c, q, sluice.ReceiveAndDelete), 1); string(got[0].Body) != "on the application's pool" {
			t.Fatalf("received %q", got[0].Body)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := db.PingContext(ctx); err != nil {
			t.Fatalf("the application's pool after the client closed: %v", err)
		}
		m, err := sluice.NewMigratorDB(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := m.Status(ctx)
		if err != nil || len(st.Pending) != 0 || st.Database != st.Required {
			t.Fatalf("Status after OpenDB migrated: %+v, %v", st, err)
		}
		if err := m.Close(); err != nil || db.PingContext(ctx) != nil {
			t.Fatalf("the pool after the migrator closed: %v, %v", err, db.PingContext(ctx))
		}
	})
}

// OpenDB refuses, with ErrInvalidArgument and a message that says what
// to set, a pool whose connections lack what sluice needs.
func TestOpenDBChecksThePool(t *testing.T) {
	for _, tc := range []struct{ kind, want string }{
		{"sqlite", "journal_mode=WAL"},
		{"mysql", "time_zone"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			db := appDB(t, tc.kind, freshDSN(t, tc.kind), false)
			_, err := sluice.OpenDB(t.Context(), db, nil)
			if !errors.Is(err, sluice.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("OpenDB of a pool without what sluice needs: %v", err)
			}
			_, err = sluice.NewMigratorDB(t.Context(), db, nil)
			if !errors.Is(err, sluice.ErrInvalidArgument) {
				t.Fatalf("NewMigratorDB of a pool without what sluice needs: %v", err)
			}
		})
	}
}

// fakeConnector is a database/sql connector of a driver no backend runs on.
type fakeConnector struct{}

func (fakeConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("fake driver: no database")
}
func (fakeConnector) Driver() driver.Driver { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fake driver: no database")
}

// A nil pool, or one on a driver no linked backend runs on, is
// ErrInvalidArgument.
func TestOpenDBRefusesUnknownDrivers(t *testing.T) {
	t.Parallel()
	db := sql.OpenDB(fakeConnector{})
	defer db.Close()
	for name, db := range map[string]*sql.DB{"nil": nil, "fake driver": db} {
		if _, err := sluice.OpenDB(t.Context(), db, nil); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("OpenDB of a %s pool: %v", name, err)
		}
		if _, err := sluice.NewMigratorDB(t.Context(), db, nil); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("NewMigratorDB of a %s pool: %v", name, err)
		}
	}
}

// Options.MaxConns takes 0 (the default) to store.MaxPoolConns; beyond
// either end it is ErrInvalidArgument, before anything is opened.
func TestMaxConnsBounds(t *testing.T) {
	forEachFreshDB(t, func(t *testing.T, kind, dsn string) {
		for _, n := range []int{-1, 1001} {
			if _, err := sluice.Open(t.Context(), dsn, &sluice.Options{MaxConns: n}); !errors.Is(err, sluice.ErrInvalidArgument) {
				t.Errorf("MaxConns %d: %v", n, err)
			}
		}
		for _, n := range []int{0, 2, 1000} {
			c, err := sluice.Open(t.Context(), dsn, &sluice.Options{MaxConns: n, Logger: storetest.Logger(t)})
			if err != nil {
				t.Fatalf("MaxConns %d: %v", n, err)
			}
			q := createQueue(t, c, nil)
			send(t, newSender(t, c, q), "one")
			c.Close()
		}
	})
}

// Options.CommitPipelines takes 0 (the default) up to one less than the
// pool's connections; negative, or as many as the pool holds, is
// ErrInvalidArgument. SQLite, with one writer, takes and ignores it.
func TestCommitPipelinesBounds(t *testing.T) {
	forEachFreshDB(t, func(t *testing.T, kind, dsn string) {
		for _, o := range []sluice.Options{{CommitPipelines: -1}, {MaxConns: 4, CommitPipelines: 4}, {CommitPipelines: 1000}} {
			if _, err := sluice.Open(t.Context(), dsn, &o); !errors.Is(err, sluice.ErrInvalidArgument) {
				t.Errorf("MaxConns %d, CommitPipelines %d: %v", o.MaxConns, o.CommitPipelines, err)
			}
		}
		for _, o := range []sluice.Options{{MaxConns: 4, CommitPipelines: 3}, {CommitPipelines: 8}, {MaxConns: 2}} {
			o.Logger = storetest.Logger(t)
			c, err := sluice.Open(t.Context(), dsn, &o)
			if err != nil {
				t.Fatalf("MaxConns %d, CommitPipelines %d: %v", o.MaxConns, o.CommitPipelines, err)
			}
			q := createQueue(t, c, nil)
			send(t, newSender(t, c, q), "one")
			if got := receive(t, newReceiver(t, c, q, sluice.ReceiveAndDelete), 1); len(got) != 1 {
				t.Fatalf("MaxConns %d, CommitPipelines %d: received %d messages, want 1", o.MaxConns, o.CommitPipelines, len(got))
			}
			c.Close()
		}
	})
}

// SQLite's durability is its DSN's synchronous parameter: FULL or NORMAL
// open, anything else (another value, another parameter) is
// ErrInvalidArgument.
func TestSQLiteDSNParameters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for dsn, ok := range map[string]bool{
		"sqlite://" + dir + "/a.db?synchronous=NORMAL": true,
		"sqlite://" + dir + "/a.db?synchronous=full":   true,
		"sqlite://" + dir + "/a.db?synchronous=OFF":    false,
		"sqlite://" + dir + "/a.db?cache=shared":       false,
	} {
		c, err := sluice.Open(t.Context(), dsn, nil)
		if ok != (err == nil) || (err != nil && !errors.Is(err, sluice.ErrInvalidArgument)) {
			t.Errorf("Open(%q): %v", dsn, err)
		}
		if c != nil {
			c.Close()
		}
	}
}
