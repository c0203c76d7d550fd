package watermill_test

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

// forEachClient runs f on each backend, in a fresh tenant, with the
// library's client and with a network client of a server on it: api is
// the one under test, c the library's, to look at what api did.
func forEachClient(t *testing.T, f func(t *testing.T, c *sluice.Client, api sluice.API)) {
	t.Run("library", func(t *testing.T) {
		libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) { f(t, c, c) })
	})
	t.Run("server", func(t *testing.T) {
		libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) { f(t, c, serve(t, c)) })
	})
}

// serve starts a server of c on a free loopback port, stopped when the
// test ends, and returns a network client of it.
func serve(t *testing.T, c *sluice.Client) *client.Client {
	t.Helper()
	srv, err := server.New(server.Config{Client: c, Addr: "127.0.0.1:0", Logger: storetest.Logger(t)})
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
	api, err := client.New("http://"+srv.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	return api
}
