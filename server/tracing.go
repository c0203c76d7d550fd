package server

import (
	"context"
	"unicode/utf8"

	"connectrpc.com/connect/v2"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceotel"
)

// Tracing. With Config.TracerProvider set, every call of the API gets a
// server span, named by its procedure ("sluice.v1.MessagingService/Send")
// and carrying the OpenTelemetry RPC conventions' attributes, which
// otelconnect sets: rpc.system.name (grpc for gRPC and gRPC-Web,
// connectrpc for the Connect protocol), rpc.method (the procedure),
// rpc.response.status_code ("OK", "NOT_FOUND", ...) and, for a failed
// call, error.type. The server adds EntityAttribute, the entity a call
// acts on. A call carrying W3C trace context (traceparent, tracestate)
// continues the caller's trace.
//
// Following the conventions for server spans, a span's status is Error
// for the failures that are the server's (UNKNOWN, INTERNAL,
// UNAVAILABLE, DEADLINE_EXCEEDED, UNIMPLEMENTED, DATA_LOSS); a caller's
// mistake (NOT_FOUND, INVALID_ARGUMENT, PERMISSION_DENIED, ...) leaves it
// unset, its code in the attributes.
//
// No span carries a message's body or properties, a token or a header,
// nor the caller's address; a procedure the API does not define, whose
// path a caller chose, gets no span.
//
// The server's client (Config.Client), unless it has an Instrumentation
// of its own, is instrumented with sluiceotel on the same provider: a
// call's storage operation (send, receive, settlement, lock renewal,
// resubmit, publish) gets a span of its own, a child of the call's. A
// message or event sent by a caller that does not trace gets its
// creation context there, from the server's send span (a single message)
// or create spans (a batch), so that its consumers' spans join the
// server's trace; one whose properties carry a context already, a traced
// caller's, keeps it (the first producer's context wins, as the messaging
// conventions ask), and the server's send span links to it.

// traceClient instruments c with sluiceotel on tp, unless c has an
// Instrumentation already, the W3C trace context in message properties
// whatever the process's global propagator is.
func traceClient(c *sluice.Client, tp trace.TracerProvider) {
	if c.Instrumentation() != nil {
		return
	}
	c.Instrument(sluiceotel.New(&sluiceotel.Options{TracerProvider: tp, Propagator: propagation.TraceContext{}}))
}

// EntityAttribute is the span attribute naming the entity a call acts on:
// a queue, a topic, a subscription's path, or ClusterEntity or
// MetricsEntity.
const EntityAttribute = attribute.Key("sluice.entity")

// newTracing returns the interceptor that traces calls with tp.
func newTracing(tp trace.TracerProvider) (connect.ServerInterceptor, error) {
	return otelconnect.NewServerInterceptor(
		otelconnect.WithTracerProvider(tp),
		// The W3C header whatever the process's global propagator is
		// (a no-op until a program sets one).
		otelconnect.WithPropagator(propagation.TraceContext{}),
		// A caller's span is the parent, not a mere link: the trace goes
		// on through the server.
		otelconnect.WithTrustRemote(),
		// The server's metrics are Prometheus's, at /metrics.
		otelconnect.WithoutMetrics(),
		otelconnect.WithFilter(func(_ context.Context, spec connect.Spec) bool { return spec.Schema != nil }),
	)
}

// traceEntity records on the call's span the entity it acts on, cut to
// the longest name an entity may have.
func (s *Server) traceEntity(ctx context.Context, entity string) {
	if s.cfg.TracerProvider == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if len(entity) > maxEntityAttributeLen {
		n := maxEntityAttributeLen
		for n > 0 && !utf8.RuneStart(entity[n]) {
			n--
		}
		entity = entity[:n]
	}
	span.SetAttributes(EntityAttribute.String(entity))
}

// maxEntityAttributeLen bounds EntityAttribute: an entity's name has at
// most 260 characters, and a longer one, which the call refuses, is cut.
const maxEntityAttributeLen = 260
