package sluice

import (
	"context"
	"log/slog"
	"time"
)

// Logging logs each delivery of a Processor as its handler returns: at
// debug level when it succeeded, at warning level with the error when it
// failed (ProcessorOptions.OnError still receives the error). Each
// record names the entity, the message's sequence number, message id and
// delivery count, and how long the handler took. A nil log logs to
// slog.Default().
func Logging(log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, r *Receiver, m *ReceivedMessage) error {
			return logged(ctx, log, r, m, func() error { return next(ctx, r, m) })
		}
	}
}

// LoggingMessage is Logging for a MessageHandler.
func LoggingMessage(log *slog.Logger) MessageMiddleware {
	return func(next MessageHandler) MessageHandler {
		return func(ctx context.Context, r MessageReceiver, m *ReceivedMessage) error {
			return logged(ctx, log, r, m, func() error { return next(ctx, r, m) })
		}
	}
}

// logged calls f, the handler of m received through r, and logs the
// delivery as Logging does.
func logged(ctx context.Context, log *slog.Logger, r MessageReceiver, m *ReceivedMessage, f func() error) error {
	start := time.Now()
	err := f()
	if l, level, ok := deliveryLog(ctx, log, err); ok {
		l.LogAttrs(ctx, level, "sluice: delivery", slog.String("entity", r.Entity()),
			slog.Int64("sequence_number", m.SequenceNumber), slog.String("message_id", m.MessageID),
			slog.Int("delivery_count", m.DeliveryCount), slog.Duration("took", time.Since(start)), errAttr(err))
	}
	return err
}

// LoggingStream is Logging for a stream consumer's handler: each record
// names the subscription, the stream, the event's position and attempt.
func LoggingStream(log *slog.Logger) StreamMiddleware {
	return func(next StreamHandler) StreamHandler {
		return func(ctx context.Context, ev *StreamEvent) error {
			start := time.Now()
			err := next(ctx, ev)
			if l, level, ok := deliveryLog(ctx, log, err); ok {
				l.LogAttrs(ctx, level, "sluice: stream delivery", slog.String("subscription", ev.Subscription),
					slog.String("namespace", ev.Namespace), slog.String("key", ev.Key), slog.Int64("position", ev.Position),
					slog.Int("attempt", ev.Attempt), slog.Duration("took", time.Since(start)), errAttr(err))
			}
			return err
		}
	}
}

// deliveryLog returns the logger and level of a delivery that ended with
// err (debug on success, warning on failure), and whether that level is
// enabled: a disabled one costs no record.
func deliveryLog(ctx context.Context, log *slog.Logger, err error) (*slog.Logger, slog.Level, bool) {
	if log == nil {
		log = slog.Default()
	}
	level := slog.LevelDebug
	if err != nil {
		level = slog.LevelWarn
	}
	return log, level, log.Enabled(ctx, level)
}

// errAttr is err as a record's attribute; an empty one (which slog
// leaves out) on success.
func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.Any("err", err)
}
