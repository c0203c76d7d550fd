package stream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/backoff"
	"github.com/sluicehq/sluice/sluicetype"
)

// Event is one event delivered to a handler.
type Event struct {
	// Namespace and Key name the stream.
	Namespace string
	Key       string
	// Partition and Position place the event in the partition log.
	Partition int32
	Position  int64
	// Subscription is the handle of the subscription it is delivered to.
	Subscription string
	// Attempt counts deliveries of this event to this subscription,
	// from 1.
	Attempt    int
	Properties map[string]string
	Body       []byte
	AppendedAt time.Time
}

// Handler handles one event. It is called for one event of a stream at a
// time; an error is a failed delivery, retried with backoff. The node
// recovers no panic: its user (package sluice) registers handlers
// wrapped in a recovering middleware, which turns a panic into an error.
// It should return when ctx ends (the delivery time is bounded through
// it): a handler that outlives its attempt holds its stream until it
// returns, since a stream's deliveries never overlap.
type Handler func(ctx context.Context, ev *Event) error

// FailurePolicy says what happens to an event whose deliveries all
// failed.
type FailurePolicy int

const (
	// Park stores the event with its error among the subscription's
	// parked events, to list and replay later, and moves on.
	Park FailurePolicy = iota
	// Fault stops the subscription: it delivers nothing more until its
	// fault is cleared, and records why.
	Fault
)

func (p FailurePolicy) String() string {
	if p == Fault {
		return "fault"
	}
	return "park"
}

// Consumer is a named handler registered on a node, with how its
// deliveries run.
type Consumer struct {
	Name    string
	Handler Handler
	// Namespace, when set, subscribes the consumer to every stream of the
	// namespace (an implicit subscription).
	Namespace string
	// MaxConcurrency bounds the streams handled at once per subscription
	// and partition (default 8).
	MaxConcurrency int
	// DeliveryTimeout bounds one delivery (default 1 min).
	DeliveryTimeout time.Duration
	// MaxAttempts bounds the deliveries of one event (default 5).
	MaxAttempts int
	// RetryBackoff is the wait after the first failure, doubled after each
	// one up to MaxRetryBackoff (defaults 100 ms and 10 s).
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// OnFailure applies once an event's attempts are used up (default
	// Park).
	OnFailure FailurePolicy
}

// Consumer defaults.
const (
	DefaultMaxConcurrency  = 8
	DefaultDeliveryTimeout = time.Minute
	DefaultMaxAttempts     = 5
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultMaxRetryBackoff = 10 * time.Second
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Consumer) WithDefaults() Consumer {
	if c.MaxConcurrency <= 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.DeliveryTimeout <= 0 {
		c.DeliveryTimeout = DefaultDeliveryTimeout
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxRetryBackoff <= 0 {
		c.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	return c
}

// errDeliveryTimeout reports a handler that did not return within its
// delivery time.
var errDeliveryTimeout = errors.New("delivery timed out")

// call runs one delivery attempt in the calling goroutine, bounded by
// DeliveryTimeout through its context. A handler that outlives its
// attempt (it ignores the context) is waited for, since the stream's
// next delivery must not overlap it; a stopping agent walks away from it
// (see agent.shutdown), which d's count of handlers lets it tell.
func (c *Consumer) call(ctx context.Context, ev *Event, d *inDelivery) (err error) {
	ctx, cancel := context.WithTimeout(ctx, c.DeliveryTimeout)
	defer cancel()
	d.enter()
	defer func() {
		d.leave()
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w after %v: %w", errDeliveryTimeout, c.DeliveryTimeout, err)
		}
	}()
	return c.Handler(ctx, ev)
}

// deliver delivers an event until it succeeds or its attempts are used
// up, waiting with backoff between attempts. It returns the number of
// attempts and the last error; ctx ending stops it, and so does may,
// when set, returning false before an attempt (stopped is true: the
// event is neither delivered nor given up on). d is call's.
func (c *Consumer) deliver(ctx context.Context, ev Event, may func() bool, d *inDelivery) (attempts int, stopped bool, err error) {
	retry := backoff.Policy{Initial: c.RetryBackoff, Max: c.MaxRetryBackoff}
	for attempts = 1; ; attempts++ {
		if may != nil && !may() {
			return attempts - 1, true, errLeaseLapsed
		}
		e := ev
		e.Attempt = attempts
		if err = c.call(ctx, &e, d); err == nil {
			return attempts, false, nil
		}
		if ctx.Err() != nil {
			return attempts, true, err
		}
		if attempts >= c.MaxAttempts {
			return attempts, false, err
		}
		if backoff.Wait(ctx, retry.Delay(attempts)) != nil {
			return attempts, true, err
		}
	}
}

// inDelivery counts an agent's delivery goroutines, and those of them
// inside a handler, so that a stop can tell when all that are left are
// handlers that ignore their context (see agent.shutdown). changed is
// poked each time a count moves that such a wait looks at. It is safe
// for concurrent use.
type inDelivery struct {
	goroutines, handlers atomic.Int64
	changed              chan struct{}
}

func newInDelivery() *inDelivery { return &inDelivery{changed: make(chan struct{}, 1)} }

func (d *inDelivery) start() { d.goroutines.Add(1) }
func (d *inDelivery) end()   { d.goroutines.Add(-1); d.poke() }
func (d *inDelivery) enter() { d.handlers.Add(1); d.poke() }
func (d *inDelivery) leave() { d.handlers.Add(-1); d.poke() }

func (d *inDelivery) poke() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// onlyHandlers reports whether every delivery goroutine left is inside
// a handler (or none is left). It holds once no delivery starts any more
// (a stop): the goroutines' count then only falls, and is read first, so
// when the two counts agree they agreed at once.
func (d *inDelivery) onlyHandlers() bool { return d.goroutines.Load() == d.handlers.Load() }

// EventOf makes the event a record of a partition is delivered as to a
// subscription.
func EventOf(r *sluicetype.Record, partition int32, sub string) Event {
	return Event{Namespace: r.Namespace, Key: r.Key, Partition: partition, Position: r.Position,
		Subscription: sub, Properties: r.Properties, Body: r.Payload, AppendedAt: r.AppendedAt}
}
