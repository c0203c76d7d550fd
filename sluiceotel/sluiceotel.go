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

// Start starts tracing an operation (see sluice.Instrumentation), as
// the messaging conventions ask. A send or publish gets a span whose
// context it writes into the properties of each message or event that
// carries none yet: a single message's is the send span's own (a
// producer span, the message's creation context), and each message of a
// batch gets a "create" span of its own (a producer span, a child of
// ctx's, ended at once), which the send span (then a client span) links.
// A message or event that carries a context already keeps it, and the
// send span links to it. A settlement and a lock renewal get a client
// span, a child of ctx's span or else of the producer of the message.
// A receive gets a consumer span only once it returned messages or failed
// (a long poll that ended with its context is no operation), with links
// to the producers of its messages. A resubmit of dead letters gets a
// client span linked, as it ends, to the producers of the dead letters it
// moved.
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
	case sluice.OperationRenewLock:
		return t.startRenewLock(ctx, op)
	case sluice.OperationRenewSessionLock:
		return t.startRenewSessionLock(ctx, op)
	case sluice.OperationResubmit:
		return t.startResubmit(ctx, op)
	}
	return ctx, func(error) {}
}

// carrier is one message or event a send or publish writes its creation
// context into: its properties and its message id ("" for an event).
type carrier struct {
	props map[string]string
	id    string
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
	carriers := make([]carrier, 0, len(op.Messages))
	for _, m := range op.Messages {
		if m != nil {
			carriers = append(carriers, carrier{m.ApplicationProperties, m.MessageID})
		}
	}
	create := []attribute.KeyValue{semconv.MessagingDestinationName(op.Entity)}
	ctx, span := t.startProducer(ctx, "send "+op.Entity, op.Entity, attrs, create, carriers)
	return ctx, ender(span)
}

func (t *Tracing) startPublish(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName("publish"), semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(op.Stream.Namespace), StreamKeyAttribute.String(op.Stream.Key),
	}
	attrs = appendCount(attrs, len(op.Events))
	carriers := make([]carrier, len(op.Events))
	for i := range op.Events {
		carriers[i].props = op.Events[i].Properties
	}
	create := []attribute.KeyValue{semconv.MessagingDestinationName(op.Stream.Namespace), StreamKeyAttribute.String(op.Stream.Key)}
	ctx, span := t.startProducer(ctx, "publish "+op.Stream.Namespace, op.Stream.Namespace, attrs, create, carriers)
	return ctx, ender(span)
}

// startProducer starts the span of a send or publish to dest, with
// attrs, and gives each of carriers that carries no trace context yet a
// creation context: the span's own when the operation sends one message
// (the span is then a producer span), else a create span of its own,
// with the attributes create, which the span (then a client span) links.
// A carrier that carries a context already (a message sent on, or a
// server sending for a traced caller) keeps it, so that the trace stays
// the first producer's, and the span links to it.
func (t *Tracing) startProducer(ctx context.Context, name, dest string, attrs, create []attribute.KeyValue, carriers []carrier) (context.Context, trace.Span) {
	prop := t.propagator()
	tr := t.tracer()
	var links []trace.Link
	var fresh []int // the carriers without a context
	for i, c := range carriers {
		if sc := trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.MapCarrier(c.props))); sc.IsValid() {
			links = appendLink(links, sc)
		} else {
			fresh = append(fresh, i)
		}
	}
	if len(carriers) == 1 && len(fresh) == 1 {
		ctx, span := tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		prop.Inject(ctx, propagation.MapCarrier(carriers[0].props))
		return ctx, span
	}
	for _, i := range fresh {
		sc := t.create(ctx, tr, prop, "create "+dest, create, carriers[i])
		links = appendLink(links, sc)
	}
	return tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...), trace.WithLinks(links...))
}

// create makes the create span of c, a child of ctx's span, writes its
// context into c's properties, and returns the context.
func (t *Tracing) create(ctx context.Context, tr trace.Tracer, prop propagation.TextMapPropagator, name string, attrs []attribute.KeyValue, c carrier) trace.SpanContext {
	all := make([]attribute.KeyValue, 0, len(attrs)+4)
	all = append(all, semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName("create"), semconv.MessagingOperationTypeCreate)
	all = append(all, attrs...)
	if c.id != "" {
		all = append(all, semconv.MessagingMessageID(c.id))
	}
	ctx, span := tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(all...))
	prop.Inject(ctx, propagation.MapCarrier(c.props))
	span.End()
	return span.SpanContext()
}

// appendLink appends a link to sc, while links are fewer than maxLinks
// and sc is valid.
func appendLink(links []trace.Link, sc trace.SpanContext) []trace.Link {
	if sc.IsValid() && len(links) < maxLinks {
		links = append(links, trace.Link{SpanContext: sc})
	}
	return links
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
	return t.startMessageClient(ctx, name+" "+op.Entity, attrs, op.Received)
}

// startMessageClient starts the client span of an operation on msgs
// (a settlement, a lock renewal): a child of ctx's span or, when ctx has
// none, of the producer of the one message it works on, linked to the
// producers of msgs.
func (t *Tracing) startMessageClient(ctx context.Context, name string, attrs []attribute.KeyValue, msgs []*sluice.ReceivedMessage) (context.Context, func(error)) {
	parent := ctx
	if !trace.SpanContextFromContext(ctx).IsValid() && len(msgs) == 1 && msgs[0] != nil {
		parent = t.extract(ctx, msgs[0].ApplicationProperties)
	}
	_, span := t.tracer().Start(parent, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...), trace.WithLinks(t.links(msgs)...))
	return trace.ContextWithSpan(ctx, span), ender(span)
}

// startRenewLock traces the renewal of a message's lock as a
// settlement: a client span, a child of ctx's span or else of the
// message's producer. The conventions name no type for it: the span has
// none.
func (t *Tracing) startRenewLock(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	name := op.Kind.String()
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName(name), semconv.MessagingDestinationName(op.Entity),
	}
	if len(op.Received) == 1 && op.Received[0] != nil && op.Received[0].MessageID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(op.Received[0].MessageID))
	}
	return t.startMessageClient(ctx, name+" "+op.Entity, attrs, op.Received)
}

// startRenewSessionLock traces the renewal of a session's lock: a client
// span, a child of ctx's, without a type.
func (t *Tracing) startRenewSessionLock(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	name := op.Kind.String()
	ctx, span := t.tracer().Start(ctx, name+" "+op.Entity, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName(name), semconv.MessagingDestinationName(op.Entity),
		SessionIDAttribute.String(op.Session)))
	return ctx, ender(span)
}

// startResubmit traces a resubmit of dead letters: a send that creates
// no message (each keeps the context its first send stored), so a
// client span, linked as it ends to the producers of the dead letters it
// moved, with their number.
func (t *Tracing) startResubmit(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	name := op.Kind.String()
	ctx, span := t.tracer().Start(ctx, name+" "+op.Entity, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName(name), semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(op.Entity)))
	end := ender(span)
	return ctx, func(err error) {
		for _, l := range t.links(op.Received) {
			span.AddLink(l)
		}
		span.SetAttributes(appendCount(nil, len(op.Received))...)
		end(err)
	}
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
