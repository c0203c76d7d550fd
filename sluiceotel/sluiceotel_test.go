package sluiceotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/sluicetest"
)

// recorder is a tracer provider whose ended spans a test reads.
type recorder struct {
	*sdktrace.TracerProvider
	rec *tracetest.SpanRecorder
}

func newRecorder(t *testing.T) recorder {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return recorder{tp, rec}
}

// named returns the ended spans called name.
func (r recorder) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one waits for exactly one ended span called name and returns it.
func (r recorder) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	waitFor(t, "a span "+name, func() bool { return len(r.named(name)) > 0 })
	got := r.named(name)
	if len(got) != 1 {
		t.Fatalf("%d spans %q, want 1", len(got), name)
	}
	return got[0]
}

// waitFor polls cond for up to 30 s (a loaded machine is slow).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// wantAttrs fails unless s carries each key with its value.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if got := attr(s, attribute.Key(kv[i])); got != kv[i+1] {
			t.Errorf("span %q: %s = %q, want %q", s.Name(), kv[i], got, kv[i+1])
		}
	}
}

func createQueue(t *testing.T, c *sluice.Client) string {
	t.Helper()
	q := "q-" + randHex(4)
	if _, err := c.CreateQueue(t.Context(), q, nil); err != nil {
		t.Fatal(err)
	}
	return q
}

// A message sent inside a span is processed in the same trace: the send
// span is the producer's child and writes its context into the message,
// the processor's process span is the send span's child, and the
// receive and settle spans belong to the trace too. The caller's message
// is left as it was.
func TestTraceQueueOneProcess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		rec := newRecorder(t)
		tr := sluiceotel.New(&sluiceotel.Options{TracerProvider: rec})
		c.Instrument(tr)
		q := createQueue(t, c)
		s, err := c.NewSender(q)
		if err != nil {
			t.Fatal(err)
		}
		ctx, root := rec.Tracer("test").Start(t.Context(), "checkout")
		m := &sluice.Message{Body: []byte("pizza"), MessageID: "order-1", ApplicationProperties: map[string]string{"size": "large"}}
		if _, err := s.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		root.End()
		if len(m.ApplicationProperties) != 1 {
			t.Fatalf("the caller's properties changed to %v", m.ApplicationProperties)
		}
		var mu sync.Mutex
		var handled []trace.SpanContext
		var props map[string]string
		h := func(ctx context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, trace.SpanContextFromContext(ctx))
			props = m.ApplicationProperties
			return nil
		}
		p, err := c.NewProcessor(q, h, &sluice.ProcessorOptions{Middleware: []sluice.Middleware{tr.Middleware()}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		settle := rec.one(t, "complete "+q)
		if err := p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		traceID := root.SpanContext().TraceID()
		send := rec.one(t, "send "+q)
		if send.Parent().SpanID() != root.SpanContext().SpanID() || send.SpanKind() != trace.SpanKindProducer {
			t.Fatalf("send span: parent %v kind %v, want the checkout span and producer", send.Parent(), send.SpanKind())
		}
		wantAttrs(t, send, "messaging.system", "sluice", "messaging.operation.type", "send", "messaging.operation.name", "send",
			"messaging.destination.name", q, "messaging.message.id", "order-1")
		mu.Lock()
		defer mu.Unlock()
		wantTP := fmt.Sprintf("00-%s-%s-01", traceID, send.SpanContext().SpanID())
		if props["traceparent"] != wantTP || props["size"] != "large" {
			t.Fatalf("received properties %v, want size and traceparent %s", props, wantTP)
		}
		process := rec.one(t, "process "+q)
		if process.SpanContext().TraceID() != traceID || process.Parent().SpanID() != send.SpanContext().SpanID() ||
			process.SpanKind() != trace.SpanKindConsumer {
			t.Fatalf("process span in trace %v under %v (%v), want trace %v under the send span", process.SpanContext().TraceID(),
				process.Parent().SpanID(), process.SpanKind(), traceID)
		}
		wantAttrs(t, process, "messaging.operation.type", "process", "messaging.destination.name", q,
			"messaging.message.id", "order-1", "sluice.delivery_count", "1")
		if len(handled) != 1 || handled[0].SpanID() != process.SpanContext().SpanID() {
			t.Fatalf("the handler ran in %v, want the process span", handled)
		}
		if settle.SpanContext().TraceID() != traceID {
			t.Fatalf("settle span in trace %v, want %v", settle.SpanContext().TraceID(), traceID)
		}
		wantAttrs(t, settle, "messaging.operation.type", "settle", "messaging.operation.name", "complete")
		recv := rec.named("receive " + q)
		if len(recv) == 0 || len(recv[0].Links()) != 1 || recv[0].Links()[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
			t.Fatalf("receive spans %v: want one linked to the send span", recv)
		}
	})
}

// An event published inside a span is handled in the same trace, and a
// handler's error marks its process span.
func TestTraceStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		rec := newRecorder(t)
		tr := sluiceotel.New(&sluiceotel.Options{TracerProvider: rec})
		c.Instrument(tr)
		ns := "ns-" + randHex(3)
		ctx, root := rec.Tracer("test").Start(t.Context(), "click")
		if _, err := c.Publish(ctx, sluice.StreamID{Namespace: ns, Key: "user-1"}, sluice.Event{Body: []byte("a")}); err != nil {
			t.Fatal(err)
		}
		root.End()
		p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{RefreshInterval: 100 * time.Millisecond,
			Middleware: []sluice.StreamMiddleware{tr.StreamMiddleware()}})
		err := p.Handle("reader", func(ctx context.Context, ev *sluice.StreamEvent) error {
			if ev.Attempt == 1 {
				return errors.New("not yet")
			}
			return nil
		}, &sluice.ConsumerOptions{Namespace: ns, RetryBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		// The namespace subscription starts from the events published after
		// it is stored: publish once the processor runs.
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer p.Stop(context.Background())
		ctx, root = rec.Tracer("test").Start(t.Context(), "click")
		waitFor(t, "a process span", func() bool {
			if _, err := c.Publish(ctx, sluice.StreamID{Namespace: ns, Key: "user-1"}, sluice.Event{Body: []byte("b")}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			return len(rec.named("process "+ns)) >= 2
		})
		root.End()
		publishes := rec.named("publish " + ns)
		byID := make(map[trace.SpanID]bool)
		for _, s := range publishes {
			byID[s.SpanContext().SpanID()] = true
			wantAttrs(t, s, "messaging.operation.name", "publish", "messaging.destination.name", ns, "sluice.stream.key", "user-1")
		}
		procs := rec.named("process " + ns)
		first, second := procs[0], procs[1]
		if first.SpanContext().TraceID() != root.SpanContext().TraceID() || !byID[first.Parent().SpanID()] ||
			second.Parent().SpanID() != first.Parent().SpanID() {
			t.Fatalf("process spans under %v and %v in trace %v; want both under the publish span, in trace %v",
				first.Parent(), second.Parent(), first.SpanContext().TraceID(), root.SpanContext().TraceID())
		}
		if first.Status().Code != codes.Error || !strings.Contains(first.Status().Description, "not yet") || second.Status().Code == codes.Error {
			t.Fatalf("statuses %v then %v: want the failed attempt's error, then none", first.Status(), second.Status())
		}
		wantAttrs(t, first, "sluice.delivery_count", "1", "sluice.stream.key", "user-1", "error.type", "_OTHER")
		wantAttrs(t, second, "sluice.delivery_count", "2")
	})
}

// A failed send's span records its error and error.type; a receive that
// got nothing because its context ended, or found nothing, makes no span.
func TestTraceFailuresAndEmptyReceives(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		rec := newRecorder(t)
		c.Instrument(sluiceotel.New(&sluiceotel.Options{TracerProvider: rec}))
		s, err := c.NewSender("missing")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(t.Context(), &sluice.Message{}); !errors.Is(err, sluice.ErrEntityNotFound) {
			t.Fatalf("send to a missing queue: %v", err)
		}
		send := rec.one(t, "send missing")
		if send.Status().Code != codes.Error || len(send.Events()) != 1 || send.Events()[0].Name != "exception" {
			t.Fatalf("failed send span: status %v, events %v", send.Status(), send.Events())
		}
		wantAttrs(t, send, "error.type", "entity_not_found")

		q := createQueue(t, c)
		r, err := c.NewReceiver(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := r.Receive(short, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Receive of an empty queue: %v", err)
		}
		if ms, err := r.TryReceive(t.Context(), 1); err != nil || len(ms) != 0 {
			t.Fatalf("TryReceive of an empty queue: %v, %v", ms, err)
		}
		if _, err := r.Receive(t.Context(), 0); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Fatalf("Receive of 0 messages: %v", err)
		}
		got := rec.named("receive " + q)
		if len(got) != 1 || got[0].Status().Code != codes.Error {
			t.Fatalf("receive spans %v: want one, of the refused receive", got)
		}
		wantAttrs(t, got[0], "error.type", "invalid_argument")
	})
}

// A delivery whose message carries no trace context is processed under
// the handler's context; one that carries it, under the producer, linked
// to the handler's context.
func TestProcessParent(t *testing.T) {
	rec := newRecorder(t)
	tr := sluiceotel.New(&sluiceotel.Options{TracerProvider: rec})
	r, err := sluicetest.Open(t, nil).NewReceiver("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, local := rec.Tracer("test").Start(t.Context(), "poller")
	defer local.End()
	_, producer := rec.Tracer("test").Start(t.Context(), "producer")
	producer.End()
	props := map[string]string{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(t.Context(), producer), propagation.MapCarrier(props))
	h := tr.Middleware()(func(context.Context, *sluice.Receiver, *sluice.ReceivedMessage) error { return nil })
	if err := h(ctx, r, &sluice.ReceivedMessage{}); err != nil {
		t.Fatal(err)
	}
	if err := h(ctx, r, &sluice.ReceivedMessage{Message: sluice.Message{ApplicationProperties: props}}); err != nil {
		t.Fatal(err)
	}
	spans := rec.named("process orders")
	if len(spans) != 2 {
		t.Fatalf("%d process spans, want 2", len(spans))
	}
	if spans[0].Parent().SpanID() != local.SpanContext().SpanID() || len(spans[0].Links()) != 0 {
		t.Fatalf("without trace context: parent %v, links %v; want the handler's span, no link", spans[0].Parent(), spans[0].Links())
	}
	if spans[1].Parent().SpanID() != producer.SpanContext().SpanID() || spans[1].SpanContext().TraceID() != producer.SpanContext().TraceID() ||
		len(spans[1].Links()) != 2 || spans[1].Links()[0].SpanContext.SpanID() != producer.SpanContext().SpanID() ||
		spans[1].Links()[1].SpanContext.SpanID() != local.SpanContext().SpanID() {
		t.Fatalf("with trace context: parent %v, links %v; want the producer, linked to it and to the handler's span", spans[1].Parent(), spans[1].Links())
	}
}

// A message that carries a trace context already (sent on, or sent by a
// server for a traced caller) keeps it: the send span links to it, and
// the consumer continues the first producer's trace.
func TestSendKeepsCarriedContext(t *testing.T) {
	rec := newRecorder(t)
	c := sluicetest.Open(t, nil)
	c.Instrument(sluiceotel.New(&sluiceotel.Options{TracerProvider: rec}))
	q := createQueue(t, c)
	_, first := rec.Tracer("test").Start(t.Context(), "first producer")
	first.End()
	carried := map[string]string{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(t.Context(), first), propagation.MapCarrier(carried))
	s, err := c.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendBatch(t.Context(), []*sluice.Message{{ApplicationProperties: carried}, {}}); err != nil {
		t.Fatal(err)
	}
	send := rec.one(t, "send "+q)
	create := rec.one(t, "create "+q) // the other message's, alone
	if len(send.Links()) != 2 || !linked(send, first.SpanContext()) || !linked(send, create.SpanContext()) {
		t.Fatalf("send span links %v, want the carried context and the other message's create span", send.Links())
	}
	wantAttrs(t, send, "messaging.batch.message_count", "2")
	r, err := c.NewReceiver(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.Receive(t.Context(), 2)
	if err != nil || len(ms) != 2 {
		t.Fatalf("Receive: %v, %v", ms, err)
	}
	own := traceparent(create.SpanContext())
	if ms[0].ApplicationProperties["traceparent"] != carried["traceparent"] || ms[1].ApplicationProperties["traceparent"] != own {
		t.Fatalf("traceparents %q and %q, want the carried %q and the create span's %q", ms[0].ApplicationProperties["traceparent"],
			ms[1].ApplicationProperties["traceparent"], carried["traceparent"], own)
	}
}
