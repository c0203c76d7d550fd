// Package drivertest checks that sluice's SQLite backend keeps its
// guarantees on an alternative database/sql driver: the store
// conformance suite, the pool and scheme registration, and the
// classification of the driver's errors.
package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/sqlite"
	"github.com/sluicehq/sluice/store/storetest"
)

// Run runs every check on drv, whose package registered scheme.
func Run(t *testing.T, drv *sqlite.Driver, scheme string) {
	t.Run("Conformance", func(t *testing.T) { Conformance(t, drv) })
	t.Run("Scheme", func(t *testing.T) { Scheme(t, drv, scheme) })
	t.Run("OpenDB", func(t *testing.T) { OpenDB(t, drv) })
	t.Run("BusyIsRetried", func(t *testing.T) { BusyIsRetried(t, drv) })
}

// open opens a backend on drv at path, closed with t.
func open(t *testing.T, drv *sqlite.Driver, path string, log *slog.Logger) store.Backend {
	t.Helper()
	b, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Logger: log, Driver: drv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Conformance runs the store conformance suite on one file, as
// store/sqlite's own test does on modernc.org/sqlite.
func Conformance(t *testing.T, drv *sqlite.Driver) {
	var (
		once sync.Once
		path string
	)
	storetest.Run(t, func(tt *testing.T) store.Backend {
		once.Do(func() { path = filepath.Join(t.TempDir(), "conformance.db") })
		b := open(tt, drv, path, storetest.Logger(tt))
		if got := b.Features().Driver; got != drv.Module {
			tt.Fatalf("the backend runs on %q, want %q", got, drv.Module)
		}
		return b
	})
}

// Scheme opens the library through the registered DSN scheme, with its
// synchronous parameter, and sends and receives a message.
func Scheme(t *testing.T, drv *sqlite.Driver, scheme string) {
	ctx := t.Context()
	dsn := scheme + "://" + filepath.Join(t.TempDir(), "scheme.db") + "?synchronous=NORMAL"
	c, err := sluice.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c)
	if _, err := sluice.Open(ctx, scheme+"://x.db?cache=shared", nil); !errors.Is(err, sluicetype.ErrInvalidArgument) {
		t.Errorf("%s with an unknown parameter: %v, want ErrInvalidArgument", scheme, err)
	}
}

// OpenDB runs the library on an application's pool on drv, found by its
// driver, and refuses the pool when told it runs on modernc.org/sqlite.
func OpenDB(t *testing.T, drv *sqlite.Driver) {
	ctx := t.Context()
	db, err := sql.Open(drv.Name, drv.DSN(filepath.Join(t.TempDir(), "app.db"), sqlite.ConnOptions{Synchronous: "FULL"}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := sluice.OpenDB(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("the application's pool after the client closed: %v", err)
	}
	if _, err := sqlite.OpenDB(ctx, db, nil); !errors.Is(err, sluicetype.ErrInvalidArgument) {
		t.Errorf("OpenDB of a %s pool as modernc.org/sqlite's: %v, want ErrInvalidArgument", drv.Module, err)
	}
}

// roundTrip sends a message to a new queue and receives it.
func roundTrip(t *testing.T, c *sluice.Client) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSender("q")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, &sluice.Message{Body: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	r, err := c.NewReceiver("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.Receive(ctx, 1)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "hello" {
		t.Fatalf("receive: %v, %v", msgs, err)
	}
}

// BusyIsRetried holds the file's write lock, from another connection,
// past the backend's busy timeout: the driver's "database is locked"
// error must be classified as retryable, so the write is retried (the
// engine logs it) and succeeds once the lock is released, rather than
// failing. It takes the busy timeout, 10 s.
func BusyIsRetried(t *testing.T, drv *sqlite.Driver) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "busy.db")
	retried := make(chan struct{})
	var once sync.Once
	log := slog.New(&retryWatch{Handler: storetest.Logger(t).Handler(), seen: func() { once.Do(func() { close(retried) }) }})
	st, err := open(t, drv, path, log).Store(store.Tenant{Service: "s", Provider: "busy"})
	if err != nil {
		t.Fatal(err)
	}

	holder, err := sql.Open(drv.Name, drv.DSN(path, sqlite.ConnOptions{Synchronous: "FULL"}))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	lock, err := holder.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- st.CreateQueue(ctx, &store.QueueSettings{Name: "q"}) }()

	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	select {
	case <-retried:
	case err := <-done:
		lock.Rollback()
		t.Fatalf("CreateQueue under another connection's write lock returned %v before a retry: the busy error was not classified as retryable", err)
	case <-deadline.C:
		lock.Rollback()
		t.Fatal("no retry within 2 minutes of holding the write lock")
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("CreateQueue after the lock was released: %v", err)
		}
	case <-deadline.C:
		t.Fatal("CreateQueue did not return within 2 minutes")
	}
}

// retryWatch passes records on, calling seen for the engine's
// "retrying transaction" record.
type retryWatch struct {
	slog.Handler
	seen func()
}

func (h *retryWatch) WithAttrs(as []slog.Attr) slog.Handler {
	return &retryWatch{Handler: h.Handler.WithAttrs(as), seen: h.seen}
}

func (h *retryWatch) WithGroup(name string) slog.Handler {
	return &retryWatch{Handler: h.Handler.WithGroup(name), seen: h.seen}
}

func (h *retryWatch) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "retrying transaction") {
		h.seen()
	}
	return h.Handler.Handle(ctx, r)
}
