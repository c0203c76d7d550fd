package watermill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	wm "github.com/ThreeDotsLabs/watermill"
	"github.com/sluicehq/sluice"
)

// ErrClosed is returned by a Publisher's or a Subscriber's calls after it
// was closed.
var ErrClosed = errors.New("sluice/watermill: closed")

// Entities says what a Watermill topic names in sluice.
type Entities int

const (
	// Queues: a topic is a queue, whose subscribers compete for its
	// messages.
	Queues Entities = iota
	// Topics: a topic is a sluice topic, and a subscriber's consumer group
	// one of its subscriptions.
	Topics
	// Streams: a topic is a stream namespace, a message's stream the key
	// its metadata field Config.StreamKey names, and a subscriber's
	// consumer group a stream consumer, delivered each stream's events in
	// order.
	Streams
)

// String names the kind.
func (e Entities) String() string {
	switch e {
	case Queues:
		return "queues"
	case Topics:
		return "topics"
	case Streams:
		return "streams"
	}
	return fmt.Sprintf("Entities(%d)", int(e))
}

// MaxPrefetchCount bounds Config.PrefetchCount: a receive takes at most
// 1,000 messages (sluice's default limit of a batch).
const MaxPrefetchCount = 999

// DefaultMaxLockRenewal is how long a subscriber renews the lock of a
// message it handed out, waiting for its Ack or Nack, unless the Config
// says otherwise: as sluice's Processor does.
const DefaultMaxLockRenewal = 5 * time.Minute

// Config configures a Publisher or a Subscriber. The zero value publishes
// to, and receives from, queues that exist.
type Config struct {
	// Entities is what a Watermill topic names: Queues (the default),
	// Topics or Streams.
	Entities Entities
	// ConsumerGroup is the subscription a Subscriber of Topics receives
	// from, or the consumer a Subscriber of Streams is (required there; a
	// Publisher and a Subscriber of Queues refuse one).
	ConsumerGroup string
	// AutoCreate creates a missing queue, topic or subscription when a
	// call needs it, with the properties below (nil: sluice's defaults).
	// Streams need nothing created: a namespace exists once it holds an
	// event, and a consumer group's subscription is stored by
	// SubscribeInitialize and Subscribe whatever this says.
	AutoCreate             bool
	QueueProperties        *sluice.QueueProperties
	TopicProperties        *sluice.TopicProperties
	SubscriptionProperties *sluice.SubscriptionProperties
	// PrefetchCount is how many messages a subscription receives ahead of
	// the one it has handed out, saving a round trip a message. It needs a
	// client that hands messages back without counting a delivery (the
	// library's and the network client's Receiver.Release; through another
	// a subscription receives one at a time): a subscription that ends, or whose message
	// is nacked, hands back what it received ahead, so that the nacked
	// message comes first again. A message received ahead whose lock is
	// half gone by its turn is renewed before it goes out. 0 receives one
	// at a time; at most MaxPrefetchCount.
	PrefetchCount int
	// Retry keeps a nacked message hidden for the delay it returns for
	// the message's delivery count (sluice.ExponentialBackoff, for one);
	// nil delivers it again at once.
	Retry sluice.RetryPolicy
	// MaxLockRenewal is how long a Subscriber renews the lock of a message
	// it handed out while it waits for its Ack or Nack: 0 is
	// DefaultMaxLockRenewal; negative, never. A message whose lock ends is
	// delivered again, and its Ack then fails (logged).
	MaxLockRenewal time.Duration
	// Logger hears what a Subscriber cannot report through its channel: a
	// failed receive or settlement. Nil discards it.
	Logger wm.LoggerAdapter
	// SessionKey names the metadata field that carries a message's
	// SessionID, for entities that require sessions: a Publisher sends
	// each message in the session its field names (in the session named
	// as the topic, when the message has no such field or it is empty).
	// A Subscriber of an entity that requires sessions needs no setting:
	// it receives session by session, each session's messages in order,
	// whatever this says.
	SessionKey string
	// DB, for a Subscriber on the library's client, is the database its
	// tables are in, opened by the application (on SQLite, with a busy
	// timeout): each message goes out with a transaction of its own on it
	// (TxFromContext), which an Ack commits with the message's completion
	// and a Nack rolls back, so that the handler's writes there happen once
	// for each message completed. Acks are then completed one at a time.
	// Refused on Streams (see the package's documentation).
	DB *sql.DB
	// StreamKey, on Streams, names the metadata field that carries a
	// message's stream key: a Publisher appends each message to the stream
	// of the topic's namespace its field names (to the stream named as the
	// topic, when the message has no such field or it is empty). Each
	// stream's events are delivered in order; different streams' in
	// parallel.
	StreamKey string
	// ConsumerOptions, for a Subscriber of Streams, say how its consumer's
	// events are delivered (nil: sluice's defaults). Their Namespace is
	// the topic's, and must be left empty. A message not acked within
	// DeliveryTimeout (default 1 minute, at most 1 hour) of going out
	// fails its delivery, as a Nack does: it comes again after
	// RetryBackoff, up to MaxAttempts (default 5), and is then parked (or
	// its subscription faulted, as OnFailure says) so that the stream goes
	// on. An event waits for a subscription ready to take it for up to an
	// hour from its delivery's start, which fails it too.
	ConsumerOptions *sluice.ConsumerOptions
}

// check refuses a Config that names no known kind, or a consumer group
// where none applies; subscriber says a Subscriber uses it.
func (c *Config) check(subscriber bool) error {
	switch {
	case c.Entities != Queues && c.Entities != Topics && c.Entities != Streams:
		return fmt.Errorf("sluice/watermill: unknown entities %v: %w", c.Entities, sluice.ErrInvalidArgument)
	case c.Entities == Topics && subscriber && c.ConsumerGroup == "":
		return fmt.Errorf("sluice/watermill: a subscriber of topics needs a consumer group (the subscription): %w", sluice.ErrInvalidArgument)
	case c.Entities == Streams && subscriber && c.ConsumerGroup == "":
		return fmt.Errorf("sluice/watermill: a subscriber of streams needs a consumer group (the consumer): %w", sluice.ErrInvalidArgument)
	case c.ConsumerGroup != "" && (c.Entities == Queues || !subscriber):
		return fmt.Errorf("sluice/watermill: a consumer group applies to a subscriber of topics or streams only: %w", sluice.ErrInvalidArgument)
	case c.DB != nil && !subscriber:
		return fmt.Errorf("sluice/watermill: a DB applies to a subscriber only (a publisher in a transaction is NewTxPublisher's): %w",
			sluice.ErrInvalidArgument)
	case c.PrefetchCount < 0 || c.PrefetchCount > MaxPrefetchCount:
		return fmt.Errorf("sluice/watermill: prefetch count %d: must be between 0 and %d: %w", c.PrefetchCount, MaxPrefetchCount, sluice.ErrInvalidArgument)
	}
	if err := c.checkStreams(subscriber); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = wm.NopLogger{}
	}
	return nil
}

// checkStreams refuses the settings of queues on Streams, and those of
// streams elsewhere.
func (c *Config) checkStreams(subscriber bool) error {
	if c.Entities != Streams {
		if c.StreamKey != "" || c.ConsumerOptions != nil {
			return fmt.Errorf("sluice/watermill: a stream key or consumer options apply to streams only: %w", sluice.ErrInvalidArgument)
		}
		return nil
	}
	var refused []string
	for _, s := range []struct {
		set  bool
		name string
	}{
		{c.SessionKey != "", "a session key (streams have StreamKey)"},
		{c.PrefetchCount != 0, "a prefetch count (a stream processor reads ahead)"},
		{c.Retry != nil, "a retry policy (ConsumerOptions' RetryBackoff spaces a stream's retries)"},
		{c.MaxLockRenewal != 0, "a lock renewal (events hold no lock: ConsumerOptions' DeliveryTimeout bounds a delivery)"},
		{c.DB != nil, "a DB (not yet: a delivery's transaction would stay open while its event waits for a subscription)"},
		{c.QueueProperties != nil || c.TopicProperties != nil || c.SubscriptionProperties != nil, "entity properties"},
		{c.ConsumerOptions != nil && !subscriber, "consumer options on a publisher"},
		{c.ConsumerOptions != nil && c.ConsumerOptions.Namespace != "", "a namespace in the consumer options (the topic is)"},
		{c.ConsumerOptions != nil && c.ConsumerOptions.DeliveryTimeout > maxQueued, fmt.Sprintf("a delivery timeout over %v", maxQueued)},
	} {
		if s.set {
			refused = append(refused, s.name)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("sluice/watermill: on streams, %s: %w", strings.Join(refused, ", "), sluice.ErrInvalidArgument)
	}
	return nil
}

// ensure creates the entity a topic names, and for a subscriber of
// Topics its subscription, unless they exist.
func (c *Config) ensure(ctx context.Context, client sluice.API, topic string, subscriber bool) error {
	var err error
	switch c.Entities {
	case Streams:
		return nil // a Subscriber stores its group's subscription itself
	case Queues:
		_, err = client.CreateQueue(ctx, topic, c.QueueProperties)
	case Topics:
		_, err = client.CreateTopic(ctx, topic, c.TopicProperties)
	}
	if err != nil && !errors.Is(err, sluice.ErrEntityExists) {
		return err
	}
	if c.Entities == Topics && subscriber {
		_, err = client.CreateSubscription(ctx, topic, c.ConsumerGroup, c.SubscriptionProperties)
		if err != nil && !errors.Is(err, sluice.ErrEntityExists) {
			return err
		}
	}
	return nil
}
