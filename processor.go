package sluice

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/backoff"
)

// Handler processes one message. Returning nil completes it; an error (or
// a panic) abandons it, so it is delivered again, at once or after the
// delay ProcessorOptions.Retry or RetryAfter gives. A handler may settle the
// message itself through r (dead-letter it, defer it); the processor then
// leaves it alone. ctx ends when the message's lock is lost or the
// processor is stopped without waiting.
type Handler func(ctx context.Context, r *Receiver, m *ReceivedMessage) error

// ProcessorOptions tune a processor. Zero values take the defaults.
type ProcessorOptions struct {
	// MaxConcurrent bounds the handlers running at once (default 1).
	MaxConcurrent int
	// MaxAutoLockRenewal is how long the processor keeps renewing the
	// lock of a message whose handler is still running (default 5 min;
	// Forever: as long as the handler runs; negative: never, the one
	// duration where negative has a meaning).
	MaxAutoLockRenewal time.Duration
	// Retry chooses how long a message whose handler failed stays hidden
	// before it is delivered again (ExponentialBackoff, RetryFunc); an
	// error wrapped by RetryAfter chooses for itself. nil: at once, as
	// Service Bus abandons. A message on its last allowed delivery is
	// dead-lettered at once whatever the delay.
	Retry RetryPolicy
	// OnError receives what the processor cannot return: failed receives
	// (retried after a pause), handler errors, settles that failed and
	// locks that were lost. nil logs them at warning level.
	OnError func(error)
	// Middleware wraps the handler, the first outermost: each sees every
	// delivery (see Middleware). The processor runs the whole chain inside
	// Recover, so that a panic, in the handler or in a middleware, fails
	// the delivery (the message is abandoned) and never ends the process.
	Middleware []Middleware
}

// DefaultMaxAutoLockRenewal is ProcessorOptions.MaxAutoLockRenewal's
// default.
const DefaultMaxAutoLockRenewal = 5 * time.Minute

// receivePause spaces the processor's receives after one failed.
var receivePause = backoff.Policy{Initial: minPoll, Max: 5 * time.Second}

// settleTimeout bounds the settle after a handler, which runs even while
// the processor stops.
const settleTimeout = 30 * time.Second

// Processor runs a handler over the messages of a queue, received in
// PeekLock mode, with bounded concurrency and automatic lock renewal.
type Processor struct {
	r    *Receiver
	h    Handler // the handler wrapped in its middleware
	opts ProcessorOptions

	mu       sync.Mutex
	started  bool
	stopRecv context.CancelFunc // stops receiving
	stopAll  context.CancelFunc // also ends handlers' contexts
	loopDone chan struct{}
	handlers sync.WaitGroup
}

// NewProcessor returns a processor for a queue; Start runs it.
func (c *Client) NewProcessor(queue string, h Handler, opts *ProcessorOptions) (*Processor, error) {
	if h == nil {
		return nil, errInvalid("new processor", "nil handler")
	}
	r, err := c.NewReceiver(queue, nil)
	if err != nil {
		return nil, err
	}
	var o ProcessorOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = 1
	}
	if o.MaxConcurrent < 0 || o.MaxConcurrent > c.limits.MaxBatch {
		return nil, errInvalid("new processor", "max concurrent %d: must be between 1 and %d", o.MaxConcurrent, c.limits.MaxBatch)
	}
	if v, ok := o.Retry.(interface{ validate() error }); ok {
		if err := v.validate(); err != nil {
			return nil, fmt.Errorf("sluice: new processor: retry: %w", err)
		}
	}
	if o.MaxAutoLockRenewal == 0 {
		o.MaxAutoLockRenewal = DefaultMaxAutoLockRenewal
	}
	if o.OnError == nil {
		log := c.log
		o.OnError = func(err error) { log.Warn("sluice: processor", "queue", queue, "err", err) }
	}
	wrapped, err := wrap(h, o.Middleware)
	if err != nil {
		return nil, fmt.Errorf("sluice: new processor: %w", err)
	}
	return &Processor{r: r, h: wrapped, opts: o}, nil
}

// Start starts receiving and handling messages in the background. It
// fails if the processor was started before.
func (p *Processor) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errInvalid("start processor", "already started")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sluice: start processor: %w", err)
	}
	p.started = true
	all, stopAll := context.WithCancel(context.WithoutCancel(ctx))
	recv, stopRecv := context.WithCancel(all)
	p.stopAll, p.stopRecv = stopAll, stopRecv
	p.loopDone = make(chan struct{})
	go p.loop(recv, all)
	return nil
}

// Stop stops receiving and waits for running handlers to finish. If ctx
// ends first, it ends the handlers' contexts, waits for them to return
// and returns ctx's error; the messages of handlers that then fail go back
// without counting a delivery (a shutdown is not a failed delivery) or,
// if settling fails, are delivered again when their locks end. Stop is
// idempotent.
func (p *Processor) Stop(ctx context.Context) error {
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if !started {
		return nil
	}
	p.stopRecv()
	done := make(chan struct{})
	go func() {
		<-p.loopDone
		p.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		p.stopAll()
		return nil
	case <-ctx.Done():
		p.stopAll()
		<-done
		return fmt.Errorf("sluice: stop processor: %w", ctx.Err())
	}
}

// loop receives as many messages as there are free handler slots and
// starts a handler for each.
func (p *Processor) loop(recv, all context.Context) {
	defer close(p.loopDone)
	slots := make(chan struct{}, p.opts.MaxConcurrent)
	failures := 0
	for {
		select {
		case slots <- struct{}{}:
		case <-recv.Done():
			return
		}
		n := 1
	more:
		for n < p.opts.MaxConcurrent {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		msgs, err := p.r.Receive(recv, n)
		for range n - len(msgs) {
			<-slots
		}
		for _, m := range msgs {
			p.handlers.Add(1)
			go func() {
				defer func() { <-slots; p.handlers.Done() }()
				p.handle(all, m)
			}()
		}
		if err == nil {
			failures = 0
			continue
		}
		if recv.Err() != nil || errors.Is(err, ErrClosed) {
			return
		}
		p.opts.OnError(err)
		failures++
		_ = backoff.Wait(recv, receivePause.Delay(failures))
	}
}

// handle runs the handler on one message while renewing its lock, then
// completes or abandons it unless the handler settled it.
func (p *Processor) handle(all context.Context, m *ReceivedMessage) {
	ctx, cancel := context.WithCancelCause(all)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		p.renewLoop(ctx, cancel, m)
	}()
	err := p.h(ctx, p.r, m)
	lost := errors.Is(context.Cause(ctx), ErrLockLost)
	cancel(nil)
	<-renewed
	if m.settled.Load() {
		return
	}
	sctx, done := context.WithTimeout(context.WithoutCancel(all), settleTimeout)
	defer done()
	if err != nil && all.Err() != nil {
		// Stop ended the handler: a shutdown, not a failed delivery.
		// The message goes back without counting one.
		if serr := p.r.release(sctx, m); serr != nil && !lost {
			p.opts.OnError(serr)
		}
		return
	}
	if err != nil {
		p.opts.OnError(fmt.Errorf("sluice: handler of message %d: %w", m.SequenceNumber, err))
		delay := retryDelay(p.opts.Retry, m.DeliveryCount, err)
		if serr := p.r.Abandon(sctx, m, &AbandonOptions{Delay: delay}); serr != nil && !lost {
			p.opts.OnError(serr)
		}
		return
	}
	if m.settledTx.Load() {
		return // the handler's transaction settled it, or rolled back
	}
	if serr := p.r.Complete(sctx, m); serr != nil {
		p.opts.OnError(serr)
	}
}

// renewLoop renews m's lock every half lock duration until ctx ends or
// MaxAutoLockRenewal has passed. When the lock is lost it ends the
// handler's context with ErrLockLost.
func (p *Processor) renewLoop(ctx context.Context, cancel context.CancelCauseFunc, m *ReceivedMessage) {
	if p.opts.MaxAutoLockRenewal < 0 {
		return
	}
	deadline := time.Now().Add(p.opts.MaxAutoLockRenewal)
	var props QueueProperties
	for {
		var err error
		if props, err = p.r.c.properties(ctx, p.r.queue); err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		p.opts.OnError(fmt.Errorf("sluice: renew lock of message %d: %w", m.SequenceNumber, err))
		if backoff.Wait(ctx, time.Second) != nil {
			return
		}
	}
	every := props.LockDuration / 2
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Now().After(deadline) || m.settled.Load() || m.settledTx.Load() {
			return
		}
		_, err := p.r.renew(ctx, m)
		switch {
		case err == nil:
			t.Reset(every)
		case m.settled.Load():
			return // settled by the handler meanwhile
		case errors.Is(err, ErrLockLost):
			p.r.noteLockLost(err)
			p.opts.OnError(err)
			cancel(err)
			return
		case ctx.Err() != nil:
			return
		default:
			p.opts.OnError(err)
			t.Reset(time.Second) // try again while the lock lasts
		}
	}
}
