package sluice

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/backoff"
)

// How a processor keeps its handlers fed. It holds up to
// MaxConcurrent+PrefetchCount messages received and not yet handled,
// waiting for a handler or running (those whose completion is being
// committed are the completer's). When at least half of that budget is
// free it receives everything missing in one call, so that under load a
// receive takes many messages, and the handlers (MaxConcurrent
// goroutines) take the waiting ones in receipt order. From its receipt
// until its handler returns, and on until its completion commits, a
// message's keeper renews its lock: a completion that waits behind a slow
// batch does not lose the lock it completes.

// minHandOut is the least time a message's lock must have left for a
// handler to be given it; a waiting message whose lock has less is
// released instead.
const minHandOut = minRenewal

// heldState is where a held message is.
type heldState int

const (
	waiting    heldState = iota // received, waiting for a handler
	running                     // a handler has it
	completing                  // its handler returned nil; the completer has it
	dropped                     // let go before a handler took it
)

// held is a message a processor received and has not settled yet.
type held struct {
	m        *ReceivedMessage
	received time.Time

	stopRenewals context.CancelFunc // ends the keeper
	kept         chan struct{}      // closed when the keeper ended

	mu      sync.Mutex
	state   heldState
	until   time.Time               // when the lock ends, as last renewed
	started time.Time               // when a handler took it
	cancel  context.CancelCauseFunc // ends the handler's context
}

// loop receives, whenever at least half of the processor's budget is
// free, as many messages as it misses, and queues them for the handlers.
func (p *Processor) loop(recv, all context.Context) {
	budget := int64(p.opts.MaxConcurrent + p.opts.PrefetchCount)
	refill := (budget + 1) / 2
	failures := 0
	for {
		// Completions that pile up (a slow commit) hold the receives
		// back, so that no more than about twice the budget is locked.
		missing := budget - p.held.Load()
		if missing < refill || p.completing.Load() > budget {
			select {
			case <-p.freed:
				continue
			case <-recv.Done():
				return
			}
		}
		// Let the handlers that are about to return (those of one
		// receive tend to end together) free their part: a yield, not a
		// timer.
		runtime.Gosched()
		missing = budget - p.held.Load()
		msgs, err := p.r.Receive(recv, int(missing))
		p.held.Add(int64(len(msgs)))
		for _, m := range msgs {
			// ready's capacity is the budget, but a message let go while
			// it waited stays there until a handler skips it: when every
			// handler is busy and Stop comes, let go of the rest here.
			h := p.hold(all, m)
			select {
			case p.ready <- h:
			case <-recv.Done():
				if h.drop() {
					p.letGo(all, h)
				}
			}
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

// hold starts keeping m, just received.
func (p *Processor) hold(all context.Context, m *ReceivedMessage) *held {
	h := &held{m: m, received: time.Now(), until: m.LockedUntil, kept: make(chan struct{})}
	if m.LockToken == "" || m.LockedUntil.IsZero() {
		close(h.kept) // nothing to renew, nothing that ends
		h.stopRenewals = func() {}
		return h
	}
	ctx, stop := context.WithCancel(all)
	h.stopRenewals = stop
	p.keepers.Add(1)
	go func() {
		defer p.keepers.Done()
		defer close(h.kept)
		p.keep(ctx, h)
	}()
	return h
}

// work runs handlers, one at a time, on the messages waiting, until
// receiving stops.
func (p *Processor) work(recv, all context.Context) {
	for {
		select {
		case <-recv.Done():
			return
		case h := <-p.ready:
			if recv.Err() != nil {
				if h.drop() {
					p.letGo(all, h)
				}
				return
			}
			ctx, cancel, ok := h.take(all)
			if !ok {
				continue
			}
			if ctx == nil {
				p.letGo(all, h) // its lock was ending
				continue
			}
			p.handle(all, ctx, cancel, h)
		}
	}
}

// releaseWaiting lets go of the messages still waiting once receiving
// stopped.
func (p *Processor) releaseWaiting(all context.Context) {
	for {
		select {
		case h := <-p.ready:
			if h.drop() {
				p.letGo(all, h)
			}
		default:
			return
		}
	}
}

// take gives h to a handler, with its context, unless h was dropped
// (ok false) or its lock ends too soon (ok true, ctx nil: h is now
// dropped, for the caller to let go).
func (h *held) take(all context.Context) (ctx context.Context, cancel context.CancelCauseFunc, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != waiting {
		return nil, nil, false
	}
	if !h.until.IsZero() && time.Until(h.until) < minHandOut {
		h.state = dropped
		return nil, nil, true
	}
	// No handler reads m yet, and the keeper never writes it: the handler
	// sees when the lock ends as last renewed.
	h.m.LockedUntil = h.until
	ctx, cancel = context.WithCancelCause(all)
	h.state, h.started, h.cancel = running, time.Now(), cancel
	return ctx, cancel, true
}

// drop marks h, waiting, as let go; false if it was not waiting.
func (h *held) drop() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != waiting {
		return false
	}
	h.state = dropped
	return true
}

// stopKeeping ends h's keeper and waits for it.
func (h *held) stopKeeping() {
	h.stopRenewals()
	<-h.kept
}

// letGo hands back h, which was dropped before a handler took it: without
// counting a delivery through the library's receiver.
func (p *Processor) letGo(all context.Context, h *held) {
	h.stopKeeping()
	p.releaseDropped(all, h)
}

// releaseDropped releases h's message and stops counting it.
func (p *Processor) releaseDropped(all context.Context, h *held) {
	defer p.done(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(all), settleTimeout)
	defer cancel()
	if err := p.release(ctx, h.m); err != nil && !errors.Is(err, ErrLockLost) {
		p.opts.OnError(err)
	}
}

// done stops counting n messages, settled or let go, and wakes the loop.
func (p *Processor) done(n int) {
	p.held.Add(-int64(n))
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// keep renews h's lock every half of the time it has left, while h waits
// (MaxAutoLockRenewal counted from its receipt) and while its handler runs
// (counted from the handler's start), until ctx ends. A waiting message
// that may not be renewed is released before its lock ends. When the lock
// is lost it drops a waiting message and ends a running handler's context
// with ErrLockLost.
func (p *Processor) keep(ctx context.Context, h *held) {
	h.mu.Lock()
	until := h.until
	h.mu.Unlock()
	t := time.NewTimer(renewalPause(until))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if h.m.settled.Load() || h.m.settledTx.Load() {
			return
		}
		h.mu.Lock()
		state, from := h.state, h.received
		if state == running || state == completing {
			from = h.started
		}
		h.mu.Unlock()
		if state == dropped {
			return // whoever dropped it lets it go
		}
		if p.opts.MaxAutoLockRenewal < 0 || time.Now().After(from.Add(p.opts.MaxAutoLockRenewal)) {
			if state == waiting && h.drop() {
				p.releaseDropped(ctx, h) // nobody else lets go of what drop gave us
			}
			return
		}
		next, err := p.renew(ctx, h.m)
		switch {
		case err == nil:
			h.mu.Lock()
			h.until = next
			h.mu.Unlock()
			until = next
			t.Reset(renewalPause(until))
		case h.m.settled.Load():
			return // settled by the handler meanwhile
		case errors.Is(err, ErrLockLost) && h.isCompleting():
			return // completed meanwhile, or the completion reports the loss
		case errors.Is(err, ErrLockLost):
			p.lockLost(h, err)
			return
		case ctx.Err() != nil:
			return
		default:
			p.opts.OnError(err)
			t.Reset(min(renewRetry, renewalPause(until))) // try again while the lock lasts
		}
	}
}

// complete marks h, whose handler returned nil, as the completer's.
func (h *held) complete() {
	h.mu.Lock()
	h.state = completing
	h.mu.Unlock()
}

// isCompleting reports whether h is the completer's.
func (h *held) isCompleting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state == completing
}

// lockLost reports h's lost lock, and ends its handler's context or, when
// it was waiting, stops counting it.
func (p *Processor) lockLost(h *held, err error) {
	if p.lib != nil {
		p.lib.noteLockLost(err)
	}
	p.opts.OnError(fmt.Errorf("sluice: processor: message %d: %w", h.m.SequenceNumber, err))
	h.mu.Lock()
	state, cancel := h.state, h.cancel
	if state == waiting {
		h.state = dropped
	}
	h.mu.Unlock()
	switch state {
	case waiting:
		p.done(1)
	case running:
		cancel(err)
	}
}
