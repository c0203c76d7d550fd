package sluice_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/libtest"
	"github.com/sluicehq/sluice/store/storetest"
)

// One backend of each kind serves the whole package (libtest.Shared):
// every test works in a tenant of its own on it. The tests open every
// kind of database; the package itself links none (TestRootLinksNoDriver).
var shared = &libtest.Shared

func TestMain(m *testing.M) { libtest.Main(m) }

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
	libtest.ForEachBackend(t, f)
}

// forEachBackendKind is forEachBackend for tests that also need the
// backend's kind and the client's tenant (service name), to reopen it.
func forEachBackendKind(t *testing.T, f func(t *testing.T, kind, service string, c *sluice.Client)) {
	t.Helper()
	libtest.ForEachBackendKind(t, f)
}

func randHex(n int) string { return libtest.RandHex(n) }
