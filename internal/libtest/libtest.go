// Package libtest holds what the tests of the packages built on the
// library share: one backend of each kind for a test binary, each test in
// a tenant of its own on it.
package libtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // OpenDB opens PostgreSQL through it

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"

	// Shared opens databases of every kind.
	_ "github.com/sluicehq/sluice/store/mysql"
	_ "github.com/sluicehq/sluice/store/postgres"
	_ "github.com/sluicehq/sluice/store/sqlite"
)

// Shared holds one backend of each kind for a test binary; Main closes
// it.
var Shared = testdb.Shared{Open: func(ctx context.Context, dsn string) (store.Backend, error) {
	return sluice.OpenBackend(ctx, dsn, nil)
}}

// OpenDB opens the database of a DSN of a backend kind as an application
// would, with a database/sql pool of its own (for its transactions: SendTx
// and the like), closed when the test ends.
func OpenDB(t testing.TB, kind, dsn string) *sql.DB {
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
	default:
		t.Fatalf("unknown backend kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Main runs a package's tests, closes Shared and exits: a package's
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if err := Shared.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "cleanup:", err)
		code = 1
	}
	os.Exit(code)
}

// ForEachBackend runs f, in parallel, on a client of a fresh tenant on
// each backend.
func ForEachBackend(t *testing.T, f func(t *testing.T, c *sluice.Client)) {
	t.Helper()
	ForEachBackendKind(t, func(t *testing.T, _, _ string, c *sluice.Client) { f(t, c) })
}

// ForEachBackendKind is ForEachBackend for tests that also need the
// backend's kind and the client's tenant (service name), to reopen it.
func ForEachBackendKind(t *testing.T, f func(t *testing.T, kind, service string, c *sluice.Client)) {
	t.Helper()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			service := "t-" + RandHex(6)
			c, err := sluice.NewClient(Shared.Backend(t, kind), &sluice.Options{Service: service, Logger: storetest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			// Closing stops the processors the test left running (the
			// backend stays open for the others).
			t.Cleanup(func() { c.Close() })
			f(t, kind, service, c)
		})
	}
}

// AwaitHandlerTimeout is a handler's wait for a timeout middleware to
// end ctx: it returns ctx's error once ctx ends with cause
// sluice.ErrHandlerTimeout, and an error naming the cause when it ends
// with another, or when a minute passes first.
func AwaitHandlerTimeout(ctx context.Context) error {
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), sluice.ErrHandlerTimeout) {
			return fmt.Errorf("context ended with cause %v, want ErrHandlerTimeout", context.Cause(ctx))
		}
		return ctx.Err()
	case <-time.After(time.Minute):
		return errors.New("the timeout never ended the context")
	}
}

// RandHex returns n random bytes in hex, for unique names.
func RandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
