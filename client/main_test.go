package client_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store"
)

// One backend of each kind serves the tests that need a database: each
// works in a tenant of its own on it.
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
