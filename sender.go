package sluice

import (
	"context"
	"database/sql"
	"fmt"

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
// it (CancelScheduled). A send to a topic copies each message, in the
// same transaction, to every subscription with a matching rule, and
// returns zeros: each subscription numbers its own copy. A send to a
// queue that forwards goes where the queue forwards it, and returns the
// numbers the final queue gave when there is one, zeros otherwise.
func (s *Sender) SendBatch(ctx context.Context, msgs []*Message) ([]int64, error) {
	e, batches, err := s.prepare(ctx, msgs)
	if err != nil {
		return nil, err
	}
	seqs := make([]int64, len(msgs))
	switch {
	case len(batches) == 0:
		// No subscription took the messages: accepted and dropped, as in
		// Service Bus.
		return seqs, nil
	case len(batches) == 1 && len(batches[0].Messages) == len(msgs) && !deadLettered(batches[0]):
		// All to one queue: group-committed like any send.
		got, err := s.c.st.Enqueue(ctx, &batches[0])
		if err != nil || e.kind == kindTopic {
			return seqs, err
		}
		return got, nil
	}
	got, err := s.c.st.EnqueueAll(ctx, &store.EnqueueAllParams{Batches: batches})
	if err != nil {
		return nil, err
	}
	return s.numbers(e, got, seqs), nil
}

// SendTx sends messages in the caller's transaction tx, opened on the
// same database (with a driver and settings that reach sluice's tables:
// on PostgreSQL, a search_path that includes sluice's schema): they commit
// with the caller's own writes, or not at all. On an error, roll tx back.
// The queues' counter rows stay locked until tx ends, so keep it short,
// and on SQLite make no other sluice call that writes while it is open.
// Receivers in other processes wake on commit on PostgreSQL; elsewhere
// they find the messages on their next poll.
func (s *Sender) SendTx(ctx context.Context, tx *sql.Tx, msgs ...*Message) ([]int64, error) {
	txe, ok := s.c.st.(store.TxEnqueuer)
	if !ok {
		return nil, errInvalid("send", "this backend cannot join a caller's transaction")
	}
	e, batches, err := s.prepare(ctx, msgs)
	if err != nil {
		return nil, err
	}
	seqs := make([]int64, len(msgs))
	if len(batches) == 0 {
		return seqs, nil
	}
	got, err := txe.EnqueueTx(ctx, tx, &store.EnqueueAllParams{Batches: batches})
	if err != nil {
		return nil, err
	}
	return s.numbers(e, got, seqs), nil
}

// prepare checks a send and works out the batches it writes.
func (s *Sender) prepare(ctx context.Context, msgs []*Message) (entity, []store.EnqueueParams, error) {
	e, err := s.c.entity(ctx, s.queue)
	if err != nil {
		return e, nil, fmt.Errorf("sluice: send: %w", err)
	}
	if e.kind == kindSubscription {
		return e, nil, errInvalid("send", "%q is a subscription: send to its topic", s.queue)
	}
	if len(msgs) == 0 {
		return e, nil, errInvalid("send", "no messages")
	}
	batch := make([]store.NewMessage, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return e, nil, errInvalid("send", "message %d is nil", i)
		}
		batch[i] = m.newMessage()
		if size := batch[i].MessageSize(); size > e.props.MaxMessageSize {
			return e, nil, fmt.Errorf("sluice: send: message %d is %d bytes, %s %q allows %d: %w",
				i, size, e.kind, s.queue, e.props.MaxMessageSize, ErrMessageTooLarge)
		}
	}
	if e.kind == kindQueue && e.forwardTo == "" {
		return e, []store.EnqueueParams{{Queue: s.queue, Messages: batch}}, nil
	}
	batches, err := s.c.route(ctx, s.queue, batch, msgs)
	if err != nil {
		return e, nil, fmt.Errorf("sluice: send: %w", err)
	}
	return e, batches, nil
}

// numbers picks what a send returns: a queue's numbers when every
// message landed in one queue, zeros otherwise.
func (s *Sender) numbers(e entity, got [][]int64, zeros []int64) []int64 {
	if e.kind == kindQueue && len(got) == 1 && len(got[0]) == len(zeros) {
		return got[0]
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

// CancelScheduled deletes scheduled messages of the sender's queue that
// have not become active yet, by sequence number, atomically.
// ErrMessageNotFound (and nothing cancelled) if any is not such a message.
// A message scheduled through a topic or a forwarding queue is numbered
// by the queue or subscription that holds it: cancel it there.
func (s *Sender) CancelScheduled(ctx context.Context, seqs ...int64) error {
	return s.c.st.CancelScheduled(ctx, &store.CancelParams{Queue: s.queue, Seqs: seqs})
}
