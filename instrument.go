package sluice

import (
	"context"
	"maps"
	"time"
)

// OperationKind says what an Operation does.
type OperationKind int

// Kinds of Operation.
const (
	// OperationSend: Sender.Send, SendBatch or SendTx.
	OperationSend OperationKind = iota + 1
	// OperationReceive: a receive of a Receiver or SessionReceiver
	// (Receive, TryReceive, ReceiveDeferred), in either mode.
	OperationReceive
	// OperationSettle: Complete, CompleteBatch, Abandon, DeadLetter or
	// Defer, and a Processor's settlement after its handler.
	OperationSettle
	// OperationPublish: Client.Publish or PublishTx.
	OperationPublish
	// OperationRenewLock: Receiver.RenewLock, and a Processor's
	// automatic renewal of the lock of a message its handler holds.
	OperationRenewLock
	// OperationRenewSessionLock: SessionReceiver.RenewSessionLock.
	OperationRenewSessionLock
	// OperationResubmit: Client.ResubmitDeadLetters, which sends dead
	// letters back to their entity as new messages.
	OperationResubmit
)

// String names the kind as the messaging conventions of OpenTelemetry
// name the operation: send, receive, settle, publish, and for the kinds
// the conventions do not name renew_lock, renew_session_lock and
// resubmit.
func (k OperationKind) String() string {
	switch k {
	case OperationSend:
		return "send"
	case OperationReceive:
		return "receive"
	case OperationSettle:
		return "settle"
	case OperationPublish:
		return "publish"
	case OperationRenewLock:
		return "renew_lock"
	case OperationRenewSessionLock:
		return "renew_session_lock"
	case OperationResubmit:
		return "resubmit"
	}
	return "unknown"
}

// Operation is one call of a client that an Instrumentation intercepts.
// Only the fields of its Kind are set.
type Operation struct {
	Kind OperationKind
	// Entity is the canonical name of the queue, topic (sends only) or
	// subscription path the operation works on (not set for a publish).
	Entity string
	// Session is the session whose lock an OperationRenewSessionLock
	// renews.
	Session string
	// SubQueue is SubQueueDeadLetter for a receive or settlement of the
	// entity's dead letters.
	SubQueue SubQueue
	// Stream is the stream published to (OperationPublish).
	Stream StreamID
	// Messages are the messages a send sends: copies of the caller's,
	// each with an ApplicationProperties map of its own (never nil), which
	// Start may change: what it sets there is sent, and the caller's
	// messages are left as they were. A nil message stays nil, for the
	// send to refuse.
	Messages []*Message
	// Events are the events a publish appends: copies, each with a
	// Properties map of its own (never nil), which Start may change as it
	// may a send's messages.
	Events []Event
	// Received are, for a receive, the messages it returned (set before
	// end is called; none when it failed or ctx ended first); for a
	// settlement the messages it settles and for an OperationRenewLock
	// the message whose lock it renews (the caller's, to read, not to
	// change); for an OperationResubmit the dead letters it moved, as they
	// were (set before end is called, with the properties their first
	// send stored; the network client, which does not see them, sets
	// none).
	Received []*ReceivedMessage
	// Action is what a settlement does (OperationSettle).
	Action SettleAction
	// InTx reports a send, publish or settlement in the caller's
	// transaction (SendTx, PublishTx, CompleteTx and the other settlements
	// in a transaction): it commits when the caller commits, or never.
	InTx bool
}

// Instrumentation intercepts a client's sends, receives, settlements,
// publishes, lock renewals and resubmits, for tracing: package sluiceotel implements it with
// OpenTelemetry spans and carries W3C trace context in message
// properties. Install one with Client.Instrument.
type Instrumentation interface {
	// Start is called as an operation begins, in the goroutine of the
	// call, before the operation checks its arguments. It returns the
	// context the operation runs in and end, which the operation calls
	// once, in the same goroutine, with its error (nil on success) when it
	// returns. A send's or publish's Start may set properties of
	// op.Messages or op.Events. Neither Start nor end may block or call
	// the client.
	Start(ctx context.Context, op *Operation) (context.Context, func(err error))
}

// instrumentation holds a client's Instrumentation.
type instrumentation struct{ Instrumentation }

// Instrument makes in intercept the operations of this client (and of
// the senders, receivers, session receivers and processors it made)
// that start from now on; nil removes it. Without one, an operation pays
// one atomic load for this.
func (c *Client) Instrument(in Instrumentation) {
	if in == nil {
		c.instr.Store(nil)
		return
	}
	c.instr.Store(&instrumentation{in})
}

// Instrumentation returns the Instrumentation installed with
// Instrument, nil when none.
func (c *Client) Instrumentation() Instrumentation { return c.instrumentation() }

// instrumentation returns the client's Instrumentation, nil when none.
func (c *Client) instrumentation() Instrumentation {
	if p := c.instr.Load(); p != nil {
		return p.Instrumentation
	}
	return nil
}

// CopyMessages returns copies of msgs whose ApplicationProperties are
// maps of their own (never nil), as Operation.Messages holds them: for
// another implementation of sending (the network client's) to build its
// Operation alike. A nil message stays nil.
func CopyMessages(msgs []*Message) []*Message {
	out := make([]*Message, len(msgs))
	for i, m := range msgs {
		if m == nil {
			continue
		}
		cp := *m
		cp.ApplicationProperties = make(map[string]string, len(m.ApplicationProperties)+2)
		maps.Copy(cp.ApplicationProperties, m.ApplicationProperties)
		out[i] = &cp
	}
	return out
}

// CopyEvents returns copies of events whose Properties are maps of their
// own (never nil), as Operation.Events holds them.
func CopyEvents(events []Event) []Event {
	out := make([]Event, len(events))
	for i, e := range events {
		e.Properties = make(map[string]string, len(e.Properties)+2)
		maps.Copy(e.Properties, events[i].Properties)
		out[i] = e
	}
	return out
}

// traceReceive runs a receive of entity under the client's
// instrumentation, if any.
func (c *Client) traceReceive(ctx context.Context, entity string, sub SubQueue, recv func(context.Context) ([]*ReceivedMessage, error)) ([]*ReceivedMessage, error) {
	in := c.instrumentation()
	if in == nil {
		return recv(ctx)
	}
	op := &Operation{Kind: OperationReceive, Entity: entity, SubQueue: sub}
	ctx, end := in.Start(ctx, op)
	msgs, err := recv(ctx)
	op.Received = msgs
	end(err)
	return msgs, err
}

// traceSettle runs a settlement of msgs by r under the client's
// instrumentation, if any.
func (r *Receiver) traceSettle(ctx context.Context, a SettleAction, msgs []*ReceivedMessage, settle func(context.Context) error) error {
	in := r.c.instrumentation()
	if in == nil {
		return settle(ctx)
	}
	ctx, end := in.Start(ctx, &Operation{Kind: OperationSettle, Entity: r.queue, SubQueue: r.subQueue(), Received: msgs, Action: a})
	err := settle(ctx)
	end(err)
	return err
}

// traceSettleTx runs a settlement of m by r in the caller's transaction
// under the client's instrumentation, if any.
func (r *Receiver) traceSettleTx(ctx context.Context, a SettleAction, m *ReceivedMessage, settle func(context.Context) error) error {
	in := r.c.instrumentation()
	if in == nil {
		return settle(ctx)
	}
	ctx, end := in.Start(ctx, &Operation{Kind: OperationSettle, Entity: r.queue, SubQueue: r.subQueue(), Received: []*ReceivedMessage{m},
		Action: a, InTx: true})
	err := settle(ctx)
	end(err)
	return err
}

// traceRenew runs a renewal of m's lock by r under the client's
// instrumentation, if any.
func (r *Receiver) traceRenew(ctx context.Context, m *ReceivedMessage, renew func(context.Context) (time.Time, error)) (time.Time, error) {
	in := r.c.instrumentation()
	if in == nil {
		return renew(ctx)
	}
	ctx, end := in.Start(ctx, &Operation{Kind: OperationRenewLock, Entity: r.queue, SubQueue: r.subQueue(), Received: []*ReceivedMessage{m}})
	until, err := renew(ctx)
	end(err)
	return until, err
}

// traceSessionRenew runs a renewal of s's session lock under the
// client's instrumentation, if any.
func (s *SessionReceiver) traceSessionRenew(ctx context.Context, renew func(context.Context) error) error {
	in := s.r.c.instrumentation()
	if in == nil {
		return renew(ctx)
	}
	ctx, end := in.Start(ctx, &Operation{Kind: OperationRenewSessionLock, Entity: s.r.queue, Session: s.lock.SessionID})
	err := renew(ctx)
	end(err)
	return err
}
