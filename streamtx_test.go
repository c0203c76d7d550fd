package sluice_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A failed delivery of a transactional handler rolls its writes back:
// the retry writes them once. Bad registrations are refused.
func TestStreamHandleTx(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		db := rawDB(t, kind)
		table := appTable(t, db)
		p := c.NewStreamProcessor(nil)
		noop := func(context.Context, *sql.Tx, *sluice.StreamEvent) error { return nil }
		if err := p.HandleTx("x", nil, noop, nil); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Fatalf("HandleTx with a nil database: %v, want ErrInvalidArgument", err)
		}
		if err := p.HandleTx("x", db, nil, nil); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Fatalf("HandleTx with a nil handler: %v, want ErrInvalidArgument", err)
		}

		var failed atomic.Bool
		done := make(chan int64, 10)
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			err := p.HandleTx("fx", db, func(ctx context.Context, tx *sql.Tx, ev *sluice.StreamEvent) error {
				if err := insertAppErr(ctx, kind, tx, table, fmt.Sprint(ev.Position)); err != nil {
					return err
				}
				if !failed.Swap(true) {
					return errors.New("fails once, after its write")
				}
				done <- ev.Position
				return nil
			}, &sluice.ConsumerOptions{Namespace: "tx", RetryBackoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
		})
		pos := publish(t, c, sluice.StreamID{Namespace: "tx", Key: "k"}, "a", "b")
		for _, want := range pos {
			select {
			case got := <-done:
				if got != want {
					t.Fatalf("handled position %d, want %d", got, want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("position %d not handled within 30 s", want)
			}
		}
		if n := appRows(t, db, table); n != 2 {
			t.Fatalf("%d rows after a failed delivery and its retry, want 2", n)
		}
	})
}

// A subscription repositioned back hands its events to a transactional
// handler again: the reposition forgets their records.
func TestStreamHandleTxRewind(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		db := rawDB(t, kind)
		table := "fx_" + randHex(4)
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id VARCHAR(64) NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
		if err := c.SetStreamRetention(ctx, "rw", sluice.StreamRetention{MaxAge: time.Hour}); err != nil {
			t.Fatal(err)
		}
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			err := p.HandleTx("fx", db, func(ctx context.Context, tx *sql.Tx, ev *sluice.StreamEvent) error {
				return insertAppErr(ctx, kind, tx, table, fmt.Sprint(ev.Position))
			}, &sluice.ConsumerOptions{Namespace: "rw"})
			if err != nil {
				t.Fatal(err)
			}
		})
		publish(t, c, sluice.StreamID{Namespace: "rw", Key: "k"}, "a", "b")
		waitRows := func(n int) {
			t.Helper()
			for deadline := time.Now().Add(30 * time.Second); len(fxRows(t, db, table)) < n; {
				if time.Now().After(deadline) {
					t.Fatalf("%d rows within 30 s, want %d", len(fxRows(t, db, table)), n)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		waitRows(2)
		if _, err := c.RepositionStreamSubscription(ctx, "ns/rw/fx", sluice.FromBeginning(), nil); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			rows, total := fxRows(t, db, table), 0
			for _, n := range rows {
				total += n
			}
			if total == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after a rewind: rows %v, want each of the 2 events twice", rows)
			}
		}
	})
}
