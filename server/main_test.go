package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// One backend of each kind serves the package's tests, each test in a
// tenant of its own.
var shared = testdb.Shared{Open: func(ctx context.Context, dsn string) (store.Backend, error) {
	return sluice.OpenBackend(ctx, dsn, sluice.Options{})
}}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "cleanup:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is a running server over a fresh tenant, and a library client of
// the same tenant to check what the server wrote.
type env struct {
	url string
	lib *sluice.Client
	srv *server.Server
}

// start starts a server on a free loopback port, over a fresh tenant of
// the kind's backend, and stops it when the test ends.
func start(t *testing.T, kind string, cfg server.Config) *env {
	t.Helper()
	c, err := sluice.NewClient(shared.Backend(t, kind), sluice.Options{Service: "t-" + randHex(6), Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, c, cfg)
}

// serve starts a server of the library client c, on a free loopback port
// unless cfg names one, and stops it when the test ends.
func serve(t *testing.T, c *sluice.Client, cfg server.Config) *env {
	t.Helper()
	cfg.Client = c
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = storetest.Logger(t)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return &env{url: "http://" + srv.Addr().String(), lib: c, srv: srv}
}

// forEachKind runs f in parallel on each backend.
func forEachKind(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, kind)
		})
	}
}

// remote returns a client of the env's server.
func (e *env) remote(t *testing.T, opts *client.Options) *client.Client {
	t.Helper()
	c, err := client.New(e.url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
