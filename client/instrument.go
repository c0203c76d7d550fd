package client

import (
	"context"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// The client's calls are intercepted as the library's are (see
// sluice.Instrumentation): Options.Instrumentation, when set, sees each
// send, publish, receive, settlement, lock renewal and resubmit of dead
// letters, and a send's or publish's Start
// may set the properties the server stores (sluiceotel writes the W3C
// trace context there, which the server keeps as any property).

// traceSend runs a send of msgs to entity under the client's
// instrumentation, if any.
func (c *Client) traceSend(ctx context.Context, entity string, msgs []*sluice.Message, send func(context.Context, []*sluice.Message) ([]int64, error)) ([]int64, error) {
	if c.instr == nil {
		return send(ctx, msgs)
	}
	op := &sluice.Operation{Kind: sluice.OperationSend, Entity: sluice.CanonicalName(entity), Messages: sluice.CopyMessages(msgs)}
	ctx, end := c.instr.Start(ctx, op)
	seqs, err := send(ctx, op.Messages)
	end(err)
	return seqs, err
}

// tracePublish runs a publish of events to id under the client's
// instrumentation, if any.
func (c *Client) tracePublish(ctx context.Context, id sluice.StreamID, events []sluice.Event, publish func(context.Context, []sluice.Event) (int32, []int64, error)) (int32, []int64, error) {
	if c.instr == nil {
		return publish(ctx, events)
	}
	op := &sluice.Operation{Kind: sluice.OperationPublish, Stream: id, Events: sluice.CopyEvents(events)}
	ctx, end := c.instr.Start(ctx, op)
	part, pos, err := publish(ctx, op.Events)
	end(err)
	return part, pos, err
}

// trace runs do, an operation op (not a receive: its Received are set
// before), under the client's instrumentation, which the caller checked
// is set (building op costs an allocation a client without one spares).
func (c *Client) trace(ctx context.Context, op *sluice.Operation, do func(context.Context) error) error {
	ctx, end := c.instr.Start(ctx, op)
	err := do(ctx)
	end(err)
	return err
}

// traceReceive runs a receive of r under the client's instrumentation,
// if any.
func (r *Receiver) traceReceive(ctx context.Context, recv func(context.Context) ([]*sluice.ReceivedMessage, error)) ([]*sluice.ReceivedMessage, error) {
	if r.c.instr == nil {
		return recv(ctx)
	}
	op := &sluice.Operation{Kind: sluice.OperationReceive, Entity: sluice.CanonicalName(r.entity), SubQueue: r.subQueue()}
	ctx, end := r.c.instr.Start(ctx, op)
	msgs, err := recv(ctx)
	op.Received = msgs
	end(err)
	return msgs, err
}

// traceSettle runs a settlement of msgs by r under the client's
// instrumentation, if any.
func (r *Receiver) traceSettle(ctx context.Context, a sluice.SettleAction, msgs []*sluice.ReceivedMessage, settle func(context.Context) error) error {
	if r.c.instr == nil {
		return settle(ctx)
	}
	ctx, end := r.c.instr.Start(ctx, &sluice.Operation{Kind: sluice.OperationSettle, Entity: sluice.CanonicalName(r.entity), SubQueue: r.subQueue(),
		Received: msgs, Action: a})
	err := settle(ctx)
	end(err)
	return err
}

func (r *Receiver) subQueue() sluice.SubQueue {
	if r.sub != sluicev1.SubQueue_SUB_QUEUE_UNSPECIFIED {
		return sluice.SubQueueDeadLetter
	}
	return sluice.SubQueueNone
}
