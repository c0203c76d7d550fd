package sluice_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice"
)

// Complete a message in the transaction that writes its effect: the
// application's row and the completion commit together, or neither does.
func ExampleReceiver_CompleteTx() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	path := filepath.Join(dir, "shop.db")

	c, err := sluice.Open(ctx, "sqlite://"+path, &sluice.Options{Service: "shop"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// The application's own pool on the same file; BEGIN IMMEDIATE, so
	// that its transactions take SQLite's write lock when they start.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE shipments (order_id TEXT PRIMARY KEY)"); err != nil {
		panic(err)
	}

	if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
		panic(err)
	}
	sender, _ := c.NewSender("orders")
	if _, err := sender.Send(ctx, &sluice.Message{Body: []byte("order-42")}); err != nil {
		panic(err)
	}
	receiver, _ := c.NewReceiver("orders", nil)
	msgs, err := receiver.Receive(ctx, 1)
	if err != nil {
		panic(err)
	}
	m := msgs[0]

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO shipments (order_id) VALUES (?)", string(m.Body)); err != nil {
		panic(err)
	}
	if err := receiver.CompleteTx(ctx, tx, m); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}

	var shipped int
	_ = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM shipments").Scan(&shipped)
	stats, _ := c.GetQueueStats(ctx, "orders")
	fmt.Println("shipments:", shipped, "messages left:", stats.Active+stats.InFlight)
	// Output:
	// shipments: 1 messages left: 0
}

// Handle stream events in the transaction that writes their effects: an
// event whose transaction committed is never handed to the handler
// again, whatever crashes, so each event's row is written once.
func ExampleStreamProcessor_HandleTx() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	path := filepath.Join(dir, "shop.db")

	c, err := sluice.Open(ctx, "sqlite://"+path, &sluice.Options{Service: "shop"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE ledger (position INTEGER PRIMARY KEY, entry TEXT)"); err != nil {
		panic(err)
	}

	p := c.NewStreamProcessor(nil)
	err = p.HandleTx("ledger", db, func(ctx context.Context, tx *sql.Tx, ev *sluice.StreamEvent) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO ledger (position, entry) VALUES (?, ?)", ev.Position, string(ev.Body))
		return err
	}, &sluice.ConsumerOptions{Namespace: "payments"})
	if err != nil {
		panic(err)
	}
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	defer p.Stop(ctx)

	account := sluice.StreamID{Namespace: "payments", Key: "acct-7"}
	if _, err := c.Publish(ctx, account, sluice.Event{Body: []byte("+100")}, sluice.Event{Body: []byte("-30")}); err != nil {
		panic(err)
	}
	var entries int
	for deadline := time.Now().Add(10 * time.Second); entries < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		_ = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ledger").Scan(&entries)
	}
	fmt.Println("ledger entries:", entries)
	// Output:
	// ledger entries: 2
}
