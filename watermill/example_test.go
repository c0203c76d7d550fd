package watermill_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	wm "github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/sluicehq/sluice"
	sluicewm "github.com/sluicehq/sluice/watermill"
)

// Watermill code on sluice's embedded SQLite: every consumer group of a
// topic gets each message; Ack completes it.
func Example() {
	dir, _ := os.MkdirTemp("", "sluice-watermill")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	client, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	cfg := sluicewm.Config{Entities: sluicewm.Topics, AutoCreate: true}
	pub, err := sluicewm.NewPublisher(client, cfg)
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	var subs []*sluicewm.Subscriber
	for _, group := range []string{"billing", "shipping"} {
		cfg.ConsumerGroup = group
		sub, err := sluicewm.NewSubscriber(client, cfg)
		if err != nil {
			panic(err)
		}
		defer sub.Close()
		// The group's subscription gets what is published from now on.
		if err := sub.SubscribeInitialize("orders"); err != nil {
			panic(err)
		}
		subs = append(subs, sub)
	}

	msg := message.NewMessage(wm.NewUUID(), []byte("one pizza"))
	msg.Metadata.Set("customer", "ada")
	if err := pub.Publish("orders", msg); err != nil {
		panic(err)
	}

	for i, sub := range subs {
		msgs, err := sub.Subscribe(ctx, "orders")
		if err != nil {
			panic(err)
		}
		got := <-msgs
		fmt.Printf("group %d: %s for %s, same UUID: %t\n", i+1, got.Payload, got.Metadata.Get("customer"), got.UUID == msg.UUID)
		got.Ack()
	}
	// Output:
	// group 1: one pizza for ada, same UUID: true
	// group 2: one pizza for ada, same UUID: true
}

// Watermill code on a sluice stream: each customer's events come in the
// order they were published, and a consumer group stores its
// subscription before the first publish.
func Example_streams() {
	dir, _ := os.MkdirTemp("", "sluice-watermill-streams")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	client, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	pub, err := sluicewm.NewPublisher(client, sluicewm.Config{Entities: sluicewm.Streams, StreamKey: "customer"})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	sub, err := sluicewm.NewSubscriber(client, sluicewm.Config{Entities: sluicewm.Streams, ConsumerGroup: "billing"})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	// The group gets what is published from now on.
	if err := sub.SubscribeInitialize("orders"); err != nil {
		panic(err)
	}

	for _, what := range []string{"placed", "paid", "shipped"} {
		msg := message.NewMessage(wm.NewUUID(), []byte(what))
		msg.Metadata.Set("customer", "ada")
		if err := pub.Publish("orders", msg); err != nil {
			panic(err)
		}
	}

	msgs, err := sub.Subscribe(ctx, "orders")
	if err != nil {
		panic(err)
	}
	for range 3 {
		got := <-msgs
		fmt.Printf("%s: %s\n", got.Metadata.Get("customer"), got.Payload)
		got.Ack()
	}
	// Output:
	// ada: placed
	// ada: paid
	// ada: shipped
}
