package sluice

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// Middleware wraps a Processor's handler: it sees every delivery, before
// and after the handler, and may change its context, its error or
// whether the handler runs at all. Logging, metrics, tracing, timeouts
// and panic recovery are middleware (ProcessorOptions.Middleware).
//
// A Middleware takes the library's Handler, whose receiver is a
// *Receiver: it applies to the processors of the library's receivers.
// MessageMiddleware is its portable form, for a processor of any
// receiver (ProcessorOptions.MessageMiddleware).
type Middleware func(Handler) Handler

// MessageMiddleware wraps a Processor's MessageHandler as Middleware
// wraps its Handler, on a processor of any receiver: the library's or the
// network client's (ProcessorOptions.MessageMiddleware). RecoverMessage,
// TimeoutMessage and LoggingMessage are Recover's, Timeout's and
// Logging's.
type MessageMiddleware func(MessageHandler) MessageHandler

// StreamMiddleware wraps a stream consumer's handler, as Middleware does
// a Processor's (StreamProcessorOptions.Middleware).
type StreamMiddleware func(StreamHandler) StreamHandler

// PanicError is a handler's panic, as the error of the failed delivery:
// Recover and RecoverStream return it.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the panicking goroutine's stack, as debug.Stack formats it.
	Stack []byte
}

// Error says that the handler panicked, and with what.
func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// Recover turns a panic of the handler it wraps into a *PanicError. A
// Processor and a StreamProcessor always run their handlers inside one
// (outermost, around every middleware), so that a panic never ends the
// process; place another inside your own middleware for it to see
// panics as errors.
func Recover() Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, r *Receiver, m *ReceivedMessage) error {
			return recovered(func() error { return next(ctx, r, m) })
		}
	}
}

// RecoverMessage is Recover for a MessageHandler.
func RecoverMessage() MessageMiddleware {
	return func(next MessageHandler) MessageHandler {
		return func(ctx context.Context, r MessageReceiver, m *ReceivedMessage) error {
			return recovered(func() error { return next(ctx, r, m) })
		}
	}
}

// recovered calls f and returns its error, or a *PanicError if it
// panicked.
func recovered(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}

// RecoverStream is Recover for a stream consumer's handler.
func RecoverStream() StreamMiddleware {
	return func(next StreamHandler) StreamHandler {
		return func(ctx context.Context, ev *StreamEvent) (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = &PanicError{Value: v, Stack: debug.Stack()}
				}
			}()
			return next(ctx, ev)
		}
	}
}

// ErrHandlerTimeout is the cause (context.Cause) of a handler's context
// that Timeout ended, and is wrapped in the error of a handler that
// failed after it.
var ErrHandlerTimeout = sluicetype.ErrHandlerTimeout

// Timeout bounds each handler call to d: the handler's context ends
// after d, with cause ErrHandlerTimeout, and an error the handler returns
// then is wrapped so that errors.Is(err, ErrHandlerTimeout) holds (the
// message is abandoned, as after any error). The handler must watch its
// context: Timeout does not stop a handler that ignores it. A zero or
// negative d ends the context at once, as context.WithTimeout does, so
// that every delivery fails: give a positive d. TimeoutMessage and
// TimeoutStream do the same for a MessageHandler and a stream consumer's
// handler.
func Timeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, r *Receiver, m *ReceivedMessage) error {
			return timed(ctx, d, func(ctx context.Context) error { return next(ctx, r, m) })
		}
	}
}

// TimeoutMessage is Timeout for a MessageHandler.
func TimeoutMessage(d time.Duration) MessageMiddleware {
	return func(next MessageHandler) MessageHandler {
		return func(ctx context.Context, r MessageReceiver, m *ReceivedMessage) error {
			return timed(ctx, d, func(ctx context.Context) error { return next(ctx, r, m) })
		}
	}
}

// TimeoutStream is Timeout for a stream consumer's handler: each
// delivery attempt's context ends after d, with cause ErrHandlerTimeout,
// and an error the handler returns then wraps it; the attempt fails, and
// the event is retried as after any error. ConsumerOptions.DeliveryTimeout
// still bounds each delivery: the earlier of the two ends the context,
// and only TimeoutStream's has cause ErrHandlerTimeout.
func TimeoutStream(d time.Duration) StreamMiddleware {
	return func(next StreamHandler) StreamHandler {
		return func(ctx context.Context, ev *StreamEvent) error {
			return timed(ctx, d, func(ctx context.Context) error { return next(ctx, ev) })
		}
	}
}

// timed calls f with a context that ends after d, with cause
// ErrHandlerTimeout, and wraps the error f returns then.
func timed(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeoutCause(ctx, d, ErrHandlerTimeout)
	defer cancel()
	err := f(ctx)
	if err != nil && errors.Is(context.Cause(ctx), ErrHandlerTimeout) && !errors.Is(err, ErrHandlerTimeout) {
		return fmt.Errorf("%w after %v: %w", ErrHandlerTimeout, d, err)
	}
	return err
}

// chain wraps h in mms, then in mws (the library's, which need lib, the
// library's receiver of the processor), the first of each list
// outermost, and the whole inside RecoverMessage. A nil middleware, or
// one that returns a nil handler, is refused.
func chain(h MessageHandler, lib *Receiver, mws []Middleware, mms []MessageMiddleware) (MessageHandler, error) {
	for i := len(mms) - 1; i >= 0; i-- {
		if mms[i] == nil {
			return nil, fmt.Errorf("message middleware %d is nil: %w", i, ErrInvalidArgument)
		}
		if h = mms[i](h); h == nil {
			return nil, fmt.Errorf("message middleware %d returned a nil handler: %w", i, ErrInvalidArgument)
		}
	}
	if len(mws) > 0 {
		if lib == nil {
			return nil, fmt.Errorf("middleware takes the library's *sluice.Receiver; on another receiver, give MessageMiddleware: %w", ErrInvalidArgument)
		}
		outer, err := wrap(fromMessageHandler(h, lib), mws)
		if err != nil {
			return nil, err
		}
		h = fromHandler(outer, lib)
	}
	return RecoverMessage()(h), nil
}

// fromMessageHandler adapts a MessageHandler to the library's Handler,
// giving it the *Receiver the middleware passed on, or else lib.
func fromMessageHandler(h MessageHandler, lib *Receiver) Handler {
	return func(ctx context.Context, r *Receiver, m *ReceivedMessage) error {
		if r == nil {
			r = lib
		}
		return h(ctx, r, m)
	}
}

// wrap applies mws to h, the first outermost. A nil middleware, or one
// that returns a nil handler, is refused.
func wrap(h Handler, mws []Middleware) (Handler, error) {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] == nil {
			return nil, fmt.Errorf("middleware %d is nil: %w", i, ErrInvalidArgument)
		}
		if h = mws[i](h); h == nil {
			return nil, fmt.Errorf("middleware %d returned a nil handler: %w", i, ErrInvalidArgument)
		}
	}
	return h, nil
}

// WrapStream applies mws to h, the first outermost, inside RecoverStream:
// what a StreamProcessor does to each consumer's handler, for a processor
// of another kind (the network client's) to do alike. A nil middleware,
// or one that returns a nil handler, is refused with ErrInvalidArgument.
func WrapStream(h StreamHandler, mws []StreamMiddleware) (StreamHandler, error) {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] == nil {
			return nil, fmt.Errorf("middleware %d is nil: %w", i, ErrInvalidArgument)
		}
		if h = mws[i](h); h == nil {
			return nil, fmt.Errorf("middleware %d returned a nil handler: %w", i, ErrInvalidArgument)
		}
	}
	return RecoverStream()(h), nil
}
