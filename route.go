package sluice

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/sluicehq/sluice/store"
)

// Routing: where the messages of a send to a topic or a forwarding
// entity go. The entity sent to is checked strictly (it must exist, and
// the message must fit it): its failures fail the send. What lies beyond
// it (each subscription, each forwarding hop) can fail only for its own
// copy: that copy is dead-lettered, with a reason, at the subscription or
// at the entity that could not forward it, and every other copy goes on.

// MaxForwardHops bounds how many times a message is forwarded; past it,
// the message is dead-lettered where it stands with reason
// ReasonMaxTransferHops.
const MaxForwardHops = 4

// Dead-letter reasons of copies that routing could not deliver, named as
// Service Bus names them.
const (
	// ReasonMaxTransferHops: forwarded more than MaxForwardHops times.
	ReasonMaxTransferHops = "MaxTransferHopCountExceeded"
	// ReasonForwardTargetNotFound: the entity a queue or subscription
	// forwards to does not exist (or is a subscription).
	ReasonForwardTargetNotFound = "MessagingEntityNotFoundException"
	// ReasonMessageSizeExceeded: the copy is larger than the maximum
	// message size of the entity it was forwarded to.
	ReasonMessageSizeExceeded = "MessageSizeExceededException"
	// ReasonSessionIDNull: the copy has no SessionID, and the subscription
	// (or the entity it was forwarded to) requires sessions.
	ReasonSessionIDNull = "Session ID is null."
)

// descSessionIDNull is Service Bus's description for ReasonSessionIDNull.
const descSessionIDNull = "Session enabled entity doesn't allow a message whose session identifier is null."

// route works out where the messages of a send to an entity go: queues
// and subscriptions, following forwarding and topic rules. It returns
// one batch per target, in the order targets were reached, and for each
// message of each batch the index of the sent message it copies.
func (c *Client) route(ctx context.Context, e *entity, msgs []store.NewMessage, sent []*Message) (*router, error) {
	r := &router{c: c, batches: map[string]int{}}
	for i := range msgs {
		r.origin = i
		if err := r.arrive(ctx, e, msgs[i], sent[i], 0, -1); err != nil {
			return nil, err
		}
	}
	return r, nil
}

type router struct {
	c       *Client
	out     []store.EnqueueParams
	origins [][]int
	batches map[string]int
	subs    map[string][]entity
	// origin is the index of the message being routed.
	origin int
	// arrivals are the duplicate checks on the way, and through the last
	// one each message of out came through (-1: none).
	arrivals []store.Arrival
	through  [][]int
}

func (r *router) add(queue string, m store.NewMessage, via int) {
	i, ok := r.batches[queue]
	if !ok {
		i = len(r.out)
		r.batches[queue] = i
		r.out = append(r.out, store.EnqueueParams{Queue: queue})
		r.origins = append(r.origins, nil)
		r.through = append(r.through, nil)
	}
	r.out[i].Messages = append(r.out[i].Messages, m)
	r.origins[i] = append(r.origins[i], r.origin)
	r.through[i] = append(r.through[i], via)
}

// deadLetter stores a copy of m in the dead-letter queue of queue.
func (r *router) deadLetter(queue string, m store.NewMessage, via int, reason, desc string) {
	m.Properties = maps.Clone(m.Properties)
	m.DeadLetterReason, m.DeadLetterDescription = reason, store.Truncate(desc, store.MaxReasonLen)
	r.add(queue, m, via)
}

// check records m's arrival at e, when e checks duplicates on the way (a
// topic, a queue that forwards), and returns the arrival that what
// follows comes through.
func (r *router) check(e *entity, m *store.NewMessage, via int) int {
	if !e.props.RequiresDuplicateDetection || m.MessageID == "" || e.kind == kindSubscription ||
		e.kind == kindQueue && e.forwardTo == "" {
		return via // a queue that stores the message checks it itself
	}
	r.arrivals = append(r.arrivals, store.Arrival{
		Queue: e.name, MessageID: m.MessageID, PartitionKey: m.PartitionKey, Message: r.origin, After: via,
	})
	return len(r.arrivals) - 1
}

// params are the batches of the send with their duplicate checks.
func (r *router) params() store.EnqueueAllParams {
	p := store.EnqueueAllParams{Batches: r.out}
	if len(r.arrivals) > 0 {
		p.Arrivals, p.Through = r.arrivals, r.through
	}
	return p
}

// arrive routes m, which has reached e after hops forwards: the entity's
// default TTL caps its time-to-live, then a topic copies it to its
// subscriptions, a forwarding entity forwards it, and a queue or
// subscription stores it.
func (r *router) arrive(ctx context.Context, e *entity, m store.NewMessage, sent *Message, hops, via int) error {
	if def := e.props.DefaultTTL; def > 0 && def < Forever && (m.TTL == 0 || m.TTL > def) {
		m.TTL = def
	}
	via = r.check(e, &m, via)
	if e.kind != kindTopic {
		return r.deliver(ctx, e, m, sent, hops, via)
	}
	subs, err := r.subscriptions(ctx, e.name)
	if err != nil {
		return err
	}
	for i := range subs {
		s := &subs[i]
		ok, err := s.matches(sent)
		switch {
		case err != nil && !ok && !s.ignoreFilterErrors:
			r.deadLetter(s.name, m, via, ReasonFilterEvaluation, err.Error())
		case !ok:
		case s.props.RequiresSession && m.SessionID == "":
			r.deadLetter(s.name, m, via, ReasonSessionIDNull, descSessionIDNull)
		default:
			cp := m
			if def := s.props.DefaultTTL; def > 0 && def < Forever && (cp.TTL == 0 || cp.TTL > def) {
				cp.TTL = def
			}
			if err := r.deliver(ctx, s, cp, sent, hops, via); err != nil {
				return err
			}
		}
	}
	return nil
}

// subscriptions reads a topic's subscriptions once per send, as they are
// now: a subscription created a moment ago gets its copy.
func (r *router) subscriptions(ctx context.Context, topic string) ([]entity, error) {
	if subs, ok := r.subs[topic]; ok {
		return subs, nil
	}
	subs, err := r.c.subscriptions(ctx, topic)
	if err != nil {
		return nil, err
	}
	if r.subs == nil {
		r.subs = make(map[string][]entity)
	}
	r.subs[topic] = subs
	return subs, nil
}

// deliver stores m in a queue or subscription, or forwards it.
func (r *router) deliver(ctx context.Context, e *entity, m store.NewMessage, sent *Message, hops, via int) error {
	if e.forwardTo == "" {
		r.add(r.c.partitionFor(e, &m), m, via)
		return nil
	}
	if hops >= MaxForwardHops {
		r.deadLetter(e.name, m, via, ReasonMaxTransferHops,
			fmt.Sprintf("forwarded %d times; %s %q forwards to %q", hops, e.kind, e.name, e.forwardTo))
		return nil
	}
	to, err := r.c.entity(ctx, e.forwardTo)
	switch {
	case errors.Is(err, ErrEntityNotFound):
		r.deadLetter(e.name, m, via, ReasonForwardTargetNotFound,
			fmt.Sprintf("%s %q forwards to %q, which does not exist", e.kind, e.name, e.forwardTo))
		return nil
	case err != nil:
		return err
	case to.kind == kindSubscription:
		r.deadLetter(e.name, m, via, ReasonForwardTargetNotFound,
			fmt.Sprintf("%s %q forwards to %q, which is a subscription", e.kind, e.name, e.forwardTo))
		return nil
	case m.MessageSize() > to.props.MaxMessageSize:
		r.deadLetter(e.name, m, via, ReasonMessageSizeExceeded,
			fmt.Sprintf("message of %d bytes; %s %q, which %s %q forwards to, allows %d",
				m.MessageSize(), to.kind, to.name, e.kind, e.name, to.props.MaxMessageSize))
		return nil
	case to.props.RequiresSession && m.SessionID == "":
		r.deadLetter(e.name, m, via, ReasonSessionIDNull, descSessionIDNull)
		return nil
	}
	return r.arrive(ctx, &to, m, sent, hops+1, via)
}
