// Package servertest starts sluice servers for the tests of package
// server and of the dashboard's browser tests (a module of their own, so
// that the browser driver stays out of sluice's dependencies).
package servertest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/libtest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

// Env is a running server over a fresh tenant, and a library client of
// the same tenant to check what the server wrote.
type Env struct {
	URL string
	Lib *sluice.Client
	Srv *server.Server
}

// Start starts a server on a free loopback port, over a fresh tenant of
// the kind's backend, and stops it when the test ends.
func Start(t *testing.T, kind string, cfg server.Config) *Env {
	t.Helper()
	c, err := sluice.NewClient(libtest.Shared.Backend(t, kind), &sluice.Options{Service: "t-" + libtest.RandHex(6), Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, c, cfg)
}

// Serve starts a server of the library client c, on a free loopback port
// unless cfg names one, and stops it when the test ends.
func Serve(t testing.TB, c *sluice.Client, cfg server.Config) *Env {
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
	return &Env{URL: "http://" + srv.Addr().String(), Lib: c, Srv: srv}
}

// Remote returns a client of the env's server.
func (e *Env) Remote(t *testing.T, opts *client.Options) *client.Client {
	t.Helper()
	c, err := client.New(e.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WaitFor polls ok until it holds, failing the test after within.
func WaitFor(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
