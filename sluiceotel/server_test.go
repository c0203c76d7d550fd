package sluiceotel_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/store/storetest"
)

// headerPropagation is an HTTP transport that writes the W3C trace
// context of each request's context into its headers, as an
// instrumented HTTP client (otelhttp) would.
type headerPropagation struct{ next http.RoundTripper }

func (h headerPropagation) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return h.next.RoundTrip(req)
}

// One trace runs from a producer that sends through a sluice server with
// the network client to a consumer in another process (a library client
// of its own on the server's database), each with a tracer provider of
// its own: the server stores the trace context with the message's other
// properties, unchanged, and the consumer's process span is a child of
// the producer's send span. The server's span of the Send call joins the
// trace as well, from the call's headers.
func TestTraceThroughServer(t *testing.T) {
	ctx := t.Context()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "sluice.db")
	lib, err := sluice.Open(ctx, dsn, sluice.Options{Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	serverSpans, producerSpans, consumerSpans := newRecorder(t), newRecorder(t), newRecorder(t)
	srv, err := server.New(server.Config{Client: lib, Addr: "127.0.0.1:0", TracerProvider: serverSpans})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	producer, err := client.New("http://"+srv.Addr().String(), &client.Options{
		Instrumentation: sluiceotel.New(&sluiceotel.Options{TracerProvider: producerSpans}),
		HTTPClient:      &http.Client{Transport: headerPropagation{http.DefaultTransport}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	const q = "orders"
	if _, err := producer.CreateQueue(ctx, q, nil); err != nil {
		t.Fatal(err)
	}
	s, err := producer.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	sendCtx, root := producerSpans.Tracer("test").Start(ctx, "checkout")
	if _, err := s.Send(sendCtx, &sluice.Message{Body: []byte("pizza"), ApplicationProperties: map[string]string{"size": "large"}}); err != nil {
		t.Fatal(err)
	}
	root.End()
	traceID := root.SpanContext().TraceID()
	send := producerSpans.one(t, "send "+q)

	consumer, err := sluice.Open(ctx, dsn, sluice.Options{Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	tr := sluiceotel.New(&sluiceotel.Options{TracerProvider: consumerSpans})
	consumer.Instrument(tr)
	var mu sync.Mutex
	var props map[string]string
	var handled trace.SpanContext
	p, err := consumer.NewProcessor(q, func(ctx context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
		mu.Lock()
		defer mu.Unlock()
		props, handled = m.ApplicationProperties, trace.SpanContextFromContext(ctx)
		return nil
	}, &sluice.ProcessorOptions{Middleware: []sluice.Middleware{tr.Middleware()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	process := consumerSpans.one(t, "process "+q)
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := fmt.Sprintf("00-%s-%s-01", traceID, send.SpanContext().SpanID()); props["traceparent"] != want || props["size"] != "large" || len(props) != 2 {
		t.Fatalf("properties through the server %v, want size and traceparent %s", props, want)
	}
	if process.SpanContext().TraceID() != traceID || process.Parent().SpanID() != send.SpanContext().SpanID() || !process.Parent().IsRemote() {
		t.Fatalf("process span in trace %v under %v, want trace %v under the remote send span %v",
			process.SpanContext().TraceID(), process.Parent(), traceID, send.SpanContext().SpanID())
	}
	if handled.SpanID() != process.SpanContext().SpanID() {
		t.Fatalf("the handler ran in span %v, want the process span", handled.SpanID())
	}
	rpc := serverSpans.one(t, "sluice.v1.MessagingService/Send")
	if rpc.SpanContext().TraceID() != traceID || rpc.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Fatalf("the server's Send span in trace %v under %v, want trace %v under the send span", rpc.SpanContext().TraceID(), rpc.Parent(), traceID)
	}
}
