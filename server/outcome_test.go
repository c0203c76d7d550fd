package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

// A send whose database reply the server lost reaches the Go client as
// sluice.ErrOutcomeUnknown (UNAVAILABLE, reason OUTCOME_UNKNOWN), as in
// process. SQLite has no connection to lose a reply on.
func TestOutcomeUnknownAcrossTheNetwork(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		var (
			dsn  string
			drop func() error
			err  error
		)
		switch kind {
		case "sqlite":
			t.Skip("SQLite runs in the process: there is no connection between a COMMIT and its outcome to lose")
		case "postgres":
			dsn, drop, err = testdb.Postgres(t.Context())
		case "mysql":
			dsn, drop, err = testdb.MySQL(t.Context())
		}
		testdb.Check(t, err)
		t.Cleanup(func() { drop() })
		proxy, proxied := testdb.NewProxy(t, dsn)
		lib, err := sluice.Open(t.Context(), proxied, &sluice.Options{Service: "t-" + randHex(6), Logger: storetest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lib.Close() })
		srv, err := server.New(server.Config{Client: lib, Addr: "127.0.0.1:0", Logger: storetest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		})
		e := &env{URL: "http://" + srv.Addr().String(), Lib: lib, Srv: srv}
		c := e.Remote(t, nil)
		defer c.Close()
		if _, err := c.CreateQueue(t.Context(), "q", nil); err != nil {
			t.Fatal(err)
		}
		s, err := c.NewSender("q")
		if err != nil {
			t.Fatal(err)
		}
		id := "lost-" + randHex(8)
		proxy.LoseReply(id)
		_, err = s.Send(t.Context(), &sluice.Message{MessageID: id})
		if proxy.Lost() != 1 || !errors.Is(err, sluice.ErrOutcomeUnknown) {
			t.Fatalf("Send with its reply lost (%d lost): got %v, want an error wrapping %q", proxy.Lost(), err, sluice.ErrOutcomeUnknown)
		}
		if strings.Contains(err.Error(), "tcp") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("the client learns how the server reaches its database: %v", err)
		}
		if _, err := s.Send(t.Context(), &sluice.Message{MessageID: "after"}); err != nil {
			t.Fatalf("Send after the lost reply: %v", err)
		}
	})
}
