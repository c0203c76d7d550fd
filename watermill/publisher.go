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

// UUIDProperty is the property of a stream event that carries its
// Watermill message's UUID (events have no MessageID). A Subscriber of
// Streams takes it out of the message's metadata; an event without it
// gets "PARTITION-POSITION" as its UUID, unique within the namespace.
const UUIDProperty = "watermill_uuid"

// Publisher publishes Watermill messages to sluice queues, topics or
// streams (message.Publisher). It is safe for concurrent use.
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
//
// On Streams, Publish appends msgs to the streams of the namespace named
// topic, each to the stream its StreamKey field names, in order within
// each stream: a batch of up to 100 is one append per stream (all in the
// publisher's transaction, for one of NewTxPublisher's). The UUID rides
// in the event's property UUIDProperty, the metadata in the others.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if p.isClosed() {
		return fmt.Errorf("sluice/watermill: publish to %s: %w", topic, ErrClosed)
	}
	if len(msgs) == 0 {
		return nil
	}
	if p.cfg.Entities == Streams {
		return p.append(topic, msgs)
	}
	s, err := p.client.MessageSender(topic)
	if err != nil {
		return fmt.Errorf("sluice/watermill: publish to %s: %w", topic, err)
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

// append appends msgs to the streams of namespace topic, in batches of
// publishBatch messages, each batch one append per stream key.
func (p *Publisher) append(topic string, msgs []*message.Message) error {
	ctx := msgs[0].Context()
	for sent := 0; sent < len(msgs); {
		chunk := msgs[sent:min(sent+publishBatch, len(msgs))]
		var keys []string
		streams := make(map[string][]sluice.Event)
		for _, m := range chunk {
			key := topic
			if p.cfg.StreamKey != "" {
				key = cmp.Or(m.Metadata.Get(p.cfg.StreamKey), topic)
			}
			if _, ok := streams[key]; !ok {
				keys = append(keys, key)
			}
			props := maps.Clone(map[string]string(m.Metadata))
			if props == nil {
				props = make(map[string]string, 1)
			}
			props[UUIDProperty] = m.UUID
			streams[key] = append(streams[key], sluice.Event{Body: m.Payload, Properties: props})
		}
		for _, key := range keys {
			id := sluice.StreamID{Namespace: topic, Key: key}
			var err error
			if p.tx != nil {
				_, err = p.lib.PublishTx(ctx, p.tx, id, streams[key]...)
			} else {
				_, err = p.client.Publish(ctx, id, streams[key]...)
			}
			if err != nil {
				return fmt.Errorf("sluice/watermill: publish to stream %s (%d of %d messages appended before this batch of %d, "+
					"and its messages of the streams before this one): %w", id, sent, len(msgs), len(chunk), err)
			}
		}
		sent += len(chunk)
	}
	return nil
}

func (p *Publisher) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close ends publishing: later calls fail with ErrClosed. A Publish in
// progress completes. The client stays open.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}
