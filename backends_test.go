package sluice_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"

	// The tests open every kind of database; the package itself links
	// none (TestRootLinksNoDriver).
	_ "github.com/sluicehq/sluice/store/mysql"
	_ "github.com/sluicehq/sluice/store/postgres"
	_ "github.com/sluicehq/sluice/store/sqlite"
)

// One backend of each kind serves the whole package: every test works in
// a tenant of its own on it.
var shared = testdb.Shared{Open: func(ctx context.Context, dsn string) (store.Backend, error) {
	return sluice.OpenBackend(ctx, dsn, nil)
}}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "cleanup:", err)
		code = 1
	}
	os.Exit(code)
}

// reopen opens another backend on the database of c's backend kind (as a
// restarted process or another node would) and returns a client of the
// same tenant on it, closed when the test ends.
func reopen(t *testing.T, kind, service string) *sluice.Client {
	t.Helper()
	dsn := shared.DSN(kind)
	c, err := sluice.Open(t.Context(), dsn, &sluice.Options{Service: service, Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatalf("open %s again: %v", kind, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// forEachBackend runs f, in parallel, on a client of a fresh tenant on
// each backend.
func forEachBackend(t *testing.T, f func(t *testing.T, c *sluice.Client)) {
	t.Helper()
	forEachBackendKind(t, func(t *testing.T, _, _ string, c *sluice.Client) { f(t, c) })
}

// forEachBackendKind is forEachBackend for tests that also need the
// backend's kind and the client's tenant (service name), to reopen it.
func forEachBackendKind(t *testing.T, f func(t *testing.T, kind, service string, c *sluice.Client)) {
	t.Helper()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := shared.Backend(t, kind)
			service := "t-" + randHex(6)
			c, err := sluice.NewClient(b, &sluice.Options{Service: service, Logger: storetest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			f(t, kind, service, c)
		})
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
