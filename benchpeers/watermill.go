package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
)

// watermillPoll is how often an idle Watermill subscriber queries again
// (its PollInterval, default 1 s): it bounds the publish-to-handler
// latency.
const watermillPoll = 10 * time.Millisecond

// watermillTopic is the one topic (one table) of every key: Watermill's
// SQL Pub/Sub has a table per topic, so keys ride in metadata.
const watermillTopic = "peers"

// watermillStream is Watermill's SQL Pub/Sub (watermill-sql v4, pgx) in
// a fresh schema: a publisher, and subscribers of one consumer group.
// Payloads are BYTEA (the default column type is JSON).
type watermillStream struct {
	pool   *pgxpool.Pool
	pub    *wsql.Publisher
	schema wsql.DefaultPostgreSQLSchema
	drop   func(context.Context) error
}

func openWatermill(ctx context.Context, e *env) (streamPeer, error) {
	_, dsn, drop, err := pgSchema(ctx, e.pg)
	if err != nil {
		return nil, err
	}
	w := &watermillStream{drop: drop, schema: wsql.DefaultPostgreSQLSchema{
		GeneratePayloadType: func(string) string { return "BYTEA" },
	}}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err == nil {
		cfg.MaxConns = 16
		w.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	}
	if err == nil {
		w.pub, err = wsql.NewPublisher(wsql.BeginnerFromPgx(w.pool), wsql.PublisherConfig{
			SchemaAdapter: w.schema, AutoInitializeSchema: true,
		}, watermill.NopLogger{})
	}
	if err != nil {
		return nil, errors.Join(err, w.close(ctx))
	}
	return w, nil
}

func (w *watermillStream) publish(_ context.Context, key string, bodies [][]byte) error {
	msgs := make([]*message.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = message.NewMessage(watermill.NewUUID(), b)
		msgs[i].Metadata.Set("key", key)
	}
	return w.pub.Publish(watermillTopic, msgs...)
}

// consume runs consumers subscribers of one consumer group, each
// acknowledging every message after handling it.
func (w *watermillStream) consume(ctx context.Context, consumers int, handle func([]byte)) error {
	var wg sync.WaitGroup
	var subs []*wsql.Subscriber
	var err error
	for range consumers {
		var s *wsql.Subscriber
		s, err = wsql.NewSubscriber(wsql.BeginnerFromPgx(w.pool), wsql.SubscriberConfig{
			ConsumerGroup: "peers", SchemaAdapter: w.schema, OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{},
			InitializeSchema: true, PollInterval: watermillPoll,
		}, watermill.NopLogger{})
		if err != nil {
			break
		}
		subs = append(subs, s)
		var ch <-chan *message.Message
		if ch, err = s.Subscribe(ctx, watermillTopic); err != nil {
			break
		}
		wg.Go(func() {
			for m := range ch {
				handle(m.Payload)
				m.Ack()
			}
		})
	}
	if err == nil {
		<-ctx.Done()
	}
	for _, s := range subs {
		err = errors.Join(err, s.Close())
	}
	wg.Wait()
	return err
}

func (w *watermillStream) close(ctx context.Context) error {
	var err error
	if w.pub != nil {
		err = w.pub.Close()
	}
	if w.pool != nil {
		w.pool.Close()
	}
	return errors.Join(err, w.drop(ctx))
}
