package sluice_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Environment of the child process of TestCompleteTxAcrossKill.
const (
	settleChildDSN     = "SLUICE_SETTLETX_CHILD_DSN"
	settleChildKind    = "SLUICE_SETTLETX_CHILD_KIND"
	settleChildService = "SLUICE_SETTLETX_CHILD_SERVICE"
	settleChildQueue   = "SLUICE_SETTLETX_CHILD_QUEUE"
	settleChildTable   = "SLUICE_SETTLETX_CHILD_TABLE"
	settleChildOut     = "SLUICE_SETTLETX_CHILD_OUT"
	// settleChildCommit, "1", commits before reporting; otherwise the
	// child reports with the transaction open.
	settleChildCommit = "SLUICE_SETTLETX_CHILD_COMMIT"
)

// TestSettleTxCrashChild is the application process: it receives one
// message, and in one transaction inserts a row named by its body and
// completes it; it then commits or not, as told, writes "written" or
// "committed" to its out file and waits to be killed. It runs only as
// the child of TestCompleteTxAcrossKill.
func TestSettleTxCrashChild(t *testing.T) {
	dsn := os.Getenv(settleChildDSN)
	if dsn == "" {
		t.Skip("runs only as the child process of TestCompleteTxAcrossKill")
	}
	kind, queue, table := os.Getenv(settleChildKind), os.Getenv(settleChildQueue), os.Getenv(settleChildTable)
	ctx := context.Background()
	c, app := childApp(t, kind, dsn, os.Getenv(settleChildService))
	r, err := c.NewReceiver(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := app.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.insert(ctx, table, string(ms[0].Body)); err != nil {
		t.Fatal(err)
	}
	if err := r.CompleteTx(ctx, tx.Tx, ms[0]); err != nil {
		t.Fatal(err)
	}
	report := "written\n"
	if os.Getenv(settleChildCommit) == "1" {
		if err := tx.commit(ctx); err != nil {
			t.Fatal(err)
		}
		report = "committed\n"
	}
	if err := os.WriteFile(os.Getenv(settleChildOut), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	select {} // until the parent kills the process
}

// An application killed between its write and its commit leaves neither
// its row nor the completion: the message is delivered again once its
// lock ends. Killed after its commit, it leaves both: the row once, and
// the message gone. On PostgreSQL the application runs on pgx too: its
// client on its pgxpool.Pool, its transaction a pgx.Tx.
func TestCompleteTxAcrossKill(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		completeTxAcrossKill(t, kind, kind, service, c)
		if kind == "postgres" {
			t.Run("pgx", func(t *testing.T) { completeTxAcrossKill(t, kind, "pgx", service, c) })
		}
	})
}

// completeTxAcrossKill is TestCompleteTxAcrossKill on a database of a
// kind, with the application process of childKind (see childApp).
func completeTxAcrossKill(t *testing.T, kind, childKind, service string, c *sluice.Client) {
	ctx := t.Context()
	db := rawDB(t, kind)
	table := appTable(t, db)
	q := createQueue(t, c, &sluice.QueueProperties{LockDuration: 3 * time.Second})
	send(t, newSender(t, c, q), "order-1")
	run := func(commit bool) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "child")
		cmd := exec.Command(os.Args[0], "-test.run=^TestSettleTxCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), settleChildDSN+"="+shared.DSN(kind), settleChildKind+"="+childKind,
			settleChildService+"="+service, settleChildQueue+"="+q, settleChildTable+"="+table,
			settleChildOut+"="+out, settleChildCommit+"="+fmt.Sprint(map[bool]int{false: 0, true: 1}[commit]))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.After(30 * time.Second)
		for readFile(t, out) == "" {
			select {
			case err := <-exited:
				t.Fatalf("the application process exited before its report: %v", err)
			case <-deadline:
				cmd.Process.Kill()
				<-exited
				t.Fatal("the application process did not report within 30 s")
			case <-time.After(20 * time.Millisecond):
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
		if got, want := strings.TrimSpace(readFile(t, out)), map[bool]string{false: "written", true: "committed"}[commit]; got != want {
			t.Fatalf("the application process reported %q, want %q", got, want)
		}
	}

	run(false)
	if n := appRows(t, db, table); n != 0 {
		t.Fatalf("killed before its commit: %d application rows, want none", n)
	}
	r := newReceiver(t, c, q, sluice.PeekLock)
	again := receive(t, r, 1) // once the dead process's lock ends
	if string(again[0].Body) != "order-1" || again[0].DeliveryCount != 2 {
		t.Fatalf("after the kill: received %q delivered %d times, want order-1 delivered twice", again[0].Body, again[0].DeliveryCount)
	}
	if err := r.Abandon(ctx, again[0], nil); err != nil {
		t.Fatal(err)
	}

	run(true)
	if n := appRows(t, db, table); n != 1 {
		t.Fatalf("killed after its commit: %d application rows, want 1", n)
	}
	wantEmptyQueue(t, c, q)
}
