// Package sluiceotel traces sluice with OpenTelemetry: spans for sends,
// receives, settlements, publishes, lock renewals and resubmits of dead
// letters of a client (through sluice.Client.Instrument, or the network
// client's client.Options.Instrumentation), and a middleware for processors that
// gives every delivery a "process" span. The W3C trace context of a send
// or publish (traceparent, tracestate) travels in the message's
// application properties, or the event's properties, so that the
// consumer's span continues the producer's trace, across processes and
// through a sluice server (a message that carries a trace context already
// keeps it, so that the trace stays the first producer's). Each message
// gets a creation context of its own: a single message the send span's,
// each message of a batch (and each event of a publish of several) a
// "create" span's, which the send span links:
//
//	tr := sluiceotel.New(nil) // the global TracerProvider and propagator
//	client.Instrument(tr)
//	p, _ := client.NewProcessor("orders", handle, &sluice.ProcessorOptions{
//		Middleware: []sluice.Middleware{tr.Middleware()},
//	})
//
// MessageMiddleware does the same for a processor of any receiver, the
// network client's included (ProcessorOptions.MessageMiddleware).
//
// Spans follow OpenTelemetry's semantic conventions for messaging:
// messaging.system is "sluice", span names are "{operation}
// {destination}" (send orders, create orders, receive orders, complete
// orders, process orders, publish clicks, renew_lock orders,
// renew_session_lock orders, resubmit orders), with
// messaging.operation.name and .type (none for renewals, which the
// conventions do not type), messaging.destination.name,
// messaging.message.id, messaging.batch.message_count and, for a failed
// operation, error.type.
// No span carries a message's body or properties. A sluice server with
// Config.TracerProvider uses this package on its own client, so that the
// storage operation of each call has a span under the call's.
//
// It is a package of its own so that a program that does not use it does
// not link OpenTelemetry.
package sluiceotel
