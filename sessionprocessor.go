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
)

// SessionHandler processes one message of a session a SessionProcessor
// holds. s is that session: its id, its state (SessionState,
// SetSessionState) and the settlements of its messages; its Close asks the
// processor to release the session once the session's running handlers
// return (Service Bus's ReleaseSession). The outcomes are Handler's:
// returning nil completes m, an error (or a panic) abandons it, and a
// message the handler settled through s is left alone.
type SessionHandler func(ctx context.Context, s MessageSessionReceiver, m *ReceivedMessage) error

// SessionAcceptor accepts the next free session of a queue or
// subscription: the library's *Client and the network client's.
type SessionAcceptor interface {
	AcceptNextMessageSession(ctx context.Context, queue string, opts *ReceiverOptions) (MessageSessionReceiver, error)
}

// SessionProcessorOptions tune a session processor. Zero values take the
// defaults, which are Service Bus's.
type SessionProcessorOptions struct {
	// MaxConcurrentSessions bounds the sessions held at once (default 8).
	MaxConcurrentSessions int
	// MaxConcurrentCallsPerSession bounds the handlers running at once on
	// one session (default 1, which keeps the session's order: a handler
	// starts once the previous one of its session returned).
	MaxConcurrentCallsPerSession int
	// PrefetchCount is how many messages of a session the processor keeps
	// received and locked beyond its handlers (default 0), so that the
	// next handler of the session starts without a round trip: a session
	// is received in batches of up to MaxConcurrentCallsPerSession +
	// PrefetchCount. With one call a session, a handler's failure then
	// releases the session (its messages come back in order, the failed
	// one first, to whoever accepts it next) rather than run the
	// prefetched messages before the failed one's redelivery.
	PrefetchCount int
	// SessionIdleTimeout is how long the processor waits for the next
	// message of a session it holds, while none of the session's is
	// waiting or being handled, before it releases the session and
	// accepts another (default 1 min, Service Bus's TryTimeout; Forever:
	// never, until Stop).
	SessionIdleTimeout time.Duration
	// MaxAutoLockRenewal bounds how long the processor renews a session's
	// lock while a handler runs, counted from the handler's start (default
	// 5 min; Forever: without bound; negative: never). A handler that
	// runs past it lets the lock end: the session is lost
	// (ErrSessionLockLost goes to OnError) and its messages go to the
	// next holder, their deliveries counted. A prefetched message that
	// waits past it, counted from its receipt, ends the session instead:
	// it is released, its messages handed back in order. While the
	// processor waits for a session's messages it renews the lock without
	// bound, up to SessionIdleTimeout.
	MaxAutoLockRenewal time.Duration
	// Retry chooses how long a message whose handler failed stays hidden,
	// as ProcessorOptions.Retry does; the session's later messages wait
	// for it.
	Retry RetryPolicy
	// OnError receives what the processor cannot return: failed accepts
	// and receives (retried after a pause), handler errors, failed
	// settles, lost session locks. nil logs them at warning level.
	OnError func(error)
	// MessageMiddleware wraps the handler as ProcessorOptions'
	// MessageMiddleware does; the MessageReceiver it is given settles
	// through the session.
	MessageMiddleware []MessageMiddleware
}

// DefaultMaxConcurrentSessions is SessionProcessorOptions'
// MaxConcurrentSessions default, as in Service Bus.
const DefaultMaxConcurrentSessions = 8

// DefaultSessionIdleTimeout is SessionProcessorOptions'
// SessionIdleTimeout default: Service Bus's default TryTimeout.
const DefaultSessionIdleTimeout = time.Minute

// SessionProcessor runs a handler over the sessions of a queue or
// subscription that requires sessions: it holds up to
// MaxConcurrentSessions sessions at once, each accepted with
// AcceptNextMessageSession as soon as a slot is free, and runs a Processor
// on each, so that a session's messages are received in batches,
// completed in batches (see Processor on when a completion is durable)
// and, with one call a session, handled one at a time in the order they
// were sent. It renews each session's lock (see MaxAutoLockRenewal), and
// releases a session once it has waited SessionIdleTimeout for a message,
// when its handler asks (Close), or when Stop is called: its unsettled
// messages go back without counting a delivery, ready for the next holder.
// The library's and the network client's session processors are this same
// type.
type SessionProcessor struct {
	a      SessionAcceptor
	entity string
	h      SessionHandler
	opts   SessionProcessorOptions
	inner  ProcessorOptions // each session's processor's

	mu         sync.Mutex
	started    bool
	stopAccept context.CancelFunc // stops accepting sessions
	hurry      context.CancelFunc // ends running handlers: Stop's ctx ended
	ended      chan struct{}      // closed when every slot ended
}

// NewSessionProcessor returns a session processor of an entity (a queue
// or a subscription, "topic/subscriptions/name") whose sessions a accepts:
// the library's *Client or the network client's. Start runs it. Bad
// options give ErrInvalidArgument: a negative count or SessionIdleTimeout,
// MaxConcurrentCallsPerSession+PrefetchCount beyond the receiver's batch
// limit (the library client's Limits.MaxBatch, or the server's default of
// 1000), or a nil middleware.
func NewSessionProcessor(a SessionAcceptor, entity string, h SessionHandler, opts *SessionProcessorOptions) (*SessionProcessor, error) {
	switch {
	case a == nil:
		return nil, errInvalid("new session processor", "nil session acceptor")
	case h == nil:
		return nil, errInvalid("new session processor", "nil handler")
	case entity == "":
		return nil, errInvalid("new session processor", "empty entity name")
	}
	var o SessionProcessorOptions
	if opts != nil {
		o = *opts
	}
	log, limit := slog.Default(), batchLimit(nil)
	if c, ok := a.(*Client); ok {
		log, limit = c.log, c.limits.MaxBatch
	}
	if o.MaxConcurrentSessions == 0 {
		o.MaxConcurrentSessions = DefaultMaxConcurrentSessions
	}
	if o.MaxConcurrentSessions < 0 {
		return nil, errInvalid("new session processor", "max concurrent sessions %d: must not be negative", o.MaxConcurrentSessions)
	}
	switch {
	case o.SessionIdleTimeout == 0:
		o.SessionIdleTimeout = DefaultSessionIdleTimeout
	case o.SessionIdleTimeout < 0:
		return nil, errInvalid("new session processor", "session idle timeout %v: must not be negative (sluice.Forever means never)", o.SessionIdleTimeout)
	}
	if o.OnError == nil {
		o.OnError = func(err error) { log.Warn("sluice: session processor", "entity", entity, "err", err) }
	}
	inner := ProcessorOptions{
		MaxConcurrent:      o.MaxConcurrentCallsPerSession,
		PrefetchCount:      o.PrefetchCount,
		MaxAutoLockRenewal: o.MaxAutoLockRenewal,
		Retry:              o.Retry,
		OnError:            o.OnError,
		MessageMiddleware:  o.MessageMiddleware,
	}
	if err := checkOptions(&inner, limit); err != nil {
		return nil, fmt.Errorf("sluice: new session processor: calls per session and prefetch: %w", err)
	}
	if _, err := chain(func(context.Context, MessageReceiver, *ReceivedMessage) error { return nil }, nil, nil, inner.MessageMiddleware); err != nil {
		return nil, fmt.Errorf("sluice: new session processor: %w", err)
	}
	o.MaxConcurrentCallsPerSession, o.PrefetchCount, o.MaxAutoLockRenewal = inner.MaxConcurrent, inner.PrefetchCount, inner.MaxAutoLockRenewal
	return &SessionProcessor{a: a, entity: entity, h: h, opts: o, inner: inner}, nil
}

// NewSessionProcessor returns a session processor of one of the client's
// queues or subscriptions: NewSessionProcessor(c, entity, h, opts).
func (c *Client) NewSessionProcessor(entity string, h SessionHandler, opts *SessionProcessorOptions) (*SessionProcessor, error) {
	return NewSessionProcessor(c, entity, h, opts)
}

// Start starts accepting sessions and handling their messages in the
// background. It fails if the processor was started before.
func (p *SessionProcessor) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errInvalid("start session processor", "already started")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sluice: start session processor: %w", err)
	}
	p.started = true
	all, hurry := context.WithCancel(context.WithoutCancel(ctx))
	accept, stopAccept := context.WithCancel(all)
	p.stopAccept, p.hurry = stopAccept, hurry
	p.ended = make(chan struct{})
	var slots sync.WaitGroup
	for range p.opts.MaxConcurrentSessions {
		slots.Add(1)
		go func() {
			defer slots.Done()
			p.slot(accept, all)
		}()
	}
	go func() {
		slots.Wait()
		close(p.ended)
	}()
	return nil
}

// Stop stops accepting sessions, then, for each session held, stops
// receiving, waits for its running handlers and their completions, and
// releases it (its unsettled messages go back without counting a
// delivery). If ctx ends first, it ends the handlers' contexts, waits for
// them to return, and returns ctx's error (see Processor.Stop). Stop is
// idempotent.
func (p *SessionProcessor) Stop(ctx context.Context) error {
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if !started {
		return nil
	}
	p.stopAccept()
	return waitStopped(ctx, "stop session processor", p.ended, p.hurry)
}

// slot accepts one session at a time and processes it, until accepting
// stops; all ends when Stop's ctx has ended.
func (p *SessionProcessor) slot(accept, all context.Context) {
	failures := 0
	for accept.Err() == nil {
		s, err := p.a.AcceptNextMessageSession(accept, p.entity, nil)
		if err != nil {
			if accept.Err() != nil || errors.Is(err, ErrClosed) {
				return
			}
			p.opts.OnError(fmt.Errorf("sluice: session processor: accept: %w", err))
			failures++
			_ = backoff.Wait(accept, receivePause.Delay(failures))
			continue
		}
		failures = 0
		p.process(accept, all, s)
	}
}

// process runs a processor over session s until the session idles, its
// handler releases it, its lock is lost, or accepting stops; then it
// stops that processor and releases the session.
func (p *SessionProcessor) process(accept, all context.Context, s MessageSessionReceiver) {
	if accept.Err() != nil {
		// Stop came while the accept took it (an accept tries once even
		// after its ctx ended): hand it back untouched.
		p.release(all, s)
		return
	}
	inner := p.inner
	src := newSessionSource(s, p.entity, p.opts)
	// With one call a session and messages prefetched, a failure or an
	// abandon releases the session: nothing prefetched after the message
	// runs before its redelivery.
	src.ordered = inner.MaxConcurrent == 1 && inner.PrefetchCount > 0
	h := func(ctx context.Context, r MessageReceiver, m *ReceivedMessage) error {
		defer src.handling()()
		return p.h(ctx, &sessionView{MessageSessionReceiver: s, r: r, src: src}, m)
	}
	proc, err := newProcessor(src, h, &inner)
	if err == nil {
		// Ending the session stops its receiving at once, before a
		// handler that asked for it returns: no later message of the
		// session starts meanwhile.
		src.proc = proc
		if src.ordered {
			proc.onFailure = func() { src.end(nil) }
		}
		err = proc.Start(all)
	}
	if err != nil {
		p.opts.OnError(fmt.Errorf("sluice: session processor: session %q: %w", s.SessionID(), err))
		p.release(all, s)
		return
	}
	kctx, stopKeeping := context.WithCancel(all)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		src.keep(kctx)
	}()
	select {
	case <-src.ended:
	case <-accept.Done():
	}
	if src.cause() != nil {
		// Nothing is held any more: end the handlers now.
		ended, cancel := context.WithCancel(all)
		cancel()
		_ = proc.Stop(ended)
	} else if err := proc.Stop(all); err != nil && all.Err() == nil {
		p.opts.OnError(err)
	}
	stopKeeping()
	<-kept
	if err := src.cause(); err != nil {
		p.opts.OnError(fmt.Errorf("sluice: session processor: %w", err))
		return
	}
	p.release(all, s)
}

// release hands s back: its unsettled messages become available again,
// their deliveries not counted.
func (p *SessionProcessor) release(all context.Context, s MessageSessionReceiver) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(all), settleTimeout)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		p.opts.OnError(fmt.Errorf("sluice: session processor: release session %q: %w", s.SessionID(), err))
	}
}

// sessionSource is the MessageReceiver a session's processor receives and
// settles through: the session receiver, whose receives end the session
// once it has idled, and whose message locks are the session's lock.
type sessionSource struct {
	// The session receiver: settles and the other receives go straight
	// to it.
	MessageSessionReceiver
	entity string
	idle   time.Duration
	// renewFor is MaxAutoLockRenewal: how long a handler's run keeps the
	// lock renewed.
	renewFor time.Duration
	onError  func(error)
	// ordered: a let-go or an abandon ends the session (see process).
	ordered bool
	// proc is the session's processor, set before it starts: end stops
	// its receiving, and the idle clock reads what it holds.
	proc *Processor

	runMu   sync.Mutex
	runs    map[uint64]time.Time // the running handlers' starts
	nextRun uint64

	renewMu sync.Mutex
	until   time.Time     // when the session lock ends, as last renewed
	lockFor time.Duration // how long a renewal extends it

	endOnce sync.Once
	ended   chan struct{} // closed when the session should be released
	why     atomic.Pointer[error]
}

func newSessionSource(s MessageSessionReceiver, entity string, o SessionProcessorOptions) *sessionSource {
	until := s.LockedUntil()
	return &sessionSource{MessageSessionReceiver: s, entity: entity, idle: o.SessionIdleTimeout, renewFor: o.MaxAutoLockRenewal, onError: o.OnError,
		runs: make(map[uint64]time.Time), until: until, lockFor: time.Until(until), ended: make(chan struct{})}
}

// handling records a handler's run, until the function it returns is
// called.
func (src *sessionSource) handling() func() {
	src.runMu.Lock()
	id := src.nextRun
	src.nextRun++
	src.runs[id] = time.Now()
	src.runMu.Unlock()
	return func() {
		src.runMu.Lock()
		delete(src.runs, id)
		src.runMu.Unlock()
	}
}

// mayRenew reports whether the keeper renews the lock now: unless a
// handler has run past MaxAutoLockRenewal (with it negative, while any
// runs), whose lock the processor lets end.
func (src *sessionSource) mayRenew() bool {
	src.runMu.Lock()
	defer src.runMu.Unlock()
	for _, start := range src.runs {
		if src.renewFor < 0 || time.Since(start) > src.renewFor {
			return false
		}
	}
	return true
}

// end asks for the session to be released; err is why, when the lock was
// lost.
func (src *sessionSource) end(err error) {
	src.endOnce.Do(func() {
		if err != nil {
			src.why.Store(&err)
		}
		close(src.ended)
		if src.proc != nil {
			src.proc.stopReceiving()
		}
	})
}

// cause is the error the session ended with: nil unless its lock was
// lost.
func (src *sessionSource) cause() error {
	if p := src.why.Load(); p != nil {
		return *p
	}
	return nil
}

// isEnded reports whether the session is being released.
func (src *sessionSource) isEnded() bool {
	select {
	case <-src.ended:
		return true
	default:
		return false
	}
}

// keep renews the session lock, every half of the time it has left,
// until ctx ends: while the processor waits for the session's messages,
// and while its handlers run within MaxAutoLockRenewal (renewed, too,
// by their messages' keepers; the renewals coalesce).
func (src *sessionSource) keep(ctx context.Context) {
	failures := 0
	for {
		src.renewMu.Lock()
		until := src.until
		src.renewMu.Unlock()
		pause := renewalPause(until)
		if failures > 0 {
			pause = min(renewRetry, pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !src.mayRenew() {
			continue
		}
		_, err := src.renew(ctx)
		switch {
		case err == nil:
			failures = 0
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrLockLost):
			src.end(err)
			return
		default:
			// Tried again while the lock lasts.
			failures++
			src.onError(fmt.Errorf("sluice: session processor: renew the lock of session %q: %w", src.SessionID(), err))
		}
	}
}

// renew extends the session lock, unless it was renewed less than half a
// lock duration ago: the renewals of the session's keeper and of its
// messages' keepers coalesce into one a half period.
func (src *sessionSource) renew(ctx context.Context) (time.Time, error) {
	src.renewMu.Lock()
	defer src.renewMu.Unlock()
	if time.Until(src.until) > src.lockFor/2 {
		return src.until, nil
	}
	if err := src.RenewSessionLock(ctx); err != nil {
		if errors.Is(err, ErrSessionLockLost) && !errors.Is(err, ErrLockLost) {
			err = fmt.Errorf("%w (%w)", err, ErrLockLost)
		}
		return time.Time{}, err
	}
	src.until = src.MessageSessionReceiver.LockedUntil()
	return src.until, nil
}

// Receive receives up to max of the session's messages, waiting until
// the session has idled: SessionIdleTimeout without a message while the
// processor holds none of the session's (none waiting or running). Then,
// or when the lock was lost or a receive failed, it ends the session
// (releasing it hands back what it holds, in order, for its next holder;
// a receive that fails again and again holds no session meanwhile) and
// waits for ctx to end: the processor is being stopped.
func (src *sessionSource) Receive(ctx context.Context, max int) ([]*ReceivedMessage, error) {
	for !src.isEnded() {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if src.idle != Forever {
			wctx, cancel = context.WithTimeout(ctx, src.idle)
		}
		msgs, err := src.MessageSessionReceiver.Receive(wctx, max)
		cancel()
		switch {
		case len(msgs) > 0:
			return msgs, err
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, ErrSessionLockLost):
			src.end(err)
		case err == nil, errors.Is(err, context.DeadlineExceeded):
			// Idle (a server may end the wait a moment before wctx),
			// unless messages of the session are still being handled.
			if src.proc.held.Load() == 0 {
				src.end(nil)
			}
		default:
			src.end(nil)
			return nil, fmt.Errorf("sluice: session processor: receive from session %q (released): %w", src.SessionID(), err)
		}
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// Entity names the queue or subscription.
func (src *sessionSource) Entity() string { return src.entity }

// Peek is not a session's: a processor never peeks.
func (src *sessionSource) Peek(context.Context, int, *PeekOptions) ([]*ReceivedMessage, error) {
	return nil, errInvalid("peek", "a session processor's receiver does not peek")
}

// Browse is not a session's: a processor never browses.
func (src *sessionSource) Browse(context.Context, int, *BrowseOptions) (BrowsePage, error) {
	return BrowsePage{}, errInvalid("browse", "a session processor's receiver does not browse")
}

// RenewLock renews a message's lock, which is the session's.
func (src *sessionSource) RenewLock(ctx context.Context, m *ReceivedMessage) error {
	until, err := src.renew(ctx)
	if err != nil {
		return err
	}
	m.LockedUntil = until
	return nil
}

// release lets go of a message the processor will not hand to a handler
// (Stop, or a lock it may no longer renew): it ends the session, whose
// release hands every unsettled message back, in order and without
// counting a delivery (an abandon would count one, and later messages of
// the session would overtake it while the session is held).
func (src *sessionSource) release(context.Context, *ReceivedMessage) error {
	src.end(nil)
	return nil
}

// sessionView is the session a SessionHandler is given: the session
// receiver, whose settlements go through the processor's receiver (so
// that the processor leaves alone what the handler settled), and whose
// Close releases the session once its handlers return.
type sessionView struct {
	MessageSessionReceiver
	r   MessageReceiver
	src *sessionSource
}

// Complete completes m.
func (v *sessionView) Complete(ctx context.Context, m *ReceivedMessage) error {
	return v.r.Complete(ctx, m)
}

// CompleteBatch completes msgs.
func (v *sessionView) CompleteBatch(ctx context.Context, msgs []*ReceivedMessage) error {
	return v.r.CompleteBatch(ctx, msgs)
}

// Abandon abandons m. With messages prefetched and one call a session,
// it ends the session first, as a handler's failure does, so that m comes
// again before the session's later messages.
func (v *sessionView) Abandon(ctx context.Context, m *ReceivedMessage, opts *AbandonOptions) error {
	if v.src.ordered {
		v.src.end(nil)
	}
	return v.r.Abandon(ctx, m, opts)
}

// DeadLetter dead-letters m.
func (v *sessionView) DeadLetter(ctx context.Context, m *ReceivedMessage, opts *DeadLetterOptions) error {
	return v.r.DeadLetter(ctx, m, opts)
}

// Defer defers m.
func (v *sessionView) Defer(ctx context.Context, m *ReceivedMessage, opts *DeferOptions) error {
	return v.r.Defer(ctx, m, opts)
}

// LockedUntil is when the session lock ends unless renewed, as the
// processor last renewed it.
func (v *sessionView) LockedUntil() time.Time {
	v.src.renewMu.Lock()
	defer v.src.renewMu.Unlock()
	return v.src.until
}

// Close asks the processor to release the session once its running
// handlers return; it receives no more of its messages meanwhile.
func (v *sessionView) Close(context.Context) error {
	v.src.end(nil)
	return nil
}
