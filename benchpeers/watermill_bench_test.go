package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sluicehq/sluice"
	sluicewm "github.com/sluicehq/sluice/watermill"
)

// BenchmarkWatermill runs Watermill's own benchmark (tests.BenchSubscriber:
// one goroutine publishes b.N messages one a call while one subscriber
// reads and acks them) on sluice's Watermill Pub/Sub, over a queue, over
// a topic's subscription and over a stream (the topic's one), beside Watermill's SQL Pub/Sub, each on a fresh
// schema of the same PostgreSQL ($SLUICE_TEST_POSTGRES), and sluice's on a
// fresh SQLite file:
//
//	cd benchpeers && go test -run '^$' -bench BenchmarkWatermill -benchtime 5000x -count 3
func BenchmarkWatermill(b *testing.B) {
	pg := os.Getenv("SLUICE_TEST_POSTGRES")
	sluiceOn := func(pg string, entities sluicewm.Entities, prefetch int) func(b *testing.B) {
		return func(b *testing.B) {
			ctx := context.Background()
			dsn := pg
			if dsn == "" {
				dsn = "sqlite://" + filepath.Join(b.TempDir(), "sluice.db")
			} else {
				_, schemaDSN, drop, err := pgSchema(ctx, pg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { drop(context.Background()) })
				dsn = schemaDSN
			}
			c, err := sluice.Open(ctx, dsn, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			group := ""
			if entities != sluicewm.Queues {
				group = "bench"
			}
			create := entities != sluicewm.Streams // streams need nothing created
			tests.BenchSubscriber(b, func(int) (message.Publisher, message.Subscriber) {
				pub, err := sluicewm.NewPublisher(c, sluicewm.Config{Entities: entities, AutoCreate: create})
				if err != nil {
					b.Fatal(err)
				}
				sub, err := sluicewm.NewSubscriber(c, sluicewm.Config{Entities: entities, ConsumerGroup: group, AutoCreate: create, PrefetchCount: prefetch})
				if err != nil {
					b.Fatal(err)
				}
				return pub, sub
			})
		}
	}
	b.Run("sluice-sqlite-queue", sluiceOn("", sluicewm.Queues, 0))
	b.Run("sluice-sqlite-queue-prefetch-31", sluiceOn("", sluicewm.Queues, 31))
	b.Run("sluice-sqlite-stream", sluiceOn("", sluicewm.Streams, 0))
	if pg == "" {
		b.Log("SLUICE_TEST_POSTGRES is unset: only SQLite runs")
		return
	}
	b.Run("sluice-postgres-queue", sluiceOn(pg, sluicewm.Queues, 0))
	b.Run("sluice-postgres-queue-prefetch-31", sluiceOn(pg, sluicewm.Queues, 31))
	b.Run("sluice-postgres-topic-prefetch-31", sluiceOn(pg, sluicewm.Topics, 31))
	b.Run("sluice-postgres-stream", sluiceOn(pg, sluicewm.Streams, 0))
	b.Run("watermill-sql-postgres", func(b *testing.B) {
		ctx := context.Background()
		_, dsn, drop, err := pgSchema(ctx, pg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { drop(context.Background()) })
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		schema := wsql.DefaultPostgreSQLSchema{GeneratePayloadType: func(string) string { return "BYTEA" }}
		tests.BenchSubscriber(b, func(int) (message.Publisher, message.Subscriber) {
			pub, err := wsql.NewPublisher(wsql.BeginnerFromPgx(pool), wsql.PublisherConfig{
				SchemaAdapter: schema, AutoInitializeSchema: true,
			}, watermill.NopLogger{})
			if err != nil {
				b.Fatal(err)
			}
			sub, err := wsql.NewSubscriber(wsql.BeginnerFromPgx(pool), wsql.SubscriberConfig{
				ConsumerGroup: "bench", SchemaAdapter: schema, OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{},
				InitializeSchema: true, PollInterval: watermillPoll,
			}, watermill.NopLogger{})
			if err != nil {
				b.Fatal(err)
			}
			return pub, sub
		})
	})
}
