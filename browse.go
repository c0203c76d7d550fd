package sluice

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// MaxBrowseScan bounds the messages one Browse examines.
const MaxBrowseScan = store.MaxBrowseScan

// MessageFilter selects the messages a Browse returns: those that match
// every field set. The zero filter matches every message.
type MessageFilter struct {
	// States, when not empty, matches messages in one of these states,
	// as Peek reports them (StateActive, StateLocked, StateScheduled,
	// StateDeferred, StateExpired). Dead letters have none: a dead-letter
	// receiver's filter leaves it empty.
	States []MessageState
	// MessageID, CorrelationID, Subject and SessionID, when not empty,
	// match messages whose field is equal to them.
	MessageID     string
	CorrelationID string
	Subject       string
	SessionID     string
	// Properties match messages that have each of these application
	// properties with this value.
	Properties map[string]string
	// DeadLetterReason, when not nil, matches dead letters of this reason
	// ("" those dead-lettered without one). Only a dead-letter receiver's
	// filter sets it.
	DeadLetterReason *string
}

// matches says whether a stored message, or a dead letter, matches f.
func (f *MessageFilter) matches(d *sluicetype.DeadLetter) bool {
	h := d.Headers
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, d.State),
		f.MessageID != "" && d.MessageID != f.MessageID,
		f.CorrelationID != "" && h[headerCorrelationID] != f.CorrelationID,
		f.Subject != "" && h[headerSubject] != f.Subject,
		f.SessionID != "" && d.SessionID != f.SessionID,
		f.DeadLetterReason != nil && d.Reason != *f.DeadLetterReason:
		return false
	}
	for k, v := range f.Properties {
		if got, ok := d.Properties[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// BrowseOptions tune Browse.
type BrowseOptions struct {
	// FromSequenceNumber is the first sequence number to examine (0: the
	// first there is).
	FromSequenceNumber int64
	// Filter selects the messages returned.
	Filter MessageFilter
}

// BrowsePage is one page of a Browse.
type BrowsePage struct {
	// Messages are those that matched, in sequence order.
	Messages []*ReceivedMessage
	// Next is where the next page starts (its FromSequenceNumber): after
	// the last message examined. 0 when this page examined the entity's
	// last message: there was nothing after it.
	Next int64
}

// Browse is a search through an entity's messages, or a dead-letter
// receiver's dead letters: it examines them in sequence order from
// opts.FromSequenceNumber, at most MaxBrowseScan of them, and returns up
// to max (1 to MaxPeek) of those that match opts.Filter, without locking
// or changing them. Each page says where the next starts, so a search
// through any number of messages costs each call a bounded amount; a
// page may hold none and still have a Next. Unlike Peek it keeps no
// position in the receiver. The database reads the bodies of the
// matches only. ErrInvalidArgument for a max out of range, a negative
// sequence number, or a filter that cannot match on this receiver
// (states on a dead-letter receiver, a dead-letter reason on another, a
// state unknown).
func (r *Receiver) Browse(ctx context.Context, max int, opts *BrowseOptions) (BrowsePage, error) {
	const op = "browse"
	if opts == nil {
		opts = &BrowseOptions{}
	}
	f := opts.Filter
	switch {
	case max < 1 || max > MaxPeek:
		return BrowsePage{}, errInvalid(op, "max %d: must be between 1 and %d", max, MaxPeek)
	case opts.FromSequenceNumber < 0:
		return BrowsePage{}, errInvalid(op, "from sequence number %d: sequence numbers start at 1", opts.FromSequenceNumber)
	case r.dead && len(f.States) > 0:
		return BrowsePage{}, errInvalid(op, "dead letters have no state to filter on")
	case !r.dead && f.DeadLetterReason != nil:
		return BrowsePage{}, errInvalid(op, "only dead letters have a dead-letter reason (browse the dead-letter queue)")
	}
	for _, s := range f.States {
		if s < StateActive || s > StateExpired {
			return BrowsePage{}, errInvalid(op, "message state %d: unknown", int(s))
		}
	}
	f.Properties = maps.Clone(f.Properties) // the caller may change its own while this runs
	// A partitioned queue is browsed one partition a call, in the order
	// of sequence numbers, which carry the partition in their top bits.
	n, err := r.c.partitionsOf(ctx, r.queue)
	if err != nil {
		return BrowsePage{}, err
	}
	part, from := splitSeq(opts.FromSequenceNumber)
	if part >= n {
		return BrowsePage{}, nil
	}
	res, err := r.c.st.Browse(ctx, &store.BrowseParams{Queue: partitionQueue(r.queue, part), DeadLetters: r.dead, FromSeq: from,
		Max: max, Scan: MaxBrowseScan, Match: f.matches})
	if err != nil {
		return BrowsePage{}, err
	}
	publicDeadLetters(part, res.Messages)
	next := publicSeq(part, res.Next)
	if res.Next == 0 && part+1 < n {
		next = publicSeq(part+1, 1)
	}
	page := BrowsePage{Next: next, Messages: make([]*ReceivedMessage, 0, len(res.Messages))}
	now := time.Now()
	for _, d := range res.Messages {
		if r.dead {
			page.Messages = append(page.Messages, deadLetterMessage(r.queue, d))
			continue
		}
		m := received(r.queue, d.Message)
		if d.State == StateLocked && d.VisibleAt.After(now) {
			m.LockedUntil = d.VisibleAt // when its lock ends, unless renewed
		}
		page.Messages = append(page.Messages, m)
	}
	return page, nil
}
