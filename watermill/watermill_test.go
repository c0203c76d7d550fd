package watermill_test

import (
	"testing"

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

// pubSub returns a constructor of publishers and subscribers on c; the
// subscribers of Topics receive as group.
func pubSub(c sluice.API, entities sluicewm.Entities) tests.ConsumerGroupPubSubConstructor {
	return func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		pcfg := config(entities, "")
		if entities == sluicewm.Topics && group == "" {
			group = "default"
		}
		pub, err := sluicewm.NewPublisher(c, pcfg)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := sluicewm.NewSubscriber(c, config(entities, group))
		if err != nil {
			t.Fatal(err)
		}
		return pub, sub
	}
}

// TestPubSub runs Watermill's universal suite on each backend, with a
// Watermill topic as a queue and as a sluice topic with consumer groups.
// The features claim what sluice guarantees: messages persist; one
// subscriber gets them in order; delivery is at least once, not exactly
// once; a subscriber that starts late does not get what another of its
// group consumed.
func TestPubSub(t *testing.T) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		for _, entities := range []sluicewm.Entities{sluicewm.Queues, sluicewm.Topics} {
			t.Run(entities.String(), func(t *testing.T) {
				ctor := pubSub(c, entities)
				tests.TestPubSub(t, tests.Features{
					ConsumerGroups:                      entities == sluicewm.Topics,
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
