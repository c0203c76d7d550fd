package postgres_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/postgres"
)

// An application on pgx completes a message in the pgx.Tx that writes
// its effect: both commit, or neither does.
func ExampleWrapTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	b, err := postgres.OpenPool(ctx, pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := sluice.NewClient(b, &sluice.Options{Service: "shop"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	r, _ := c.NewReceiver("orders", nil)
	msgs, err := r.Receive(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO shipments (order_id) VALUES ($1)", string(msgs[0].Body)); err != nil {
			return err
		}
		return r.CompleteTx(ctx, postgres.WrapTx(tx), msgs[0])
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A stream handler on pgx: each event's row and the record that the
// subscription handled it commit in one pgx.Tx, so the row is written
// once whatever crashes.
func ExampleTransactions() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	b, err := postgres.OpenPool(ctx, pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := sluice.NewClient(b, &sluice.Options{Service: "shop"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p := c.NewStreamProcessor(nil)
	err = sluice.HandleTxWith(p, "ledger", postgres.Transactions{Pool: pool},
		func(ctx context.Context, tx pgx.Tx, ev *sluice.StreamEvent) error {
			_, err := tx.Exec(ctx, "INSERT INTO ledger (stream_key, position) VALUES ($1, $2)", ev.Key, ev.Position)
			return err
		}, &sluice.ConsumerOptions{Namespace: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
}
