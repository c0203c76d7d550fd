package sluiceotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

// instrumentationName names the tracer, as OpenTelemetry asks: the
// package that makes the spans.
const instrumentationName = "github.com/sluicehq/sluice/sluiceotel"

// system is the value of messaging.system.
const system = "sluice"

// maxLinks bounds the links of a receive or settlement span to the
// producers of its messages.
const maxLinks = 128

// Options configure a Tracing. Zero values take the defaults.
type Options struct {
	// TracerProvider makes the spans (default: otel.GetTracerProvider(),
	// the global one, looked up at each span).
	TracerProvider trace.TracerProvider
	// Propagator writes and reads the trace context in message and event
	// properties (default: the global one, otel.GetTextMapPropagator(),
	// when the program has set one that propagates something, else W3C
	// trace context: traceparent and tracestate).
	Propagator propagation.TextMapPropagator
}

// Tracing traces sluice operations and deliveries. It implements
// sluice.Instrumentation; Middleware and StreamMiddleware trace
// processors' deliveries. It is safe for concurrent use.
type Tracing struct {
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

// New returns a Tracing; nil opts take the defaults.
func New(opts *Options) *Tracing {
	t := &Tracing{}
	if opts != nil {
		t.tp, t.prop = opts.TracerProvider, opts.Propagator
	}
	return t
}

func (t *Tracing) tracer() trace.Tracer {
	tp := t.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(instrumentationName)
}

func (t *Tracing) propagator() propagation.TextMapPropagator {
	if t.prop != nil {
		return t.prop
	}
	if p := otel.GetTextMapPropagator(); len(p.Fields()) > 0 {
		return p
	}
	return propagation.TraceContext{}
}

// Start starts tracing an operation (see sluice.Instrumentation): a send
// or publish gets a producer span, whose context it writes into each
// message's or event's properties that carry none yet (one that does
// keeps it, and the span links to it); a settlement a client span, a child of
// ctx's span or else of the producer of the message it settles. A
// receive gets a consumer span only once it returned messages or failed
// (a long poll that ended with its context is no operation), with links
// to the producers of its messages.
func (t *Tracing) Start(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	switch op.Kind {
	case sluice.OperationSend:
		return t.startSend(ctx, op)
	case sluice.OperationPublish:
		return t.startPublish(ctx, op)
	case sluice.OperationReceive:
		return t.startReceive(ctx, op)
	case sluice.OperationSettle:
		return t.startSettle(ctx, op)
	}
	return ctx, func(error) {}
}

func (t *Tracing) startSend(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(op.Entity),
	}
	attrs = appendCount(attrs, len(op.Messages))
	if len(op.Messages) == 1 && op.Messages[0] != nil && op.Messages[0].MessageID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(op.Messages[0].MessageID))
	}
	var carried []map[string]string
	for _, m := range op.Messages {
		if m != nil {
			carried = append(carried, m.ApplicationProperties)
		}
	}
	ctx, span := t.startProducer(ctx, "send "+op.Entity, attrs, carried)
	return ctx, ender(span)
}

// startProducer starts the span of a send or publish and writes its
// context into each of props that carries none yet. Properties that
// carry one already (a message sent on, or a server sending for a
// traced caller) keep it, so that the trace stays the first producer's,
// and the span links to it.
func (t *Tracing) startProducer(ctx context.Context, name string, attrs []attribute.KeyValue, props []map[string]string) (context.Context, trace.Span) {
	prop := t.propagator()
	var links []trace.Link
	carries := make([]bool, len(props))
	for i, p := range props {
		sc := trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.MapCarrier(p)))
		if carries[i] = sc.IsValid(); carries[i] && len(links) < maxLinks {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := t.tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...), trace.WithLinks(links...))
	for i, p := range props {
		if !carries[i] {
			prop.Inject(ctx, propagation.MapCarrier(p))
		}
	}
	return ctx, span
}

func (t *Tracing) startPublish(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName("publish"), semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(op.Stream.Namespace), StreamKeyAttribute.String(op.Stream.Key),
	}
	attrs = appendCount(attrs, len(op.Events))
	carried := make([]map[string]string, len(op.Events))
	for i := range op.Events {
		carried[i] = op.Events[i].Properties
	}
	ctx, span := t.startProducer(ctx, "publish "+op.Stream.Namespace, attrs, carried)
	return ctx, ender(span)
}

// startReceive makes the receive's span when it ends, from the time it
// started: only then is it known whether it received anything.
func (t *Tracing) startReceive(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	start := time.Now()
	return ctx, func(err error) {
		if len(op.Received) == 0 && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return
		}
		attrs := []attribute.KeyValue{
			semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName("receive"), semconv.MessagingOperationTypeReceive,
			semconv.MessagingDestinationName(op.Entity),
		}
		attrs = appendCount(attrs, len(op.Received))
		_, span := t.tracer().Start(ctx, "receive "+op.Entity, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(start),
			trace.WithAttributes(attrs...), trace.WithLinks(t.links(op.Received)...))
		ender(span)(err)
	}
}

func (t *Tracing) startSettle(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	name := op.Action.String()
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName(name), semconv.MessagingOperationTypeSettle,
		semconv.MessagingDestinationName(op.Entity),
	}
	attrs = appendCount(attrs, len(op.Received))
	if len(op.Received) == 1 && op.Received[0] != nil && op.Received[0].MessageID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(op.Received[0].MessageID))
	}
	parent := ctx
	if !trace.SpanContextFromContext(ctx).IsValid() && len(op.Received) == 1 && op.Received[0] != nil {
		parent = t.extract(ctx, op.Received[0].ApplicationProperties)
	}
	_, span := t.tracer().Start(parent, name+" "+op.Entity, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...), trace.WithLinks(t.links(op.Received)...))
	return trace.ContextWithSpan(ctx, span), ender(span)
}

// links links to the producers of msgs that carry their context.
func (t *Tracing) links(msgs []*sluice.ReceivedMessage) []trace.Link {
	var links []trace.Link
	for _, m := range msgs {
		if len(links) == maxLinks {
			break
		}
		if m == nil {
			continue
		}
		if sc := trace.SpanContextFromContext(t.extract(context.Background(), m.ApplicationProperties)); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return links
}

// extract returns ctx with the trace context props carry, if any.
func (t *Tracing) extract(ctx context.Context, props map[string]string) context.Context {
	return t.propagator().Extract(ctx, propagation.MapCarrier(props))
}

// appendCount adds messaging.batch.message_count for a batch of more
// than one, as the conventions ask.
func appendCount(attrs []attribute.KeyValue, n int) []attribute.KeyValue {
	if n > 1 {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(n))
	}
	return attrs
}

// ender returns the end of an operation traced by span: it records a
// failure (with error.type, the error's Go type) and ends the span.
func ender(span trace.Span) func(error) {
	return func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		}
		span.End()
	}
}
