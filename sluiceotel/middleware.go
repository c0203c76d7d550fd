package sluiceotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

// Middleware traces each delivery of a sluice.Processor with a consumer
// span, "process {queue}", a child of the span that sent the message
// (read from its properties), so that the handler's work joins the
// producer's trace; a message that carries no trace context gets a span
// under the handler's context. The span ends with the handler, and
// records its error. Place it first in ProcessorOptions.Middleware for
// its span to cover the other middleware. MessageMiddleware does the
// same on a processor of any receiver (the network client's).
func (t *Tracing) Middleware() sluice.Middleware {
	return func(next sluice.Handler) sluice.Handler {
		return func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			return t.process(ctx, r, m, func(ctx context.Context) error { return next(ctx, r, m) })
		}
	}
}

// MessageMiddleware is Middleware for a sluice.MessageHandler
// (ProcessorOptions.MessageMiddleware): it traces the deliveries of the
// network client's processor, or of the library's, alike.
func (t *Tracing) MessageMiddleware() sluice.MessageMiddleware {
	return func(next sluice.MessageHandler) sluice.MessageHandler {
		return func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			return t.process(ctx, r, m, func(ctx context.Context) error { return next(ctx, r, m) })
		}
	}
}

// process runs handle, the handler of m received through r, in the
// delivery's process span.
func (t *Tracing) process(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage, handle func(context.Context) error) error {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(r.Entity()), SequenceNumberAttribute.Int64(m.SequenceNumber),
		DeliveryCountAttribute.Int(m.DeliveryCount),
	}
	if m.MessageID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(m.MessageID))
	}
	ctx, span := t.startProcess(ctx, "process "+r.Entity(), m.ApplicationProperties, attrs)
	err := handle(ctx)
	ender(span)(err)
	return err
}

// StreamMiddleware traces each delivery attempt of a stream consumer
// (sluice.StreamProcessor, or the network client's) as Middleware does a
// Processor's: "process {namespace}", a child of the publish that
// appended the event.
func (t *Tracing) StreamMiddleware() sluice.StreamMiddleware {
	return func(next sluice.StreamHandler) sluice.StreamHandler {
		return func(ctx context.Context, ev *sluice.StreamEvent) error {
			attrs := []attribute.KeyValue{
				semconv.MessagingSystemKey.String(system), semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess,
				semconv.MessagingDestinationName(ev.Namespace), StreamKeyAttribute.String(ev.Key),
				semconv.MessagingDestinationSubscriptionName(ev.Subscription),
				SequenceNumberAttribute.Int64(ev.Position), DeliveryCountAttribute.Int(ev.Attempt),
			}
			ctx, span := t.startProcess(ctx, "process "+ev.Namespace, ev.Properties, attrs)
			err := next(ctx, ev)
			ender(span)(err)
			return err
		}
	}
}

// startProcess starts a delivery's span: a child of the producer whose
// context props carry, linked to it and to ctx's span, or else a child
// of ctx's.
func (t *Tracing) startProcess(ctx context.Context, name string, props map[string]string, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	parent := ctx
	if sc := trace.SpanContextFromContext(t.extract(context.Background(), props)); sc.IsValid() {
		// The conventions ask for a link to the message's creation
		// context even where it is the parent.
		links := []trace.Link{{SpanContext: sc}}
		if local := trace.SpanContextFromContext(ctx); local.IsValid() {
			links = append(links, trace.Link{SpanContext: local})
		}
		opts = append(opts, trace.WithLinks(links...))
		// Extracted into ctx, so that the producer's baggage comes too.
		parent = t.extract(ctx, props)
	}
	return t.tracer().Start(parent, name, opts...)
}
