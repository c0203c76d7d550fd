package watermill_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/libtest"
	sluicewm "github.com/sluicehq/sluice/watermill"
)

func TestMain(m *testing.M) { libtest.Main(m) }

// retries is the MaxDeliveryCount of the entities the suite creates: its
// TestContinueAfterErrors nacks one message up to 300 times, expecting it
// to come again each time (Watermill bounds retries in its middleware).
const retries = 1000

// config is what the suite's publishers and subscribers share. The
// subscribers of queues receive ahead (prefetch 8), those of topics one
// at a time: the suite runs both ways of receiving.
func config(entities sluicewm.Entities, group string) sluicewm.Config {
	prefetch := 0
	if entities == sluicewm.Queues {
		prefetch = 8
	}
	return sluicewm.Config{
		Entities:               entities,
		ConsumerGroup:          group,
		PrefetchCount:          prefetch,
		AutoCreate:             true,
		QueueProperties:        &sluice.QueueProperties{MaxDeliveryCount: retries},
		SubscriptionProperties: &sluice.SubscriptionProperties{MaxDeliveryCount: retries},
	}
}

// sessionConfig is config for queues that require sessions, a topic's
// messages in the session its name names (none sets "session"): its
// subscribers receive session by session, with prefetch.
func sessionConfig() sluicewm.Config {
	cfg := config(sluicewm.Queues, "")
	cfg.QueueProperties = &sluice.QueueProperties{MaxDeliveryCount: retries, RequiresSession: true}
	cfg.SessionKey = "session"
	return cfg
}

// streamConfig is config for streams: a message's stream is the one its
// "stream" metadata names (none sets it: a topic is one stream), and a
// nacked event comes again at once, up to retries times.
func streamConfig(group string) sluicewm.Config {
	return sluicewm.Config{Entities: sluicewm.Streams, ConsumerGroup: group, StreamKey: "stream"}
}

// streamConsumer is the consumer options of the suite's stream subscribers.
var streamConsumer = &sluice.ConsumerOptions{MaxAttempts: retries, RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond}

// pubSub returns a constructor of publishers and subscribers on c; the
// subscribers of Topics receive as group.
func pubSub(c sluice.API, entities sluicewm.Entities, sessions bool) tests.ConsumerGroupPubSubConstructor {
	return func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		pcfg := config(entities, "")
		if entities == sluicewm.Topics && group == "" {
			group = "default"
		}
		scfg := config(entities, group)
		if sessions {
			pcfg, scfg = sessionConfig(), sessionConfig()
		}
		if entities == sluicewm.Streams {
			if group == "" {
				group = "default"
			}
			pcfg, scfg = streamConfig(""), streamConfig(group)
			scfg.ConsumerOptions = streamConsumer
		}
		pub, err := sluicewm.NewPublisher(c, pcfg)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := sluicewm.NewSubscriber(c, scfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() }) // the suite leaves some open
		return pub, sub
	}
}

// TestPubSub runs Watermill's universal suite on each backend, with a
// Watermill topic as a queue, as a queue that requires sessions, as a
// sluice topic with consumer groups, and as a stream namespace whose
// consumer groups are stream consumers.
// The features claim what sluice guarantees: messages persist; one
// subscriber gets them in order; delivery is at least once, not exactly
// once; a subscriber that starts late does not get what another of its
// group consumed.
func TestPubSub(t *testing.T) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		for _, v := range []struct {
			name     string
			entities sluicewm.Entities
			sessions bool
		}{{"queues", sluicewm.Queues, false}, {"sessions", sluicewm.Queues, true}, {"topics", sluicewm.Topics, false},
			{"streams", sluicewm.Streams, false}} {
			t.Run(v.name, func(t *testing.T) {
				ctor := pubSub(c, v.entities, v.sessions)
				tests.TestPubSub(t, tests.Features{
					ConsumerGroups:                      v.entities != sluicewm.Queues,
					ExactlyOnceDelivery:                 false,
					GuaranteedOrder:                     true,
					GuaranteedOrderWithSingleSubscriber: true,
					Persistent:                          true,
				}, func(t *testing.T) (message.Publisher, message.Subscriber) {
					return ctor(t, "")
				}, ctor)
			})
		}
	})
}
