package sluice_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// One backend of each kind serves the whole package: every test works in
// a tenant of its own on it.
var shared = struct {
	sync.Mutex
	backends map[string]store.Backend
	dsns     map[string]string
	errs     map[string]error
	cleanups []func() error
}{backends: map[string]store.Backend{}, dsns: map[string]string{}, errs: map[string]error{}}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, b := range shared.backends {
		b.Close()
	}
	for _, c := range shared.cleanups {
		if err := c(); err != nil {
			fmt.Fprintln(os.Stderr, "cleanup:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var backendKinds = []string{"sqlite", "postgres", "mysql"}

// backend returns the package's backend of a kind, opening it on first
// use; it skips the test (fails it in CI) when the kind's server is not
// configured.
func backend(t *testing.T, kind string) store.Backend {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if b, ok := shared.backends[kind]; ok {
		return b
	}
	if err, ok := shared.errs[kind]; ok {
		testdb.Check(t, err)
	}
	b, err := openKind(kind)
	if err != nil {
		shared.errs[kind] = err
		testdb.Check(t, err)
	}
	shared.backends[kind] = b
	return b
}

func openKind(kind string) (store.Backend, error) {
	ctx := context.Background()
	var (
		dsn  string
		drop func() error
		err  error
	)
	switch kind {
	case "sqlite":
		dir, derr := os.MkdirTemp("", "sluice-test")
		if derr != nil {
			return nil, derr
		}
		dsn, drop = "sqlite://"+filepath.Join(dir, "sluice.db"), func() error { return os.RemoveAll(dir) }
	case "postgres":
		dsn, drop, err = testdb.Postgres(ctx)
	case "mysql":
		dsn, drop, err = testdb.MySQL(ctx)
	}
	if err != nil {
		return nil, err
	}
	shared.cleanups = append(shared.cleanups, drop)
	shared.dsns[kind] = dsn
	return sluice.OpenBackend(ctx, dsn, sluice.Options{})
}

// reopen opens another backend on the database of c's backend kind (as a
// restarted process or another node would) and returns a client of the
// same tenant on it, closed when the test ends.
func reopen(t *testing.T, kind, service string) *sluice.Client {
	t.Helper()
	shared.Lock()
	dsn := shared.dsns[kind]
	shared.Unlock()
	c, err := sluice.Open(t.Context(), dsn, sluice.Options{Service: service, Logger: storetest.Logger(t)})
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
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := backend(t, kind)
			service := "t-" + randHex(6)
			c, err := sluice.NewClient(b, sluice.Options{Service: service, Logger: storetest.Logger(t)})
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
