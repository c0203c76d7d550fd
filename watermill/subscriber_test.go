package watermill_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	wm "github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/libtest"
	sluicewm "github.com/sluicehq/sluice/watermill"
)

// publish sends one message a body, in order.
func publish(t *testing.T, pub message.Publisher, topic string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if err := pub.Publish(topic, message.NewMessage(wm.NewUUID(), []byte(b))); err != nil {
			t.Fatal(err)
		}
	}
}

// subscribed creates queue topic with props, publishes bodies to it one at
// a time, and subscribes to it with cfg; the subscriber closes when the
// test ends.
func subscribed(t *testing.T, c *sluice.Client, topic string, props *sluice.QueueProperties, cfg sluicewm.Config, bodies ...string) (*sluicewm.Publisher, *sluicewm.Subscriber, <-chan *message.Message) {
	t.Helper()
	if _, err := c.CreateQueue(t.Context(), topic, props); err != nil {
		t.Fatal(err)
	}
	pub, err := sluicewm.NewPublisher(c, sluicewm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, pub, topic, bodies...)
	sub, err := sluicewm.NewSubscriber(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	msgs, err := sub.Subscribe(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return pub, sub, msgs
}

// next waits for the subscription's next message.
func next(t *testing.T, msgs <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatal("the subscription closed")
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no message within 30s")
	}
	return nil
}

// A nacked message comes again before those received ahead of it, and
// they, handed back unhandled, count no delivery: on a queue that allows
// two, two nacks in a row leave the messages behind them undelivered
// twice (abandoned twice, they would be dead-lettered).
func TestNackKeepsOrderAndCountsNoPrefetched(t *testing.T) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		for _, prefetch := range []int{0, 4} {
			t.Run(fmt.Sprintf("prefetch-%d", prefetch), func(t *testing.T) {
				topic := fmt.Sprintf("nack-%d", prefetch)
				_, sub, msgs := subscribed(t, c, topic, &sluice.QueueProperties{MaxDeliveryCount: 2},
					sluicewm.Config{PrefetchCount: prefetch}, "a", "b", "c", "d", "e")
				var got []string
				for _, nack := range []bool{true, false, true, false, false, false, false} {
					m := next(t, msgs)
					got = append(got, string(m.Payload))
					if nack {
						m.Nack()
					} else {
						m.Ack()
					}
				}
				// a, nacked, comes again and is acked; b, nacked on its
				// first delivery, comes again and is acked; the rest in
				// order, each on its first delivery.
				if want := "a a b b c d e"; fmt.Sprint(got) != "["+want+"]" {
					t.Fatalf("received %v, want [%s]", got, want)
				}
				if err := sub.Close(); err != nil {
					t.Fatal(err)
				}
				r, err := c.NewReceiver(topic, nil)
				if err != nil {
					t.Fatal(err)
				}
				peeked, err := r.Peek(t.Context(), 10, nil)
				if err != nil || len(peeked) != 0 {
					t.Fatalf("after every ack the queue holds %d messages (%v)", len(peeked), err)
				}
				if reasons, err := c.DeadLetterReasons(t.Context(), topic); err != nil || len(reasons) != 0 {
					t.Fatalf("dead letters: %v, %v; want none (c, d, e were handed back, not abandoned)", reasons, err)
				}
			})
		}
	})
}

// Closing a subscriber hands back what it received ahead without counting
// a delivery, and abandons the message it handed out, which counts one.
func TestCloseHandsBack(t *testing.T) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		const topic = "close"
		pub, sub, msgs := subscribed(t, c, topic, nil, sluicewm.Config{PrefetchCount: 2}, "a", "b", "c")
		m := next(t, msgs)
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-m.Context().Done():
		default:
			t.Error("the message's context did not end with its subscriber")
		}
		if _, open := <-msgs; open {
			t.Error("the channel is open after Close")
		}
		r, err := c.NewReceiver(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Receive(t.Context(), 3)
		if err != nil || len(got) != 3 {
			t.Fatalf("received %d of 3 after Close: %v", len(got), err)
		}
		for i, want := range []int{2, 1, 1} {
			if got[i].DeliveryCount != want {
				t.Errorf("%s: delivery %d, want %d", got[i].Body, got[i].DeliveryCount, want)
			}
		}
		if _, err := sub.Subscribe(t.Context(), topic); !errors.Is(err, sluicewm.ErrClosed) {
			t.Errorf("Subscribe after Close: %v, want ErrClosed", err)
		}
		if err := pub.Close(); err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(topic, message.NewMessage(wm.NewUUID(), nil)); !errors.Is(err, sluicewm.ErrClosed) {
			t.Errorf("Publish after Close: %v, want ErrClosed", err)
		}
	})
}

// Without AutoCreate nothing is created: a publish to a missing queue
// fails with ErrEntityNotFound. A bad Config is refused.
func TestConfig(t *testing.T) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		pub, err := sluicewm.NewPublisher(c, sluicewm.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish("missing", message.NewMessage(wm.NewUUID(), nil)); !errors.Is(err, sluice.ErrEntityNotFound) {
			t.Errorf("publish to a missing queue: %v, want ErrEntityNotFound", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		sub, err := sluicewm.NewSubscriber(c, sluicewm.Config{Entities: sluicewm.Topics, ConsumerGroup: "g"})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if err := sub.SubscribeInitialize("missing"); err != nil {
			t.Errorf("SubscribeInitialize without AutoCreate: %v, want nil (nothing to do)", err)
		}
		if _, err := c.GetTopic(ctx, "missing"); !errors.Is(err, sluice.ErrEntityNotFound) {
			t.Errorf("SubscribeInitialize without AutoCreate created the topic (%v)", err)
		}
	})
	for _, tc := range []struct {
		name string
		cfg  sluicewm.Config
		sub  bool
	}{
		{"unknown entities", sluicewm.Config{Entities: 7}, false},
		{"a subscriber of topics without a group", sluicewm.Config{Entities: sluicewm.Topics}, true},
		{"a group on queues", sluicewm.Config{ConsumerGroup: "g"}, true},
		{"a group on a publisher", sluicewm.Config{Entities: sluicewm.Topics, ConsumerGroup: "g"}, false},
		{"a negative prefetch", sluicewm.Config{PrefetchCount: -1}, true},
		{"a prefetch past a batch", sluicewm.Config{PrefetchCount: sluicewm.MaxPrefetchCount + 1}, true},
		{"a subscriber of streams without a group", sluicewm.Config{Entities: sluicewm.Streams}, true},
		{"a group on a publisher of streams", sluicewm.Config{Entities: sluicewm.Streams, ConsumerGroup: "g"}, false},
		{"a stream key on queues", sluicewm.Config{StreamKey: "k"}, false},
		{"consumer options on topics", sluicewm.Config{Entities: sluicewm.Topics, ConsumerGroup: "g", ConsumerOptions: &sluice.ConsumerOptions{}}, true},
		{"consumer options on a publisher", sluicewm.Config{Entities: sluicewm.Streams, ConsumerOptions: &sluice.ConsumerOptions{}}, false},
		{"a namespace in consumer options", sluicewm.Config{Entities: sluicewm.Streams, ConsumerGroup: "g",
			ConsumerOptions: &sluice.ConsumerOptions{Namespace: "ns"}}, true},
		{"a session key on streams", sluicewm.Config{Entities: sluicewm.Streams, SessionKey: "s"}, false},
		{"a prefetch on streams", sluicewm.Config{Entities: sluicewm.Streams, ConsumerGroup: "g", PrefetchCount: 1}, true},
		{"a retry policy on streams", sluicewm.Config{Entities: sluicewm.Streams, ConsumerGroup: "g",
			Retry: sluice.ExponentialBackoff{}}, true},
		{"a lock renewal on streams", sluicewm.Config{Entities: sluicewm.Streams, ConsumerGroup: "g", MaxLockRenewal: time.Minute}, true},
		{"a DB on streams", sluicewm.Config{Entities: sluicewm.Streams, ConsumerGroup: "g", DB: new(sql.DB)}, true},
		{"queue properties on streams", sluicewm.Config{Entities: sluicewm.Streams, QueueProperties: &sluice.QueueProperties{}}, false},
	} {
		var err error
		c := &sluice.Client{}
		if tc.sub {
			_, err = sluicewm.NewSubscriber(c, tc.cfg)
		} else {
			_, err = sluicewm.NewPublisher(c, tc.cfg)
		}
		if !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if _, err := sluicewm.NewSubscriber(nil, sluicewm.Config{}); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Errorf("no client: %v, want ErrInvalidArgument", err)
	}
}

// The lock of a message handed out is renewed while it waits for its Ack:
// acked after more than twice the queue's lock duration, it is completed,
// not delivered again.
func TestLockRenewedUntilAck(t *testing.T) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		const topic, lock = "renew", 3 * time.Second
		_, sub, msgs := subscribed(t, c, topic, &sluice.QueueProperties{LockDuration: lock}, sluicewm.Config{}, "slow")
		m := next(t, msgs)
		time.Sleep(2*lock + lock/3) // held past two locks' ends
		m.Ack()
		if err := sub.Close(); err != nil { // completes what was acked
			t.Fatal(err)
		}
		r, err := c.NewReceiver(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		if left, err := r.Peek(t.Context(), 10, nil); err != nil || len(left) != 0 {
			t.Fatalf("the acked message is still there (%d, %v): its lock ended", len(left), err)
		}
	})
}

// A message received ahead whose lock ended while the one before it was
// handled does not go out on that lock: it comes again, after that one
// and before those received after it, and nothing goes out twice.
func TestPrefetchedLockEnded(t *testing.T) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		const topic, lock = "ahead", 3 * time.Second
		_, _, msgs := subscribed(t, c, topic, &sluice.QueueProperties{LockDuration: lock}, sluicewm.Config{PrefetchCount: 2}, "a", "b", "c")
		first := next(t, msgs)
		time.Sleep(lock + lock/3) // b's and c's locks end meanwhile; a's is renewed
		first.Ack()
		got := []string{string(first.Payload)}
		for range 2 {
			m := next(t, msgs)
			got = append(got, string(m.Payload))
			m.Ack()
		}
		if fmt.Sprint(got) != "[a b c]" {
			t.Fatalf("received %v, want [a b c]", got)
		}
		select {
		case m := <-msgs:
			t.Fatalf("%s came again", m.Payload)
		case <-time.After(200 * time.Millisecond):
		}
	})
}

// On a queue that requires sessions, a subscriber receives session by
// session, each in order, also across a Nack with messages received
// ahead; a publisher puts each message in the session its metadata names.
func TestSessions(t *testing.T) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		if _, err := c.CreateQueue(t.Context(), "carts", &sluice.QueueProperties{RequiresSession: true}); err != nil {
			t.Fatal(err)
		}
		plain, err := sluicewm.NewPublisher(c, sluicewm.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := plain.Publish("carts", message.NewMessage(wm.NewUUID(), []byte("x"))); !errors.Is(err, sluice.ErrSessionRequired) {
			t.Fatalf("Publish without a session to a queue of sessions = %v, want ErrSessionRequired", err)
		}
		pub, err := sluicewm.NewPublisher(c, sluicewm.Config{SessionKey: "cart"})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []string{"a1", "b1", "a2", "b2", "a3", "b3"} {
			m := message.NewMessage(wm.NewUUID(), []byte(b))
			m.Metadata.Set("cart", b[:1])
			if err := pub.Publish("carts", m); err != nil {
				t.Fatal(err)
			}
		}
		sub, err := sluicewm.NewSubscriber(c, sluicewm.Config{PrefetchCount: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		msgs, err := sub.Subscribe(t.Context(), "carts")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		nacked := false
		for n := 0; n < 7; n++ {
			m := next(t, msgs)
			body := string(m.Payload)
			got[body[:1]] = append(got[body[:1]], body)
			if body == "a2" && !nacked {
				nacked = true
				m.Nack()
				continue
			}
			m.Ack()
		}
		if want := []string{"a1", "a2", "a2", "a3"}; fmt.Sprint(got["a"]) != fmt.Sprint(want) {
			t.Errorf("session a came as %v, want %v", got["a"], want)
		}
		if want := []string{"b1", "b2", "b3"}; fmt.Sprint(got["b"]) != fmt.Sprint(want) {
			t.Errorf("session b came as %v, want %v", got["b"], want)
		}
	})
}
