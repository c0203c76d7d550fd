package sluiceotel_test

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceotel"
)

// BenchmarkTracedRound sends, receives and completes a message on
// SQLite with every operation traced (sampled, ended into a processor
// that drops them), to compare with sluice's BenchmarkMessageRound.
func BenchmarkTracedRound(b *testing.B) {
	ctx := b.Context()
	c, err := sluice.Open(ctx, "sqlite://"+b.TempDir()+"/bench.db?synchronous=NORMAL", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(ctx)
	c.Instrument(sluiceotel.New(&sluiceotel.Options{TracerProvider: tp}))
	if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
		b.Fatal(err)
	}
	s, _ := c.NewSender("q")
	r, _ := c.NewReceiver("q", nil)
	msg := &sluice.Message{Body: []byte("x")}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Send(ctx, msg); err != nil {
			b.Fatal(err)
		}
		ms, err := r.TryReceive(ctx, 1)
		if err != nil || len(ms) != 1 {
			b.Fatalf("TryReceive = %v, %v", ms, err)
		}
		if err := r.Complete(ctx, ms[0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTracedBatch sends a batch of 100 messages on SQLite with the
// send traced: the cost of a context, or a create span, per message.
func BenchmarkTracedBatch(b *testing.B) {
	ctx := b.Context()
	c, err := sluice.Open(ctx, "sqlite://"+b.TempDir()+"/bench.db?synchronous=NORMAL", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(ctx)
	c.Instrument(sluiceotel.New(&sluiceotel.Options{TracerProvider: tp}))
	if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
		b.Fatal(err)
	}
	s, _ := c.NewSender("q")
	msgs := make([]*sluice.Message, 100)
	for i := range msgs {
		msgs[i] = &sluice.Message{Body: []byte("x")}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.SendBatch(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
}
