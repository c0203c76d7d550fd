package sluiceotel_test

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
)

// One backend of each kind serves the package: each test works in a
// tenant of its own on it.
var shared = testdb.Shared{Open: func(ctx context.Context, dsn string) (store.Backend, error) {
	return sluice.OpenBackend(ctx, dsn, sluice.Options{})
}}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "cleanup:", err)
		code = 1
	}
	os.Exit(code)
}

// forEachBackend runs f, in parallel, on a client of a fresh tenant on
// each backend.
func forEachBackend(t *testing.T, f func(t *testing.T, c *sluice.Client)) {
	t.Helper()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c, err := sluice.NewClient(shared.Backend(t, kind), sluice.Options{Service: "t-" + randHex(6), Logger: storetest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			f(t, c)
		})
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
