package sqstest

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/libtest"
	"github.com/sluicehq/sluice/server"
)

// BenchmarkRoundTrip measures one message's round trip through a sluice
// server, send, receive and delete, one after the other, by the SQS
// endpoint with the AWS SDK and by sluice's native API with its network
// client, on SQLite and PostgreSQL.
//
//	cd server/sqstest && for i in 1 2 3 4 5; do go test -run '^$' -bench RoundTrip -benchtime 2000x; done
func BenchmarkRoundTrip(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			c, err := sluice.NewClient(libtest.Shared.Backend(b, kind), &sluice.Options{Service: "b-" + libtest.RandHex(6)})
			if err != nil {
				b.Fatal(err)
			}
			e := start(b, c, server.Config{Keys: testKeys, Logger: slog.New(slog.DiscardHandler)})
			b.Run("sqs", func(b *testing.B) { benchSQS(b, e) })
			b.Run("native", func(b *testing.B) { benchNative(b, e) })
		})
	}
}

func benchSQS(b *testing.B, e *env) {
	ctx := b.Context()
	out, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-sqs")})
	if err != nil {
		b.Fatal(err)
	}
	url := out.QueueUrl
	body := aws.String("a message of some sixty bytes, as a small event would be....")
	for b.Loop() {
		if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: body}); err != nil {
			b.Fatal(err)
		}
		got, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, WaitTimeSeconds: 5})
		if err != nil || len(got.Messages) != 1 {
			b.Fatalf("ReceiveMessage = %v, %v", got, err)
		}
		if _, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: got.Messages[0].ReceiptHandle}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchNative(b *testing.B, e *env) {
	ctx := b.Context()
	c, err := client.New(e.api, &client.Options{Token: adminSecret})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.CreateQueue(ctx, "bench-native", nil); err != nil && !errors.Is(err, sluice.ErrEntityExists) {
		b.Fatal(err)
	}
	s, err := c.NewSender("bench-native")
	if err != nil {
		b.Fatal(err)
	}
	r, err := c.NewReceiver("bench-native", nil)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte("a message of some sixty bytes, as a small event would be....")
	for b.Loop() {
		if _, err := s.Send(ctx, &sluice.Message{Body: body}); err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ms, err := r.Receive(rctx, 1)
		cancel()
		if err != nil || len(ms) != 1 {
			b.Fatalf("Receive = %d, %v", len(ms), err)
		}
		if err := r.Complete(ctx, ms[0]); err != nil {
			b.Fatal(err)
		}
	}
}
