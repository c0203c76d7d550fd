package watermill

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluicehq/sluice"
)

// Transactions, as Watermill's SQL Pub/Sub has them. A publisher on a
// transaction sends in it (the transactional outbox); a subscriber with a
// database hands each message out with a transaction of its own, in which
// the handler writes, and completes the message in it on Ack: the
// handler's writes and the message's completion commit together, or not
// at all. Both need the library's client: the network API has no
// transactions.

// NewTxPublisher returns a Publisher whose Publish sends in the caller's
// transaction tx, opened on the database client's tables are in
// (sluice.Sender.SendTx): the messages commit with the caller's own writes,
// or not at all. Publish in a transaction, then commit it or roll it
// back; the publisher is for that transaction only. AutoCreate is refused:
// entities are created outside any transaction, before it. On SQLite
// make no other sluice call that writes while tx is open.
func NewTxPublisher(client *sluice.Client, tx sluice.Tx, cfg Config) (*Publisher, error) {
	if client == nil || tx == nil {
		return nil, fmt.Errorf("sluice/watermill: new transactional publisher: no client or no transaction: %w", sluice.ErrInvalidArgument)
	}
	if cfg.AutoCreate {
		return nil, fmt.Errorf("sluice/watermill: new transactional publisher: AutoCreate does not apply in a transaction: "+
			"create the entities before: %w", sluice.ErrInvalidArgument)
	}
	p, err := NewPublisher(client, cfg)
	if err != nil {
		return nil, err
	}
	p.lib, p.tx = client, tx
	return p, nil
}

// sendTx sends a batch in the publisher's transaction.
func (p *Publisher) sendTx(ctx context.Context, topic string, batch []*sluice.Message) error {
	s, err := p.lib.NewSender(topic)
	if err != nil {
		return err
	}
	_, err = s.SendTx(ctx, p.tx, batch...)
	return err
}

type txKey struct{}

// TxFromContext returns the transaction a Subscriber with a Config.DB
// handed a message out with, from the message's context: what the
// handler writes in it commits when the message is acked, with the
// message's completion, and is rolled back when it is nacked (as
// Watermill's SQL Pub/Sub's TxFromContext).
func TxFromContext(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*sql.Tx)
	return tx, ok
}

// txCompleter is a receiver that completes in a transaction.
type txCompleter interface {
	CompleteTx(ctx context.Context, tx sluice.Tx, m *sluice.ReceivedMessage) error
}
