package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/backoff"
	"github.com/sluicehq/sluice/store"
)

// Handler processes one message. Returning nil completes it (in a batch,
// committed after the handler returned: see Processor); an error (or
// a panic) abandons it, so it is delivered again, at once or after the
// delay ProcessorOptions.Retry or RetryAfter gives. A handler may settle the
// message itself through r (dead-letter it, defer it, or settle it in a
// transaction with CompleteTx and its neighbours); the processor then
// leaves it alone. ctx ends when the message's lock is lost or the
// processor is stopped without waiting. Client.NewProcessor takes one;
// MessageHandler is its portable form.
type Handler func(ctx context.Context, r *Receiver, m *ReceivedMessage) error

// MessageHandler is Handler's portable form: it processes one message
// received through any MessageReceiver, the library's or the network
// client's, with the same outcomes (nil completes, an error or a panic
// abandons, a message the handler settled through r is left alone).
// NewMessageProcessor and both clients' MessageProcessor take one, so
// that the same handler runs on a database and through a server.
type MessageHandler func(ctx context.Context, r MessageReceiver, m *ReceivedMessage) error

// ProcessorOptions tune a processor. Zero values take the defaults.
type ProcessorOptions struct {
	// MaxConcurrent bounds the handlers running at once (default 1).
	MaxConcurrent int
	// PrefetchCount is how many messages the processor keeps received
	// and locked beyond its handlers (Service Bus's name; default 0: no
	// more than MaxConcurrent), so that a handler that returns takes the
	// next one at once, without a round trip to the database or server.
	// A prefetched message's lock runs while it waits: the processor
	// renews it as a running handler's, within MaxAutoLockRenewal counted
	// from its receipt, and releases it (abandons it, through a receiver
	// that cannot release) before its lock ends when it may not renew
	// it; no handler is given a message whose lock ended, and a handler
	// sees its LockedUntil as last renewed. With MaxAutoLockRenewal
	// negative, a prefetched message is released once half of its lock
	// passed: keep the lock duration well above the time the handlers
	// take to reach it (Service Bus's sizing rule). Negative is
	// refused with ErrInvalidArgument, as is a MaxConcurrent+PrefetchCount
	// beyond the receiver's batch limit (Options.Limits.MaxBatch; 1000
	// through another receiver).
	PrefetchCount int
	// MaxAutoLockRenewal is how long the processor keeps renewing the
	// lock of a message whose handler is still running (default 5 min;
	// Forever: as long as the handler runs; negative: never, the one
	// duration where negative has a meaning). It renews every half of
	// the time the lock had left when it was received or last renewed.
	MaxAutoLockRenewal time.Duration
	// Retry chooses how long a message whose handler failed stays hidden
	// before it is delivered again (ExponentialBackoff, RetryFunc); an
	// error wrapped by RetryAfter chooses for itself. nil: at once, as
	// Service Bus abandons. A message on its last allowed delivery is
	// dead-lettered at once whatever the delay.
	Retry RetryPolicy
	// OnError receives what the processor cannot return: failed receives
	// (retried after a pause), handler errors, settles that failed and
	// locks that were lost. nil logs them at warning level (to the
	// library client's logger, or slog.Default through another receiver).
	OnError func(error)
	// Middleware wraps the handler, the first outermost: each sees every
	// delivery (see Middleware). The processor runs the whole chain inside
	// Recover, so that a panic, in the handler or in a middleware, fails
	// the delivery (the message is abandoned) and never ends the process.
	// A Middleware takes the library's *Receiver: a processor on another
	// receiver (the network client's) refuses it with ErrInvalidArgument;
	// give it MessageMiddleware.
	Middleware []Middleware
	// MessageMiddleware wraps the handler as Middleware does, inside it
	// (Middleware's chain sees every delivery first), on a processor of
	// any receiver (see MessageMiddleware).
	MessageMiddleware []MessageMiddleware
}

// DefaultMaxAutoLockRenewal is ProcessorOptions.MaxAutoLockRenewal's
// default.
const DefaultMaxAutoLockRenewal = 5 * time.Minute

// receivePause spaces the processor's receives after one failed.
var receivePause = backoff.Policy{Initial: minPoll, Max: 5 * time.Second}

// settleTimeout bounds the settle after a handler, which runs even while
// the processor stops.
const settleTimeout = 30 * time.Second

// minRenewal is the shortest pause between two renewals of a lock, for a
// lock that seems to have (almost) ended when it was received or renewed
// (a clock of this process behind the one that locked it).
const minRenewal = 100 * time.Millisecond

// renewRetry is the longest pause before a renewal that failed, for
// another reason than a lost lock, is tried again.
const renewRetry = time.Second

// Processor runs a handler over the messages of a queue or subscription,
// received in PeekLock mode through a MessageReceiver, with bounded
// concurrency and automatic lock renewal. The library's and the network
// client's processors are this same type.
//
// It holds up to MaxConcurrent+PrefetchCount messages received and not
// yet handled (waiting for a handler, or running), and receives in
// batches: once at least half of that budget is free, it asks for
// everything missing in one Receive. A handler that returns takes the
// next waiting message at once.
//
// When a completion is durable: a handler that returns nil frees its slot
// at once, and its message joins the next CompleteBatch (the first
// completion that waits goes at once; those that come while a batch is
// in flight go together in the next one). The completion is durable when
// that batch commits, after the handler returned, not before; a failure
// (the lock was lost, or the database's error) goes to OnError, and the
// message is then delivered again, as when a single Complete fails. A
// process that ends between a handler's return and that commit gets the
// message again when its lock ends: at-least-once, as before, with a
// window one commit longer. Stop returns once every completion was
// committed or reported. Abandons (a handler's error) and a handler's own
// settlements are sent one by one, before the handler's slot is free.
type Processor struct {
	r    MessageReceiver // receives, settles and renews
	lib  *Receiver       // r when it is the library's, else nil
	hr   MessageReceiver // what the handler is given (see handlerReceiver)
	h    MessageHandler  // the handler wrapped in its middleware
	opts ProcessorOptions

	mu       sync.Mutex
	started  bool
	stopRecv context.CancelFunc // stops receiving
	stopAll  context.CancelFunc // also ends handlers' contexts
	ended    chan struct{}      // closed when all is settled and every goroutine ended

	ready       chan *held    // received, waiting for a handler
	held        atomic.Int64  // received and not handled (released, lost) yet
	completing  atomic.Int64  // handled, their completion not committed yet
	freed       chan struct{} // signalled when held falls
	completions *completer
	keepers     sync.WaitGroup // each held message's keeper

	// onFailure, when set, runs when a handler fails, before its message
	// is abandoned (a session processor's ordered sessions: see
	// SessionProcessor).
	onFailure func()
}

// NewProcessor returns a processor for a queue; Start runs it. Its handler
// is given the processor's *Receiver, for what only the library's can do
// (CompleteTx and its neighbours); MessageProcessor takes the portable
// MessageHandler.
func (c *Client) NewProcessor(queue string, h Handler, opts *ProcessorOptions) (*Processor, error) {
	if h == nil {
		return nil, errInvalid("new processor", "nil handler")
	}
	r, err := c.NewReceiver(queue, nil)
	if err != nil {
		return nil, err
	}
	return newProcessor(r, fromHandler(h, r), opts)
}

// MessageProcessor returns a processor for a queue (or a subscription),
// as NewProcessor does, that runs a MessageHandler: the factory of
// Messaging, which the network client implements too.
func (c *Client) MessageProcessor(entity string, h MessageHandler, opts *ProcessorOptions) (*Processor, error) {
	if h == nil {
		return nil, errInvalid("new processor", "nil handler")
	}
	r, err := c.NewReceiver(entity, nil)
	if err != nil {
		return nil, err
	}
	return newProcessor(r, h, opts)
}

// NewMessageProcessor returns a processor of the messages r receives,
// which must receive in PeekLock mode: the library's *Receiver or the
// network client's. Start runs it. Through a receiver other than the
// library's, the handler is given a MessageReceiver that forwards to r
// and records what the handler settled (settle through it, not through
// another receiver, for the processor to leave such a message alone),
// MaxConcurrent+PrefetchCount is at most 1000 (the server's default
// batch limit), and a handler that Stop ended, or a prefetched message
// let go, has its message abandoned, counting a delivery (the API has no
// release).
func NewMessageProcessor(r MessageReceiver, h MessageHandler, opts *ProcessorOptions) (*Processor, error) {
	switch {
	case r == nil:
		return nil, errInvalid("new processor", "nil receiver")
	case h == nil:
		return nil, errInvalid("new processor", "nil handler")
	}
	if lib, ok := r.(*Receiver); ok && lib.mode != PeekLock {
		return nil, errInvalid("new processor", "the receiver must receive in PeekLock mode")
	}
	return newProcessor(r, h, opts)
}

// fromHandler adapts the library's Handler to a MessageHandler that gives
// it the *Receiver its middleware passed on, or else r.
func fromHandler(h Handler, r *Receiver) MessageHandler {
	return func(ctx context.Context, mr MessageReceiver, m *ReceivedMessage) error {
		if lr, ok := mr.(*Receiver); ok && lr != nil {
			return h(ctx, lr, m)
		}
		return h(ctx, r, m)
	}
}

// newProcessor checks opts, fills in their defaults and wraps h in its
// middleware.
func newProcessor(r MessageReceiver, h MessageHandler, opts *ProcessorOptions) (*Processor, error) {
	var o ProcessorOptions
	if opts != nil {
		o = *opts
	}
	lib, _ := r.(*Receiver)
	if err := checkOptions(&o, batchLimit(lib)); err != nil {
		return nil, err
	}
	if o.OnError == nil {
		log := slog.Default()
		if lib != nil {
			log = lib.c.log
		}
		entity := r.Entity()
		o.OnError = func(err error) { log.Warn("sluice: processor", "entity", entity, "err", err) }
	}
	wrapped, err := chain(h, lib, o.Middleware, o.MessageMiddleware)
	if err != nil {
		return nil, fmt.Errorf("sluice: new processor: %w", err)
	}
	return &Processor{r: r, lib: lib, hr: handlerReceiver(r, lib), h: wrapped, opts: o}, nil
}

// batchLimit is the most messages one call of the receiver takes: the
// library client's batch limit, or the server's default.
func batchLimit(lib *Receiver) int {
	if lib != nil {
		return lib.c.limits.MaxBatch
	}
	return store.DefaultMaxBatch
}

// checkOptions checks o and fills in its defaults; maxConcurrent is the
// most messages one receive may take (batchLimit).
func checkOptions(o *ProcessorOptions, maxConcurrent int) error {
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = 1
	}
	if o.MaxConcurrent < 0 || o.MaxConcurrent > maxConcurrent {
		return errInvalid("new processor", "max concurrent %d: must be between 1 and %d", o.MaxConcurrent, maxConcurrent)
	}
	if o.PrefetchCount < 0 || o.PrefetchCount > maxConcurrent-o.MaxConcurrent {
		return errInvalid("new processor", "prefetch count %d: must be between 0 and %d (with max concurrent %d, the two together at most %d)",
			o.PrefetchCount, maxConcurrent-o.MaxConcurrent, o.MaxConcurrent, maxConcurrent)
	}
	if v, ok := o.Retry.(interface{ validate() error }); ok {
		if err := v.validate(); err != nil {
			return fmt.Errorf("sluice: new processor: retry: %w", err)
		}
	}
	if o.MaxAutoLockRenewal == 0 {
		o.MaxAutoLockRenewal = DefaultMaxAutoLockRenewal
	}
	return nil
}

// handlerReceiver is the receiver a processor gives its handler: the
// library's itself, which marks the messages it settles, or a
// settleTracker over another.
func handlerReceiver(r MessageReceiver, lib *Receiver) MessageReceiver {
	if lib != nil {
		return lib
	}
	return settleTracker{r}
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
	p.ready = make(chan *held, p.opts.MaxConcurrent+p.opts.PrefetchCount)
	p.freed = make(chan struct{}, 1)
	p.completions = newCompleter(p, all)
	p.ended = make(chan struct{})
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		p.loop(recv, all)
	}()
	var workers sync.WaitGroup
	for range p.opts.MaxConcurrent {
		workers.Add(1)
		go func() {
			defer workers.Done()
			p.work(recv, all)
		}()
	}
	go p.completions.run()
	go func() {
		defer close(p.ended)
		<-loopDone
		p.releaseWaiting(all)
		workers.Wait()
		p.completions.close()
		p.keepers.Wait()
	}()
	return nil
}

// stopReceiving stops the processor's receiving, as Stop does first,
// without waiting; it may be called once Start has begun, even from a
// handler (it then waits for Start to return).
func (p *Processor) stopReceiving() {
	p.mu.Lock()
	stop := p.stopRecv
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Stop stops receiving, releases the prefetched messages no handler took
// (without counting a delivery through the library's receiver or the
// network client's; through another, which has no release, they are
// abandoned, which counts one),
// waits for running handlers to finish and for their completions to
// commit. If ctx ends first, it ends the handlers' contexts, waits for
// them to return and returns ctx's error; the messages of handlers that
// then fail go back without counting a delivery (a shutdown is not a
// failed delivery) or, if settling fails, are delivered again when their
// locks end. Stop is idempotent.
func (p *Processor) Stop(ctx context.Context) error {
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if !started {
		return nil
	}
	p.stopRecv()
	return waitStopped(ctx, "stop processor", p.ended, p.stopAll)
}

// waitStopped waits, once a processor was asked to stop, for ended; if
// ctx ends first, it calls hurry (which ends the handlers' contexts), waits
// all the same and returns ctx's error. hurry runs in either case, to
// release what the processor's contexts hold.
func waitStopped(ctx context.Context, op string, ended <-chan struct{}, hurry func()) error {
	select {
	case <-ended:
		hurry()
		return nil
	case <-ctx.Done():
		hurry()
		<-ended
		return fmt.Errorf("sluice: %s: %w", op, ctx.Err())
	}
}

// handle runs the handler on h's message, which h's keeper renews, then
// abandons it unless the handler settled it, or hands it to the
// completer.
func (p *Processor) handle(all, ctx context.Context, cancel context.CancelCauseFunc, h *held) {
	m := h.m
	err := p.h(ctx, p.hr, m)
	lost := errors.Is(context.Cause(ctx), ErrLockLost)
	cancel(nil)
	if err == nil && !m.settled.Load() && !m.settledTx.Load() {
		// Its completion is committed in the background, while its
		// keeper goes on renewing the lock; the budget is for messages
		// waiting and running, so that the next receive goes out while
		// this batch commits.
		h.complete()
		p.completing.Add(1)
		p.completions.add(h)
		p.done(1)
		return
	}
	h.stopKeeping()
	if m.settled.Load() || (m.settledTx.Load() && err == nil) {
		// The handler settled it itself, or in its transaction (which
		// settled it or rolled back).
		p.done(1)
		return
	}
	defer p.done(1)
	sctx, cancelSettle := context.WithTimeout(context.WithoutCancel(all), settleTimeout)
	defer cancelSettle()
	if all.Err() != nil {
		// Stop ended the handler: a shutdown, not a failed delivery.
		// The message goes back without counting one.
		if serr := p.release(sctx, m); serr != nil && !lost {
			p.opts.OnError(serr)
		}
		return
	}
	p.opts.OnError(fmt.Errorf("sluice: handler of message %d: %w", m.SequenceNumber, err))
	if p.onFailure != nil {
		p.onFailure()
	}
	delay := retryDelay(p.opts.Retry, m.DeliveryCount, err)
	if serr := p.r.Abandon(sctx, m, &AbandonOptions{Delay: delay}); serr != nil && !lost {
		p.opts.OnError(serr)
	}
}

// release hands m back after Stop ended its handler: without counting a
// delivery through a receiver that can (the library's, the network
// client's), abandoned through another.
func (p *Processor) release(ctx context.Context, m *ReceivedMessage) error {
	if p.lib != nil {
		return p.lib.release(ctx, m)
	}
	switch r := p.r.(type) {
	case interface {
		release(context.Context, *ReceivedMessage) error
	}:
		return r.release(ctx, m)
	case interface {
		Release(context.Context, *ReceivedMessage) error
	}:
		return r.Release(ctx, m)
	}
	return p.r.Abandon(ctx, m, nil)
}

// renewalPause is how long to wait before renewing a lock that ends at
// until: half the time it has left, at least minRenewal.
func renewalPause(until time.Time) time.Duration {
	return max(time.Until(until)/2, minRenewal)
}

// renew extends m's lock and returns when it now ends, without changing
// m (its handler may be reading it): the library's receiver renews it
// directly, another a copy that carries its lock token alone.
func (p *Processor) renew(ctx context.Context, m *ReceivedMessage) (time.Time, error) {
	if p.lib != nil {
		return p.lib.renew(ctx, m)
	}
	lock := &ReceivedMessage{LockToken: m.LockToken}
	if err := p.r.RenewLock(ctx, lock); err != nil {
		return time.Time{}, err
	}
	return lock.LockedUntil, nil
}

// settleTracker is the receiver a processor gives its handler in front of
// a receiver other than the library's: it forwards every call and marks
// the messages it settled, as the library's receiver marks its own, so
// that the processor leaves them alone.
type settleTracker struct {
	MessageReceiver
}

// Complete completes m through the receiver and marks it settled.
func (t settleTracker) Complete(ctx context.Context, m *ReceivedMessage) error {
	return settledIf(m, t.MessageReceiver.Complete(ctx, m))
}

// CompleteBatch completes msgs through the receiver and marks settled
// those it completed.
func (t settleTracker) CompleteBatch(ctx context.Context, msgs []*ReceivedMessage) error {
	err := t.MessageReceiver.CompleteBatch(ctx, msgs)
	var be *SettleBatchError
	if err != nil && !errors.As(err, &be) {
		return err
	}
	failed := make(map[int]bool)
	if be != nil {
		for _, f := range be.Failed {
			failed[f.Index] = true
		}
	}
	for i, m := range msgs {
		if !failed[i] {
			settledIf(m, nil)
		}
	}
	return err
}

// Abandon abandons m through the receiver and marks it settled.
func (t settleTracker) Abandon(ctx context.Context, m *ReceivedMessage, opts *AbandonOptions) error {
	return settledIf(m, t.MessageReceiver.Abandon(ctx, m, opts))
}

// DeadLetter dead-letters m through the receiver and marks it settled.
func (t settleTracker) DeadLetter(ctx context.Context, m *ReceivedMessage, opts *DeadLetterOptions) error {
	return settledIf(m, t.MessageReceiver.DeadLetter(ctx, m, opts))
}

// Defer defers m through the receiver and marks it settled.
func (t settleTracker) Defer(ctx context.Context, m *ReceivedMessage, opts *DeferOptions) error {
	return settledIf(m, t.MessageReceiver.Defer(ctx, m, opts))
}

// settledIf marks m settled when err is nil, and returns err.
func settledIf(m *ReceivedMessage, err error) error {
	if err == nil && m != nil {
		m.settled.Store(true)
	}
	return err
}
