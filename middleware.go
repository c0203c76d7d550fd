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
type Middleware func(Handler) Handler

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
		return func(ctx context.Context, r *Receiver, m *ReceivedMessage) (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = &PanicError{Value: v, Stack: debug.Stack()}
				}
			}()
			return next(ctx, r, m)
		}
	}
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
// that every delivery fails: give a positive d. (A stream consumer's
// deliveries are bounded by ConsumerOptions.DeliveryTimeout.)
func Timeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, r *Receiver, m *ReceivedMessage) error {
			ctx, cancel := context.WithTimeoutCause(ctx, d, ErrHandlerTimeout)
			defer cancel()
			err := next(ctx, r, m)
			if err != nil && errors.Is(context.Cause(ctx), ErrHandlerTimeout) && !errors.Is(err, ErrHandlerTimeout) {
				return fmt.Errorf("%w after %v: %w", ErrHandlerTimeout, d, err)
			}
			return err
		}
	}
}

// wrap applies mws to h, the first outermost, inside Recover. A nil
// middleware, or one that returns a nil handler, is refused.
func wrap(h Handler, mws []Middleware) (Handler, error) {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] == nil {
			return nil, fmt.Errorf("middleware %d is nil: %w", i, ErrInvalidArgument)
		}
		if h = mws[i](h); h == nil {
			return nil, fmt.Errorf("middleware %d returned a nil handler: %w", i, ErrInvalidArgument)
		}
	}
	return Recover()(h), nil
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
