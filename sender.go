package sluice

import (
	"context"
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
// it (CancelScheduled).
func (s *Sender) SendBatch(ctx context.Context, msgs []*Message) ([]int64, error) {
	props, err := s.c.properties(ctx, s.queue)
	if err != nil {
		return nil, fmt.Errorf("sluice: send: %w", err)
	}
	batch := make([]store.NewMessage, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return nil, errInvalid("send", "message %d is nil", i)
		}
		batch[i] = m.newMessage()
		if size := batch[i].MessageSize(); size > props.MaxMessageSize {
			return nil, fmt.Errorf("sluice: send: message %d is %d bytes, queue %q allows %d: %w",
				i, size, s.queue, props.MaxMessageSize, ErrMessageTooLarge)
		}
	}
	return s.c.st.Enqueue(ctx, &store.EnqueueParams{Queue: s.queue, Messages: batch})
}

// CancelScheduled deletes scheduled messages that have not become active
// yet, by sequence number, atomically. ErrMessageNotFound (and nothing
// cancelled) if any is not such a message.
func (s *Sender) CancelScheduled(ctx context.Context, seqs ...int64) error {
	return s.c.st.CancelScheduled(ctx, &store.CancelParams{Queue: s.queue, Seqs: seqs})
}
