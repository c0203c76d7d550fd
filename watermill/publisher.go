package watermill

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/sluicehq/sluice"
)

// publishBatch is how many messages one send carries: a Publish of more
// sends them in batches of this size, each atomic.
const publishBatch = 100

// Publisher publishes Watermill messages to sluice queues or topics
// (message.Publisher). It is safe for concurrent use.
type Publisher struct {
	client sluice.API
	cfg    Config
	// lib and tx, for a publisher on a transaction (NewTxPublisher).
	lib *sluice.Client
	tx  sluice.Tx

	mu     sync.Mutex
	closed bool
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher on client, which it does not close.
func NewPublisher(client sluice.API, cfg Config) (*Publisher, error) {
	if client == nil {
		return nil, fmt.Errorf("sluice/watermill: new publisher: no client: %w", sluice.ErrInvalidArgument)
	}
	if err := cfg.check(false); err != nil {
		return nil, err
	}
	return &Publisher{client: client, cfg: cfg}, nil
}

// Publish sends msgs to the queue or topic named topic, in order, in
// batches of up to 100, each atomic (in the publisher's transaction, for
// one of NewTxPublisher's); it returns when they are stored.
// The first message's context bounds the call. A message's UUID becomes
// its MessageID and its metadata its application properties.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	s, err := p.sender(topic)
	if err != nil || len(msgs) == 0 {
		return err
	}
	ctx := msgs[0].Context()
	for sent := 0; sent < len(msgs); {
		chunk := msgs[sent:min(sent+publishBatch, len(msgs))]
		batch := make([]*sluice.Message, len(chunk))
		for i, m := range chunk {
			batch[i] = &sluice.Message{MessageID: m.UUID, Body: m.Payload, ApplicationProperties: maps.Clone(map[string]string(m.Metadata))}
			if p.cfg.SessionKey != "" {
				batch[i].SessionID = cmp.Or(m.Metadata.Get(p.cfg.SessionKey), topic)
			}
		}
		var err error
		if p.tx != nil {
			err = p.sendTx(ctx, topic, batch)
		} else {
			_, err = s.SendBatch(ctx, batch)
		}
		if errors.Is(err, sluice.ErrEntityNotFound) && p.cfg.AutoCreate {
			if err = p.cfg.ensure(ctx, p.client, topic, false); err == nil {
				_, err = s.SendBatch(ctx, batch)
			}
		}
		if err != nil {
			return fmt.Errorf("sluice/watermill: publish to %s (%d of %d messages sent): %w", topic, sent, len(msgs), err)
		}
		sent += len(chunk)
	}
	return nil
}

// sender returns a sender to topic (a sender is a name and the client:
// none is kept).
func (p *Publisher) sender(topic string) (sluice.MessageSender, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("sluice/watermill: publish to %s: %w", topic, ErrClosed)
	}
	s, err := p.client.MessageSender(topic)
	if err != nil {
		return nil, fmt.Errorf("sluice/watermill: publish to %s: %w", topic, err)
	}
	return s, nil
}

// Close ends publishing: later calls fail with ErrClosed. A Publish in
// progress completes. The client stays open.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}
