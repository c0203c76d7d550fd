package sluice_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/postgres"
)

// Environment of the child process of TestStreamHandleTxAcrossKill.
const (
	txStreamChildDSN     = "SLUICE_TXSTREAM_CHILD_DSN"
	txStreamChildKind    = "SLUICE_TXSTREAM_CHILD_KIND"
	txStreamChildService = "SLUICE_TXSTREAM_CHILD_SERVICE"
	txStreamChildTable   = "SLUICE_TXSTREAM_CHILD_TABLE"
	txStreamChildOut     = "SLUICE_TXSTREAM_CHILD_OUT"
	// txStreamChildHang names the body of the event whose handler writes
	// its row, reports "written" and hangs with its transaction open.
	txStreamChildHang = "SLUICE_TXSTREAM_CHILD_HANG"
)

// txStreamNamespace is the namespace the child's consumer handles.
const txStreamNamespace = "txcrash"

// TestStreamTxCrashChild is the application process: a stream processor
// whose transactional handler inserts a row per event ("key position")
// and appends "call key position" to its out file before each insert,
// and "ready" once started, until SIGTERM stops it. It runs only as the
// child of TestStreamHandleTxAcrossKill.
func TestStreamTxCrashChild(t *testing.T) {
	dsn := os.Getenv(txStreamChildDSN)
	if dsn == "" {
		t.Skip("runs only as the child process of TestStreamHandleTxAcrossKill")
	}
	kind, table, hang := os.Getenv(txStreamChildKind), os.Getenv(txStreamChildTable), os.Getenv(txStreamChildHang)
	ctx := context.Background()
	c, app := childApp(t, kind, dsn, os.Getenv(txStreamChildService))
	defer c.Close()
	out, err := os.OpenFile(os.Getenv(txStreamChildOut), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var mu sync.Mutex
	note := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := out.WriteString(line + "\n"); err != nil {
			panic(err)
		}
	}
	// No progress is stored before the kill: every event is delivered
	// again after it, whether its transaction committed or not.
	p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{ProgressInterval: time.Hour})
	handle := func(ctx context.Context, ev *sluice.StreamEvent, insert func(id string) error) error {
		id := fmt.Sprintf("%s %d", ev.Key, ev.Position)
		note("call " + id)
		if err := insert(id); err != nil {
			return err
		}
		if string(ev.Body) == hang {
			note("written")
			select {} // until the parent kills the process
		}
		return nil
	}
	opts := &sluice.ConsumerOptions{Namespace: txStreamNamespace}
	if app.pool != nil {
		err = sluice.HandleTxWith(p, "fx", postgres.Transactions{Pool: app.pool}, func(ctx context.Context, tx pgx.Tx, ev *sluice.StreamEvent) error {
			return handle(ctx, ev, func(id string) error { return pgxInsert(ctx, tx, table, id) })
		}, opts)
	} else {
		err = p.HandleTx("fx", app.db, func(ctx context.Context, tx *sql.Tx, ev *sluice.StreamEvent) error {
			return handle(ctx, ev, func(id string) error { return insertAppErr(ctx, kind, tx, table, id) })
		}, opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	note("ready")
	<-stop
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Stop(sctx); err != nil {
		t.Fatal(err)
	}
}

// A transactional stream handler killed between its write and its
// commit, then restarted: every event's row is in exactly once; the
// events whose transactions committed before the kill are not handed to
// the handler again, and the one whose transaction was cut is. On
// PostgreSQL the application runs on pgx too: its client on its
// pgxpool.Pool, its handler's transactions pgx's (HandleTxWith).
func TestStreamHandleTxAcrossKill(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		handleTxAcrossKill(t, kind, kind, service, c)
		if kind == "postgres" {
			t.Run("pgx", func(t *testing.T) { handleTxAcrossKill(t, kind, "pgx", service, c) })
		}
	})
}

// handleTxAcrossKill is TestStreamHandleTxAcrossKill on a database of a
// kind, with the application process of childKind (see childApp).
func handleTxAcrossKill(t *testing.T, kind, childKind, service string, c *sluice.Client) {
	ctx := t.Context()
	db := rawDB(t, kind)
	table := "fx_" + randHex(4)
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
	dir := t.TempDir()
	start := func(out, hang string) (*exec.Cmd, chan error) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestStreamTxCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), txStreamChildDSN+"="+shared.DSN(kind), txStreamChildKind+"="+childKind,
			txStreamChildService+"="+service, txStreamChildTable+"="+table, txStreamChildOut+"="+out, txStreamChildHang+"="+hang)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill(); <-exited; exited <- nil })
		waitLine(t, out, "ready", exited)
		return cmd, exited
	}

	const n, hang = 20, 10
	first := filepath.Join(dir, "first")
	child, exited := start(first, strconv.Itoa(hang))
	id := sluice.StreamID{Namespace: txStreamNamespace, Key: "k"}
	// One publish: on SQLite the hung handler holds the write lock.
	events := make([]sluice.Event, n)
	for i := range events {
		events[i] = sluice.Event{Body: []byte(strconv.Itoa(i))}
	}
	positions, err := c.Publish(ctx, id, events...)
	if err != nil {
		t.Fatal(err)
	}
	waitLine(t, first, "written", exited)
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	exited <- nil
	rows := fxRows(t, db, table)
	if len(rows) != hang {
		t.Fatalf("after the kill: %d rows, want the %d of the events whose transactions committed", len(rows), hang)
	}

	second := filepath.Join(dir, "second")
	child, exited = start(second, "")
	deadline := time.Now().Add(60 * time.Second)
	for len(fxRows(t, db, table)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: %d of %d rows within 60 s", len(fxRows(t, db, table)), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("the restarted process did not stop cleanly: %v", err)
	}
	exited <- nil
	rows = fxRows(t, db, table)
	for i, pos := range positions {
		if got := rows[fmt.Sprintf("k %d", pos)]; got != 1 {
			t.Fatalf("event %d (position %d): %d rows, want exactly 1", i, pos, got)
		}
	}
	calls := strings.Count(readFile(t, second), "call ")
	for i, pos := range positions {
		called := strings.Contains(readFile(t, second), fmt.Sprintf("call k %d\n", pos))
		if i < hang && called {
			t.Fatalf("event %d, committed before the kill, was handed to the handler again", i)
		}
		if i >= hang && !called {
			t.Fatalf("event %d was not handed to the restarted handler", i)
		}
	}
	t.Logf("%d events; the restarted handler was called %d times", n, calls)
}

// waitLine waits until the file at path holds line, failing if the
// process exits first or 30 s pass.
func waitLine(t *testing.T, path, line string, exited chan error) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(readFile(t, path), line+"\n") {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the application process exited before %q: %v", line, err)
		case <-deadline:
			t.Fatalf("the application process wrote no %q within 30 s", line)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// fxRows counts the rows of the application's table by id.
func fxRows(t *testing.T, db *sql.DB, table string) map[string]int {
	t.Helper()
	rs, err := db.QueryContext(t.Context(), "SELECT id FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := make(map[string]int)
	for rs.Next() {
		var id string
		if err := rs.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out[id]++
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
