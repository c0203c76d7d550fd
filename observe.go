package sluice

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// MessageEventKind says what a MessageEvent reports.
type MessageEventKind int

// Kinds of MessageEvent.
const (
	// MessagesSent: a send (Sender.Send, SendBatch, scheduled or not)
	// stored Count messages, or accepted them without storing them (a
	// duplicate; a topic no subscription of which took them).
	MessagesSent MessageEventKind = iota + 1
	// MessagesReceived: a receive returned Count messages in Mode, each
	// one's EnqueuedTime in EnqueuedTimes.
	MessagesReceived
	// MessagesSettled: a settlement did Action to Count messages.
	MessagesSettled
	// LocksLost: Count settlements or renewals were refused because the
	// lock of the message or of its session was lost (ErrLockLost,
	// ErrSessionLockLost).
	LocksLost
)

// String names the kind.
func (k MessageEventKind) String() string {
	switch k {
	case MessagesSent:
		return "sent"
	case MessagesReceived:
		return "received"
	case MessagesSettled:
		return "settled"
	case LocksLost:
		return "lock lost"
	}
	return "unknown"
}

// SettleAction is what a settlement does with a message, as a
// MessageEvent reports it.
type SettleAction int

// Settle actions.
const (
	// SettleComplete: Complete, CompleteBatch (the messages it completed).
	SettleComplete SettleAction = iota + 1
	// SettleAbandon: Abandon, and a Processor's handing a message back as
	// it stops (without counting a delivery).
	SettleAbandon
	// SettleDeadLetter: DeadLetter.
	SettleDeadLetter
	// SettleDefer: Defer.
	SettleDefer
)

// String names the action as the metrics label it: complete, abandon,
// dead_letter, defer.
func (a SettleAction) String() string {
	switch a {
	case SettleComplete:
		return "complete"
	case SettleAbandon:
		return "abandon"
	case SettleDeadLetter:
		return "dead_letter"
	case SettleDefer:
		return "defer"
	}
	return "unknown"
}

// MessageEvent is what one call of a client did to the messages of one
// entity. Only the fields of its Kind are set.
type MessageEvent struct {
	Kind MessageEventKind
	// Entity is the canonical name (CanonicalName) of the queue, topic
	// (sends only) or subscription path, however the caller spelled it.
	Entity string
	// SubQueue is SubQueueDeadLetter for what a receiver of the entity's
	// dead-letter queue received, settled or lost.
	SubQueue SubQueue
	// Count is how many messages (at least 1).
	Count int
	// Mode is the receive mode (MessagesReceived).
	Mode ReceiveMode
	// EnqueuedTimes are the received messages' EnqueuedTime, in the
	// order received (MessagesReceived), for a histogram of how long they
	// waited. The observers share the slice: read it, do not change it.
	EnqueuedTimes []time.Time
	// Action is what the settlement did (MessagesSettled).
	Action SettleAction
}

// ObserveMessages calls fn after each call of this client (and of the
// senders, receivers, session receivers and processors it made) that
// did something to messages: sent them, received them in either mode
// (ReceiveDeferred, a dead-letter queue's and a session's included),
// settled them (one by one or in a batch: the messages it settled), or
// was refused a settlement or a renewal because a lock was lost. It is
// how sluiceprom counts sluice_messages_sent_total and its neighbours,
// and how the server counts what its API calls did. Events come in one
// struct with a Kind, so that one observer sees every kind, in the
// order they happened in each goroutine, and a switch that ignores
// kinds it does not know keeps working when kinds are added.
//
// fn runs in the goroutine of the call, after the call's work
// succeeded (a receive that returned nothing reports nothing): it must
// not block, nor call the client or stop; once stop returns it is not
// called again. It sees only this client's calls: those of another
// client, or of another process, on the same database are not reported
// (ObserveDeadLetters, which the storage reports, sees every client of
// the process). A send or a settlement in the caller's transaction
// (SendTx, CompleteTx and its neighbours) is not reported, since the
// caller commits it, and neither are resubmitted
// dead letters (ResubmitDeadLetters) or a call that failed, whose
// outcome may be unknown. stop ends the observation; it is idempotent.
// With no observer, a call pays one atomic load for this. A nil fn
// observes nothing.
func (c *Client) ObserveMessages(fn func(MessageEvent)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	o := &messageObserver{fn: fn}
	c.obsMu.Lock()
	list := append(slices.Clone(c.loadObservers()), o)
	c.observers.Store(&list)
	c.obsMu.Unlock()
	return func() {
		o.mu.Lock()
		o.stopped = true
		o.mu.Unlock()
		c.obsMu.Lock()
		defer c.obsMu.Unlock()
		list := slices.DeleteFunc(slices.Clone(c.loadObservers()), func(x *messageObserver) bool { return x == o })
		if len(list) == 0 {
			c.observers.Store(nil)
			return
		}
		c.observers.Store(&list)
	}
}

// messageObserver is one registration of ObserveMessages. Its lock is
// held for reading while fn runs, so that stop returns only once fn is
// not running and will not run again.
type messageObserver struct {
	fn      func(MessageEvent)
	mu      sync.RWMutex
	stopped bool
}

func (o *messageObserver) call(e MessageEvent) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if !o.stopped {
		o.fn(e)
	}
}

// loadObservers returns the observers of message events: none, nil,
// for the price of an atomic load.
func (c *Client) loadObservers() []*messageObserver {
	if p := c.observers.Load(); p != nil {
		return *p
	}
	return nil
}

// notify tells every observer about e.
func notify(obs []*messageObserver, e MessageEvent) {
	for _, o := range obs {
		o.call(e)
	}
}

// noteSent reports a send of n messages to entity.
func (c *Client) noteSent(entity string, n int) {
	if obs := c.loadObservers(); obs != nil && n > 0 {
		notify(obs, MessageEvent{Kind: MessagesSent, Entity: entity, Count: n})
	}
}

// noteReceived reports messages a receive of r returned.
func (r *Receiver) noteReceived(msgs []*ReceivedMessage) {
	obs := r.c.loadObservers()
	if obs == nil || len(msgs) == 0 {
		return
	}
	times := make([]time.Time, len(msgs))
	for i, m := range msgs {
		times[i] = m.EnqueuedTime
	}
	notify(obs, MessageEvent{Kind: MessagesReceived, Entity: r.queue, SubQueue: r.subQueue(), Count: len(msgs),
		Mode: r.mode, EnqueuedTimes: times})
}

// noteSettled reports a settlement of n messages of r by action (a
// storage action: Release counts as an abandon), and lost locks, the
// failures whose error is a lost lock.
func (r *Receiver) noteSettled(action store.SettleAction, n int, failures ...error) {
	obs := r.c.loadObservers()
	if obs == nil {
		return
	}
	if n > 0 {
		notify(obs, MessageEvent{Kind: MessagesSettled, Entity: r.queue, SubQueue: r.subQueue(), Count: n, Action: settleAction(action)})
	}
	lost := 0
	for _, err := range failures {
		if isLockLost(err) {
			lost++
		}
	}
	if lost > 0 {
		notify(obs, MessageEvent{Kind: LocksLost, Entity: r.queue, SubQueue: r.subQueue(), Count: lost})
	}
}

// settleAction is the SettleAction of a storage action: a release (a
// stopping processor's hand-back) is an abandon.
func settleAction(action store.SettleAction) SettleAction {
	switch action {
	case store.Complete:
		return SettleComplete
	case store.Abandon, store.Release:
		return SettleAbandon
	case store.DeadLetter:
		return SettleDeadLetter
	case store.Defer:
		return SettleDefer
	}
	return 0
}

// noteLockLost reports a renewal of r refused with err when err is a
// lost lock.
func (r *Receiver) noteLockLost(err error) {
	if obs := r.c.loadObservers(); obs != nil && isLockLost(err) {
		notify(obs, MessageEvent{Kind: LocksLost, Entity: r.queue, SubQueue: r.subQueue(), Count: 1})
	}
}

func (r *Receiver) subQueue() SubQueue {
	if r.dead {
		return SubQueueDeadLetter
	}
	return SubQueueNone
}

func isLockLost(err error) bool {
	return err != nil && (errors.Is(err, ErrLockLost) || errors.Is(err, ErrSessionLockLost))
}
