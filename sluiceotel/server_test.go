package sluiceotel_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
// trace as well, from the call's headers, and under it the server's span
// of its own send to storage, which keeps the producer's context and
// links to it. The consumer's receive span links to the producer's, and
// its process and complete spans are in the trace.
// serve starts a server on a SQLite file, tracing its calls with tp, and
// returns its address and the file's DSN; it stops when the test ends.
func serve(t *testing.T, tp trace.TracerProvider) (addr, dsn string) {
	t.Helper()
	dsn = "sqlite://" + filepath.Join(t.TempDir(), "sluice.db")
	lib, err := sluice.Open(t.Context(), dsn, &sluice.Options{Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lib.Close() })
	srv, err := server.New(server.Config{Client: lib, Addr: "127.0.0.1:0", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + srv.Addr().String(), dsn
}

// newNetworkClient returns a network client of addr instrumented with
// tr, whose calls carry their trace context in W3C headers; it closes
// when the test ends.
func newNetworkClient(t *testing.T, addr string, tr *sluiceotel.Tracing) *client.Client {
	t.Helper()
	c, err := client.New(addr, &client.Options{Instrumentation: tr,
		HTTPClient: &http.Client{Transport: headerPropagation{http.DefaultTransport}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestTraceThroughServer(t *testing.T) {
	ctx := t.Context()
	serverSpans, producerSpans, consumerSpans := newRecorder(t), newRecorder(t), newRecorder(t)
	addr, dsn := serve(t, serverSpans)
	producer := newNetworkClient(t, addr, sluiceotel.New(&sluiceotel.Options{TracerProvider: producerSpans}))
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

	consumer, err := sluice.Open(ctx, dsn, &sluice.Options{Logger: storetest.Logger(t)})
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
	stored := serverSpans.one(t, "send "+q)
	if stored.SpanContext().TraceID() != traceID || stored.Parent().SpanID() != rpc.SpanContext().SpanID() ||
		stored.SpanKind() != trace.SpanKindClient || !linked(stored, send.SpanContext()) {
		t.Fatalf("the server's storage send span (kind %v) in trace %v under %v, want a client span under the Send call's, linked to the producer's",
			stored.SpanKind(), stored.SpanContext().TraceID(), stored.Parent())
	}
	recv := consumerSpans.one(t, "receive "+q)
	if !linked(recv, send.SpanContext()) {
		t.Fatalf("receive span links %v, want the producer's send span", recv.Links())
	}
	complete := consumerSpans.one(t, "complete "+q)
	if complete.SpanContext().TraceID() != traceID {
		t.Fatalf("complete span in trace %v, want %v", complete.SpanContext().TraceID(), traceID)
	}
}

// A traced server gives the messages of a caller that does not trace a
// creation context: a single message the server's send span's, a
// producer span under the Send call's; each of a batch a create span of
// its own under the call's. The server's receive and settlement spans
// nest under their calls' spans too.
func TestTraceServerCreatesContext(t *testing.T) {
	ctx := t.Context()
	serverSpans := newRecorder(t)
	addr, _ := serve(t, serverSpans)
	c, err := client.New(addr, nil) // traces nothing
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const q = "plain"
	if _, err := c.CreateQueue(ctx, q, nil); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, &sluice.Message{MessageID: "one"}); err != nil {
		t.Fatal(err)
	}
	single := serverSpans.one(t, "send "+q)
	rpc := serverSpans.one(t, "sluice.v1.MessagingService/Send")
	if single.SpanKind() != trace.SpanKindProducer || single.Parent().SpanID() != rpc.SpanContext().SpanID() {
		t.Fatalf("the server's send span of kind %v under %v, want a producer span under the Send call's", single.SpanKind(), single.Parent())
	}
	if _, err := s.SendBatch(ctx, []*sluice.Message{{MessageID: "a"}, {MessageID: "b"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "2 create spans", func() bool { return len(serverSpans.named("create "+q)) == 2 })
	waitFor(t, "the second Send call's span", func() bool { return len(serverSpans.named("sluice.v1.MessagingService/Send")) == 2 })
	batchCall := serverSpans.named("sluice.v1.MessagingService/Send")[1]
	want := map[string]string{"one": traceparent(single.SpanContext())}
	for _, cr := range serverSpans.named("create " + q) {
		if cr.Parent().SpanID() != batchCall.SpanContext().SpanID() {
			t.Fatalf("create span under %v, want the second Send call's span", cr.Parent())
		}
		want[attr(cr, "messaging.message.id")] = traceparent(cr.SpanContext())
	}
	r, err := c.NewReceiver(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*sluice.ReceivedMessage
	waitFor(t, "3 messages", func() bool {
		ms, err := r.TryReceive(ctx, 3-len(got))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
		return len(got) == 3
	})
	for _, m := range got {
		if m.ApplicationProperties["traceparent"] != want[m.MessageID] {
			t.Fatalf("message %s carries %q, want %q", m.MessageID, m.ApplicationProperties["traceparent"], want[m.MessageID])
		}
	}
	if err := r.Complete(ctx, got[0]); err != nil {
		t.Fatal(err)
	}
	complete := serverSpans.one(t, "complete "+q)
	call := serverSpans.one(t, "sluice.v1.MessagingService/Complete")
	if complete.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Fatalf("the server's complete span under %v, want the Complete call's span", complete.Parent())
	}
	recvCalls := map[trace.SpanID]bool{}
	for _, call := range serverSpans.named("sluice.v1.MessagingService/Receive") {
		recvCalls[call.SpanContext().SpanID()] = true
	}
	recvs := serverSpans.named("receive " + q)
	if len(recvs) == 0 {
		t.Fatal("the server made no receive span")
	}
	for _, recv := range recvs {
		if !recvCalls[recv.Parent().SpanID()] {
			t.Fatalf("the server's receive span under %v, want a Receive call's span", recv.Parent())
		}
	}
}

// A stream event published through the server by an instrumented
// network client is handled, by the network client's stream processor
// with sluiceotel's stream middleware, in the publisher's trace: its
// properties carry the context through the server both ways.
func TestTraceStreamThroughServer(t *testing.T) {
	producerSpans, consumerSpans := newRecorder(t), newRecorder(t)
	addr, _ := serve(t, nil)
	producer := newNetworkClient(t, addr, sluiceotel.New(&sluiceotel.Options{TracerProvider: producerSpans}))
	tr := sluiceotel.New(&sluiceotel.Options{TracerProvider: consumerSpans})
	consumer := newNetworkClient(t, addr, tr)
	const ns = "clicks"
	var mu sync.Mutex
	var props map[string]string
	p := consumer.NewStreamProcessor(&sluice.StreamProcessorOptions{Middleware: []sluice.StreamMiddleware{tr.StreamMiddleware()}})
	err := p.Handle("counter", func(_ context.Context, ev *sluice.StreamEvent) error {
		mu.Lock()
		defer mu.Unlock()
		props = ev.Properties
		return nil
	}, &sluice.ConsumerOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	ctx, root := producerSpans.Tracer("test").Start(t.Context(), "click")
	defer root.End()
	// The namespace's subscription takes the events published once it is
	// stored: publish until one is handled.
	waitFor(t, "a process span", func() bool {
		if _, err := producer.Publish(ctx, sluice.StreamID{Namespace: ns, Key: "user-1"}, sluice.Event{Body: []byte("c")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		return len(consumerSpans.named("process "+ns)) > 0
	})
	process := consumerSpans.named("process " + ns)[0]
	parents := make(map[trace.SpanID]bool)
	for _, s := range producerSpans.named("publish " + ns) {
		parents[s.SpanContext().SpanID()] = true
	}
	if process.SpanContext().TraceID() != root.SpanContext().TraceID() || !parents[process.Parent().SpanID()] {
		t.Fatalf("process span in trace %v under %v, want trace %v under a publish span", process.SpanContext().TraceID(),
			process.Parent(), root.SpanContext().TraceID())
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.HasPrefix(props["traceparent"], "00-"+root.SpanContext().TraceID().String()+"-") {
		t.Fatalf("the handled event's properties %v: want the publisher's traceparent", props)
	}
}

// The network client's processor, with MessageMiddleware, handles a
// message sent through the server in the sender's trace: its process span
// is the send span's child, and the handler runs in it.
func TestTraceNetworkProcessor(t *testing.T) {
	producerSpans, consumerSpans := newRecorder(t), newRecorder(t)
	addr, _ := serve(t, nil)
	producer := newNetworkClient(t, addr, sluiceotel.New(&sluiceotel.Options{TracerProvider: producerSpans}))
	tr := sluiceotel.New(&sluiceotel.Options{TracerProvider: consumerSpans})
	consumer := newNetworkClient(t, addr, tr)
	const q = "orders"
	if _, err := producer.CreateQueue(t.Context(), q, nil); err != nil {
		t.Fatal(err)
	}
	s, err := producer.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := producerSpans.Tracer("test").Start(t.Context(), "checkout")
	if _, err := s.Send(ctx, &sluice.Message{Body: []byte("pizza")}); err != nil {
		t.Fatal(err)
	}
	root.End()
	send := producerSpans.one(t, "send "+q)
	var mu sync.Mutex
	var handled trace.SpanContext
	p, err := consumer.NewProcessor(q, func(ctx context.Context, _ sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
		mu.Lock()
		defer mu.Unlock()
		handled = trace.SpanContextFromContext(ctx)
		return nil
	}, &sluice.ProcessorOptions{MessageMiddleware: []sluice.MessageMiddleware{tr.MessageMiddleware()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	process := consumerSpans.one(t, "process "+q)
	if err := p.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if process.SpanContext().TraceID() != root.SpanContext().TraceID() || process.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Fatalf("process span in trace %v under %v, want trace %v under the send span %v",
			process.SpanContext().TraceID(), process.Parent(), root.SpanContext().TraceID(), send.SpanContext().SpanID())
	}
	mu.Lock()
	defer mu.Unlock()
	if handled.SpanID() != process.SpanContext().SpanID() {
		t.Fatalf("the handler ran in span %v, want the process span", handled.SpanID())
	}
}

// The network client's receives and settlements are traced as the
// library's: the receive span links to the message's producer, and a
// settlement outside any span is a child of it.
func TestTraceNetworkReceiveAndSettle(t *testing.T) {
	producerSpans, consumerSpans := newRecorder(t), newRecorder(t)
	addr, _ := serve(t, nil)
	producer := newNetworkClient(t, addr, sluiceotel.New(&sluiceotel.Options{TracerProvider: producerSpans}))
	consumer := newNetworkClient(t, addr, sluiceotel.New(&sluiceotel.Options{TracerProvider: consumerSpans}))
	const q = "Orders" // named canonically in spans
	if _, err := producer.CreateQueue(t.Context(), q, nil); err != nil {
		t.Fatal(err)
	}
	s, err := producer.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := producerSpans.Tracer("test").Start(t.Context(), "checkout")
	if _, err := s.SendBatch(ctx, []*sluice.Message{{Body: []byte("a")}, {Body: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	root.End()
	producerSpans.one(t, "send orders")
	creates := producerSpans.named("create orders") // one a message, in order
	r, err := consumer.NewReceiver(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.Receive(t.Context(), 2)
	if err != nil || len(ms) != 2 {
		t.Fatalf("Receive: %v, %v", ms, err)
	}
	if err := r.Complete(t.Context(), ms[0]); err != nil {
		t.Fatal(err)
	}
	if err := r.Abandon(t.Context(), ms[1], nil); err != nil {
		t.Fatal(err)
	}
	recv := consumerSpans.one(t, "receive orders")
	if len(creates) != 2 || len(recv.Links()) != 2 || !linked(recv, creates[0].SpanContext()) || !linked(recv, creates[1].SpanContext()) {
		t.Fatalf("receive span links %v, want the 2 messages' create spans", recv.Links())
	}
	wantAttrs(t, recv, "messaging.batch.message_count", "2", "messaging.operation.type", "receive")
	for i, name := range []string{"complete orders", "abandon orders"} {
		settle := consumerSpans.one(t, name)
		if settle.Parent().SpanID() != creates[i].SpanContext().SpanID() || settle.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Fatalf("%s span under %v, want its message's create span", name, settle.Parent())
		}
	}
}

// The network client traces its lock renewals and resubmits as the
// library does; the traced server's own resubmit span, under the call's,
// links the producers of the dead letters it moved, which the network
// client does not see.
func TestTraceNetworkRenewAndResubmit(t *testing.T) {
	ctx := t.Context()
	serverSpans, clientSpans := newRecorder(t), newRecorder(t)
	addr, _ := serve(t, serverSpans)
	c := newNetworkClient(t, addr, sluiceotel.New(&sluiceotel.Options{TracerProvider: clientSpans}))
	const q = "renewals"
	if _, err := c.CreateQueue(ctx, q, nil); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, &sluice.Message{MessageID: "m"}); err != nil {
		t.Fatal(err)
	}
	send := clientSpans.one(t, "send "+q)
	r, err := c.NewReceiver(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.Receive(ctx, 1)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive: %v, %v", ms, err)
	}
	if err := r.RenewLock(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
	renew := clientSpans.one(t, "renew_lock "+q)
	if renew.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Fatalf("renew_lock span under %v, want the send span", renew.Parent())
	}
	if err := r.DeadLetter(ctx, ms[0], nil); err != nil {
		t.Fatal(err)
	}
	if n, err := c.ResubmitDeadLetters(ctx, q, nil); err != nil || n != 1 {
		t.Fatalf("ResubmitDeadLetters = %d, %v", n, err)
	}
	resubmit := clientSpans.one(t, "resubmit "+q)
	if len(resubmit.Links()) != 0 || resubmit.SpanKind() != trace.SpanKindClient {
		t.Fatalf("the network client's resubmit span of kind %v links %v, want a client span with none", resubmit.SpanKind(), resubmit.Links())
	}
	atServer := serverSpans.one(t, "resubmit "+q)
	call := serverSpans.one(t, "sluice.v1.MessagingService/ResubmitDeadLetters")
	if atServer.Parent().SpanID() != call.SpanContext().SpanID() || !linked(atServer, send.SpanContext()) ||
		call.Parent().SpanID() != resubmit.SpanContext().SpanID() {
		t.Fatalf("the server's resubmit span under %v with links %v (call under %v), want it under the call's, linked to the send, "+
			"the call under the client's resubmit", atServer.Parent(), atServer.Links(), call.Parent())
	}
}
