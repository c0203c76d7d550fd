package sluice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Sender sends messages to one queue. It is safe for concurrent use:
// concurrent sends share commits.
type Sender struct {
	c     *Client
	queue string
}

// NewSender returns a sender for a queue. The queue must exist when
// messages are sent, not now.
func (c *Client) NewSender(queue string) (*Sender, error) {
	queue = canonical(queue)
	if err := store.ValidateName("queue", queue); err != nil {
		return nil, fmt.Errorf("sluice: new sender: %w", err)
	}
	return &Sender{c: c, queue: queue}, nil
}

// Send sends one message and returns its sequence number. When it returns
// nil the message is stored durably. On a queue with duplicate detection,
// a duplicate is accepted without being stored and Send returns the
// first one's number.
func (s *Sender) Send(ctx context.Context, m *Message) (int64, error) {
	seqs, err := s.SendBatch(ctx, []*Message{m})
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// SendBatch sends messages atomically, all or none, and returns their
// sequence numbers in the order given. A message with a
// ScheduledEnqueueTime in the future is scheduled: its number can cancel
// it (CancelScheduled).
//
// A send to a topic copies each message, in the same transaction, to
// every subscription with a matching rule; a send to a queue that
// forwards goes where the queue forwards it. Such a send returns, for
// each scheduled message, a number of the topic or queue sent to, which
// cancels all of the message's copies while they wait; the other
// messages get 0, since each queue and subscription numbers its own
// copies. A topic or forwarding queue with duplicate detection checks
// each message once, before it is copied or forwarded: a duplicate is
// accepted, stored nowhere, and gets 0.
//
// The batch limits (MaxBatch messages, MaxBatchBytes) apply to msgs, not
// to the copies a topic makes of them. A copy that one subscription or
// forward target cannot take (its target is gone or too small, it needs
// a SessionID, the chain is too long) is dead-lettered there with a
// reason, and the send succeeds for the others.
func (s *Sender) SendBatch(ctx context.Context, msgs []*Message) ([]int64, error) {
	in := s.c.instrumentation()
	if in == nil {
		return s.sendBatch(ctx, msgs)
	}
	op := &Operation{Kind: OperationSend, Entity: s.queue, Messages: CopyMessages(msgs)}
	ctx, end := in.Start(ctx, op)
	seqs, err := s.sendBatch(ctx, op.Messages)
	end(err)
	return seqs, err
}

// sendBatch does SendBatch's work.
func (s *Sender) sendBatch(ctx context.Context, msgs []*Message) ([]int64, error) {
	e, p, err := s.prepare(ctx, msgs)
	if err != nil {
		return nil, err
	}
	seqs, err := s.enqueue(ctx, e, &p, len(msgs))
	if errors.Is(err, ErrEntityNotFound) && (routed(e) || p.parts != nil) {
		// An entity the send was routed through, or the partitioned queue
		// sent to, as this client's cache knew it, is gone: route again
		// from fresh settings, once, so that its copies are dead-lettered
		// rather than the send failing (or the send fails as the queue
		// now is).
		s.c.forgetAll()
		if e, p, err = s.prepare(ctx, msgs); err != nil {
			return nil, err
		}
		seqs, err = s.enqueue(ctx, e, &p, len(msgs))
	}
	if err == nil {
		s.c.noteSent(s.queue, len(msgs))
	}
	return seqs, err
}

// enqueue writes what prepare worked out for a send of n messages.
func (s *Sender) enqueue(ctx context.Context, e entity, p *sendPlan, n int) ([]int64, error) {
	seqs := make([]int64, n)
	switch {
	case len(p.Batches) == 0 && p.Routed == nil && len(p.Arrivals) == 0:
		// No subscription took the messages: accepted and dropped, as in
		// Service Bus.
		return seqs, nil
	case p.Routed == nil && p.Arrivals == nil && len(p.Batches) == 1 && len(p.Batches[0].Messages) == n && !deadLettered(p.Batches[0]):
		// All to one queue: group-committed like any send.
		got, err := s.c.st.Enqueue(ctx, &p.Batches[0])
		if err != nil || routed(e) {
			return seqs, err
		}
		return p.numbers(e, store.EnqueueAllResult{Seqs: [][]int64{got}}, seqs), nil
	}
	got, err := s.c.st.EnqueueAll(ctx, &p.EnqueueAllParams)
	if err != nil {
		return nil, err
	}
	return p.numbers(e, got, seqs), nil
}

// SendTx sends messages in the caller's transaction tx, opened on the
// same database (with a driver and settings that reach sluice's tables:
// on PostgreSQL, a search_path that includes sluice's schema): they commit
// with the caller's own writes, or not at all. On an error, roll tx back.
// The queues' counter rows stay locked until tx ends, so keep it short,
// and on SQLite make no other sluice call that writes while it is open.
// Receivers in other processes wake on commit on PostgreSQL; elsewhere
// they find the messages on their next poll. It returns numbers as
// SendBatch does.
func (s *Sender) SendTx(ctx context.Context, tx Tx, msgs ...*Message) ([]int64, error) {
	in := s.c.instrumentation()
	if in == nil {
		return s.sendTx(ctx, tx, msgs)
	}
	op := &Operation{Kind: OperationSend, Entity: s.queue, Messages: CopyMessages(msgs), InTx: true}
	ctx, end := in.Start(ctx, op)
	seqs, err := s.sendTx(ctx, tx, op.Messages)
	end(err)
	return seqs, err
}

// sendTx does SendTx's work.
func (s *Sender) sendTx(ctx context.Context, tx Tx, msgs []*Message) ([]int64, error) {
	txe, ok := s.c.st.(store.TxEnqueuer)
	if !ok {
		return nil, errInvalid("send", "this backend cannot join a caller's transaction")
	}
	e, p, err := s.prepare(ctx, msgs)
	if err != nil {
		return nil, err
	}
	seqs := make([]int64, len(msgs))
	if len(p.Batches) == 0 && p.Routed == nil && len(p.Arrivals) == 0 {
		return seqs, nil
	}
	got, err := txe.EnqueueTx(ctx, tx, &p.EnqueueAllParams)
	if err != nil {
		return nil, err
	}
	return p.numbers(e, got, seqs), nil
}

// sendPlan is what a send writes: storage's batches, and for a send to
// a partitioned queue, which partition each batch is.
type sendPlan struct {
	store.EnqueueAllParams
	// parts and indexes, for a partitioned queue: each batch's partition,
	// and the indexes of its messages in the send.
	parts   []int
	indexes [][]int
}

// prepare checks a send and works out what it writes: one batch to the
// queue itself, or the batches a topic or forwarding sends on, with the
// send they copy when it schedules messages.
func (s *Sender) prepare(ctx context.Context, msgs []*Message) (entity, sendPlan, error) {
	var p sendPlan
	e, err := s.c.entity(ctx, s.queue)
	if err != nil {
		return e, p, fmt.Errorf("sluice: send: %w", err)
	}
	if e.kind == kindSubscription {
		return e, p, errInvalid("send", "%q is a subscription: send to its topic", s.queue)
	}
	if len(msgs) == 0 {
		return e, p, errInvalid("send", "no messages")
	}
	batch, err := s.checkBatch(e, msgs)
	if err != nil {
		return e, p, err
	}
	scheduled := false
	for i := range batch {
		scheduled = scheduled || !batch[i].VisibleAt.IsZero()
	}
	if !routed(e) {
		if e.props.partitions() == 1 {
			p.Batches = []store.EnqueueParams{{Queue: e.name, Messages: batch}}
			return e, p, nil
		}
		p.Batches, p.indexes = s.c.partitionBatch(&e, batch)
		for _, b := range p.Batches {
			p.parts = append(p.parts, partitionOfQueue(e.name, b.Queue))
		}
		return e, p, nil
	}
	r, err := s.c.route(ctx, &e, batch, msgs)
	if err != nil {
		return e, p, fmt.Errorf("sluice: send: %w", err)
	}
	p.EnqueueAllParams = r.params()
	if scheduled {
		at := make([]time.Time, len(batch))
		for i := range batch {
			at[i] = batch[i].VisibleAt
		}
		p.Routed = &store.RoutedSend{Queue: e.name, VisibleAt: at, Origins: r.origins}
	}
	return e, p, nil
}

// checkBatch turns a send's messages into storage's and checks them
// against the entity sent to and the send's limits: these apply to what
// the sender sent, not to the copies a topic or forwarding makes of it.
func (s *Sender) checkBatch(e entity, msgs []*Message) ([]store.NewMessage, error) {
	if len(msgs) > s.c.limits.MaxBatch {
		return nil, fmt.Errorf("sluice: send: %d messages in one batch, at most %d allowed: %w", len(msgs), s.c.limits.MaxBatch, ErrBatchTooLarge)
	}
	batch := make([]store.NewMessage, len(msgs))
	total := 0
	for i, m := range msgs {
		if m == nil {
			return nil, errInvalid("send", "message %d is nil", i)
		}
		if err := validateIDs(m); err != nil {
			return nil, fmt.Errorf("sluice: send: message %d: %w", i, err)
		}
		batch[i] = m.newMessage()
		size := batch[i].MessageSize()
		if size > e.props.MaxMessageSize {
			return nil, fmt.Errorf("sluice: send: message %d is %d bytes, %s %q allows %d: %w",
				i, size, e.kind, s.queue, e.props.MaxMessageSize, ErrMessageTooLarge)
		}
		if err := batch[i].Validate(); err != nil {
			return nil, fmt.Errorf("sluice: send: message %d: %w", i, err)
		}
		total += size
	}
	if total > s.c.limits.MaxBatchBytes {
		return nil, fmt.Errorf("sluice: send: batch is %d bytes, at most %d allowed: %w", total, s.c.limits.MaxBatchBytes, ErrBatchTooLarge)
	}
	return batch, nil
}

// routed reports whether messages sent to e are stored elsewhere.
func routed(e entity) bool {
	return e.kind == kindTopic || e.forwardTo != ""
}

// numbers picks what a send returns, in zeros: a plain queue's own
// numbers (a partitioned queue's with their partitions); for a routed
// send, the numbers its scheduled messages took, 0 for the others.
func (p *sendPlan) numbers(e entity, got store.EnqueueAllResult, zeros []int64) []int64 {
	switch {
	case routed(e):
		copy(zeros, got.Routed)
	case p.parts == nil:
		copy(zeros, got.Seqs[0])
	default:
		for b, seqs := range got.Seqs {
			for k, seq := range seqs {
				zeros[p.indexes[b][k]] = publicSeq(p.parts[b], seq)
			}
		}
	}
	return zeros
}

func deadLettered(b store.EnqueueParams) bool {
	for i := range b.Messages {
		if b.Messages[i].DeadLetterReason != "" {
			return true
		}
	}
	return false
}

// CancelScheduled deletes scheduled messages that have not become active
// yet, by the sequence numbers sends of this sender returned, atomically.
// A number of a send to a topic or a forwarding queue cancels every copy
// of the message. ErrMessageNotFound (and nothing cancelled) if any is not
// such a message.
//
// On a partitioned queue, numbers of several partitions are cancelled
// partition by partition: each partition's are all or none.
func (s *Sender) CancelScheduled(ctx context.Context, seqs ...int64) error {
	n, err := s.c.partitionsOf(ctx, s.queue)
	if err != nil || n == 1 {
		if err != nil {
			return err
		}
		return s.c.st.CancelScheduled(ctx, &store.CancelParams{Queue: s.queue, Seqs: seqs})
	}
	groups, err := groupAllSeqs(seqs, n)
	if err != nil {
		return fmt.Errorf("sluice: cancel scheduled: %w", err)
	}
	for _, g := range groups {
		if err := s.c.st.CancelScheduled(ctx, &store.CancelParams{Queue: partitionQueue(s.queue, g.part), Seqs: g.seqs}); err != nil {
			return err
		}
	}
	return nil
}
