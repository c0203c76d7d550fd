package sluice

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/backoff"
)

// RetryPolicy says how long a Processor keeps a message hidden after its
// handler failed, before it is delivered again (ProcessorOptions.Retry).
type RetryPolicy interface {
	// RetryDelay returns the delay for a message whose delivery number
	// deliveryCount (1 for the first) failed with err. 0 or a negative
	// delay delivers it again at once.
	RetryDelay(deliveryCount int, err error) time.Duration
}

// RetryFunc adapts a function to RetryPolicy.
type RetryFunc func(deliveryCount int, err error) time.Duration

// RetryDelay returns f(deliveryCount, err).
func (f RetryFunc) RetryDelay(deliveryCount int, err error) time.Duration {
	return f(deliveryCount, err)
}

// ExponentialBackoff is a RetryPolicy whose delay grows with the delivery
// count: Initial after the first failed delivery, times Multiplier after
// each further one, capped at Max. With Jitter the delay is drawn
// uniformly from [d/2, d] of that d, so that messages that failed
// together do not all come back together, while none comes back sooner
// than half its step.
//
// Zero Multiplier means 2; Max 0 means no cap but Forever. NewProcessor
// refuses a negative Initial or Max, a Max below Initial and a
// Multiplier below 1 with ErrInvalidArgument.
type ExponentialBackoff struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
	Jitter     bool
}

// RetryDelay returns the delay after delivery deliveryCount failed.
func (b ExponentialBackoff) RetryDelay(deliveryCount int, _ error) time.Duration {
	return backoff.Policy(b).Delay(deliveryCount)
}

// validate refuses settings that do not describe a growing delay.
func (b ExponentialBackoff) validate() error {
	if err := checkDurations(namedDuration{"initial delay", b.Initial}, namedDuration{"max delay", b.Max}); err != nil {
		return err
	}
	if b.Max != 0 && b.Max < b.Initial {
		return fmt.Errorf("max delay %v below initial delay %v: %w", b.Max, b.Initial, ErrInvalidArgument)
	}
	if b.Multiplier != 0 && !(b.Multiplier >= 1 && b.Multiplier <= math.MaxFloat64) {
		return fmt.Errorf("multiplier %v: must be at least 1 and finite (0: %d): %w", b.Multiplier, backoff.DefaultMultiplier, ErrInvalidArgument)
	}
	return nil
}

// retryAfterError is a handler's error that names its retry delay.
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("retry after %v", e.delay)
	}
	return fmt.Sprintf("%v (retry after %v)", e.err, e.delay)
}

func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps a handler's error with the delay after which the
// Processor delivers the message again, in place of what
// ProcessorOptions.Retry would choose: for a handler that knows better,
// such as one told by a rate limit when to come back. err may be nil
// (the handler has no error to report, only a wish to see the message
// later). A negative d counts as 0. errors.Is and errors.As see err
// through the wrapper. On the message's last allowed delivery it is
// dead-lettered at once all the same.
func RetryAfter(err error, d time.Duration) error {
	return &retryAfterError{err: err, delay: max(d, 0)}
}

// retryDelay is how long the processor keeps a message hidden after its
// handler failed with err on delivery deliveryCount.
func retryDelay(p RetryPolicy, deliveryCount int, err error) time.Duration {
	if ra, ok := errors.AsType[*retryAfterError](err); ok {
		return ra.delay
	}
	if p == nil {
		return 0
	}
	return max(p.RetryDelay(deliveryCount, err), 0)
}
