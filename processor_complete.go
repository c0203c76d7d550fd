package sluice

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// completer completes, in batches, the messages whose handlers returned
// nil, in the manner of a group commit: the first completion that waits
// is sent at once, and those that arrive while a batch is in flight go
// together in the next one. No timer adds latency.
type completer struct {
	p     *Processor
	all   context.Context // the processor's; the completes outlive it by settleTimeout
	limit int             // the most messages a batch may hold

	mu      sync.Mutex
	queue   []*held
	wake    chan struct{} // signalled when queue grows
	closing chan struct{} // closed when no more completions will come
	ended   chan struct{} // closed when every completion was sent
}

// newCompleter returns p's completer; run runs it.
func newCompleter(p *Processor, all context.Context) *completer {
	return &completer{p: p, all: all, limit: batchLimit(p.lib), wake: make(chan struct{}, 1), closing: make(chan struct{}), ended: make(chan struct{})}
}

// add queues h's message for completion.
func (c *completer) add(h *held) {
	c.mu.Lock()
	c.queue = append(c.queue, h)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// close waits until every completion queued was sent; nothing may be
// added after it.
func (c *completer) close() {
	close(c.closing)
	<-c.ended
}

// run sends what is queued, one batch at a time, until close.
func (c *completer) run() {
	defer close(c.ended)
	for {
		closing := false
		select {
		case <-c.wake:
		case <-c.closing:
			closing = true
		}
		// Let the handlers that are about to return (those of one
		// receive tend to end together) join: a yield, not a timer.
		runtime.Gosched()
		for {
			c.mu.Lock()
			n := min(len(c.queue), c.limit)
			batch := c.queue[:n:n]
			c.queue = c.queue[n:]
			c.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			c.complete(batch)
		}
		if closing {
			return
		}
	}
}

// complete completes batch in one CompleteBatch and reports what failed:
// each message not completed, or the batch's error when none was.
func (c *completer) complete(batch []*held) {
	p := c.p
	defer func() {
		for _, h := range batch {
			h.stopRenewals() // Stop waits for the keepers
		}
		p.completing.Add(-int64(len(batch)))
		p.done(0)
	}()
	msgs := make([]*ReceivedMessage, len(batch))
	for i, h := range batch {
		msgs[i] = h.m
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.all), settleTimeout)
	defer cancel()
	err := p.r.CompleteBatch(ctx, msgs)
	var be *SettleBatchError
	switch {
	case err == nil:
	case errors.As(err, &be):
		for _, f := range be.Failed {
			var seq int64
			if f.Index >= 0 && f.Index < len(msgs) {
				seq = msgs[f.Index].SequenceNumber
			}
			p.opts.OnError(fmt.Errorf("sluice: complete message %d: %w", seq, f.Err))
		}
	default:
		p.opts.OnError(fmt.Errorf("sluice: complete %d messages: %w", len(msgs), err))
	}
}
