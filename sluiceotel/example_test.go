package sluiceotel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceotel"
)

// A message sent inside a span is handled in the same trace.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sluiceotel-example")
	defer os.RemoveAll(dir)
	c, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	spans := tracetest.NewSpanRecorder() // an exporter, in a real program
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	tr := sluiceotel.New(&sluiceotel.Options{TracerProvider: tp})
	c.Instrument(tr)
	c.CreateQueue(ctx, "orders", nil)

	sctx, checkout := tp.Tracer("shop").Start(ctx, "checkout")
	s, _ := c.NewSender("orders")
	s.Send(sctx, &sluice.Message{Body: []byte("one pizza")})
	checkout.End()

	done := make(chan struct{})
	p, _ := c.NewProcessor("orders", func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
		close(done)
		return nil
	}, &sluice.ProcessorOptions{Middleware: []sluice.Middleware{tr.Middleware()}})
	p.Start(ctx)
	<-done
	p.Stop(ctx)

	var names []string
	for _, s := range spans.Ended() {
		if s.SpanContext().TraceID() == checkout.SpanContext().TraceID() {
			names = append(names, s.Name())
		}
	}
	slices.Sort(names)
	fmt.Println(names)
	// Output: [checkout complete orders process orders send orders]
}
