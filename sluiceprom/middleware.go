package sluiceprom

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
)

// The results of a handled delivery, the values of the result label of
// sluice_messages_handled_total and sluice_stream_events_handled_total.
const (
	resultOK      = "ok"
	resultError   = "error"
	resultTimeout = "timeout"
	resultPanic   = "panic"
)

// handlerBuckets bound the handler histograms: 1 ms to 262 s, by fours.
var handlerBuckets = prometheus.ExponentialBuckets(.001, 4, 10)

// newHandlerMetrics makes the handler middleware's series: how long
// handlers took and how they ended, by entity for queue handlers and by
// namespace for stream handlers.
func (x *Collector) newHandlerMetrics() {
	x.handled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_messages_handled_total",
		Help: "Deliveries this process's queue handlers (with the collector's MessageMiddleware) handled, by entity and " +
			"result (ok, error, timeout, panic)."}, []string{"entity", "result"})
	x.handlerSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_message_handler_seconds",
		Help:    "How long this process's queue handlers (with the collector's MessageMiddleware) took per delivery, by entity.",
		Buckets: handlerBuckets}, []string{"entity"})
	x.streamHandled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_stream_events_handled_total",
		Help: "Delivery attempts this process's stream handlers (with the collector's StreamMiddleware) handled, by " +
			"namespace and result (ok, error, timeout, panic)."}, []string{"namespace", "result"})
	x.streamSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_stream_handler_seconds",
		Help:    "How long this process's stream handlers (with the collector's StreamMiddleware) took per delivery attempt, by namespace.",
		Buckets: handlerBuckets}, []string{"namespace"})
}

// MessageMiddleware measures each delivery of a sluice.Processor, the
// library's or the network client's (ProcessorOptions.MessageMiddleware):
// how long the handler took (sluice_message_handler_seconds) and how it
// ended (sluice_messages_handled_total), by entity. The result is
// "timeout" for an error wrapping sluice.ErrHandlerTimeout or returned
// once the delivery's context passed its deadline (a sluice.Timeout
// outside this middleware), "panic" for a panic (which goes on to the
// processor's recovery) or a *sluice.PanicError (a sluice.Recover
// inside), else "error" or "ok". Place it first for its durations to
// cover the other middleware.
func (x *Collector) MessageMiddleware() sluice.MessageMiddleware {
	return func(next sluice.MessageHandler) sluice.MessageHandler {
		return func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			entity := x.EntityLabel(r.Entity())
			return measured(ctx, x.handlerSeconds.WithLabelValues(entity), x.handled, entity,
				func() error { return next(ctx, r, m) })
		}
	}
}

// StreamMiddleware is MessageMiddleware for a stream consumer's handler
// (StreamProcessorOptions.Middleware, of the library's StreamProcessor
// or the network client's): each delivery attempt, by the event's
// namespace (sluice_stream_handler_seconds,
// sluice_stream_events_handled_total). A delivery that outlives
// ConsumerOptions.DeliveryTimeout counts as "timeout" too.
func (x *Collector) StreamMiddleware() sluice.StreamMiddleware {
	return func(next sluice.StreamHandler) sluice.StreamHandler {
		return func(ctx context.Context, ev *sluice.StreamEvent) error {
			ns := x.namespaces.label(ev.Namespace)
			return measured(ctx, x.streamSeconds.WithLabelValues(ns), x.streamHandled, ns,
				func() error { return next(ctx, ev) })
		}
	}
}

// measured calls handle, a delivery's handler under ctx, and observes
// how long it took in took and its result in handled, under label. A
// panic is counted and goes on unrecovered, its stack intact.
func measured(ctx context.Context, took prometheus.Observer, handled *prometheus.CounterVec, label string, handle func() error) (err error) {
	start, returned := time.Now(), false
	defer func() {
		took.Observe(time.Since(start).Seconds())
		result := resultPanic
		if returned {
			result = resultOf(ctx, err)
		}
		handled.WithLabelValues(label, result).Inc()
	}()
	err = handle()
	returned = true
	return err
}

// resultOf classifies the error a handler returned under ctx.
func resultOf(ctx context.Context, err error) string {
	var pe *sluice.PanicError
	switch {
	case err == nil:
		return resultOK
	case errors.As(err, &pe):
		return resultPanic
	case errors.Is(err, sluice.ErrHandlerTimeout), errors.Is(ctx.Err(), context.DeadlineExceeded):
		return resultTimeout
	default:
		return resultError
	}
}
