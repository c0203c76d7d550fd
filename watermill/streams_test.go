package watermill_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	wm "github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/libtest"
	sluicewm "github.com/sluicehq/sluice/watermill"
)

// streamSubscriber returns a Subscriber of Streams as group, closed when
// the test ends.
func streamSubscriber(t *testing.T, c sluice.API, group string, opts *sluice.ConsumerOptions) *sluicewm.Subscriber {
	t.Helper()
	sub, err := sluicewm.NewSubscriber(c, sluicewm.Config{Entities: sluicewm.Streams, ConsumerGroup: group, ConsumerOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

// subscribe subscribes sub to topic.
func subscribe(t *testing.T, sub *sluicewm.Subscriber, topic string) <-chan *message.Message {
	t.Helper()
	msgs, err := sub.Subscribe(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// Messages go to the streams their StreamKey field names (the topic's
// own without one) and come out of each in order, with their UUIDs and
// metadata; an event published without a Publisher gets its partition
// and position as its UUID.
func TestStreams(t *testing.T) {
	forEachClient(t, func(t *testing.T, c *sluice.Client, api sluice.API) {
		pub, err := sluicewm.NewPublisher(api, sluicewm.Config{Entities: sluicewm.Streams, StreamKey: "account"})
		if err != nil {
			t.Fatal(err)
		}
		sub := streamSubscriber(t, api, "ledger", nil)
		if err := sub.SubscribeInitialize("payments"); err != nil {
			t.Fatal(err)
		}
		want := make(map[string][]string) // stream key -> UUIDs in order
		var batch []*message.Message
		for i := range 30 {
			m := message.NewMessage(wm.NewUUID(), []byte(strconv.Itoa(i)))
			key := "payments" // no field: the topic's stream
			if i%4 != 0 {
				key = fmt.Sprintf("acct-%d", i%3)
				m.Metadata.Set("account", key)
			}
			m.Metadata.Set("n", strconv.Itoa(i))
			want[key] = append(want[key], m.UUID)
			batch = append(batch, m)
		}
		if err := pub.Publish("payments", batch...); err != nil {
			t.Fatal(err)
		}
		// Each message is in its stream's partition.
		heads := make(map[int32]int64)
		for key, ids := range want {
			heads[sluice.PartitionOf(sluice.StreamID{Namespace: "payments", Key: key}, c.StreamPartitions())] += int64(len(ids))
		}
		status, err := c.ClusterStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range status.Partitions {
			if p.Head != heads[p.Partition] {
				t.Errorf("partition %d holds %d events, want %d", p.Partition, p.Head, heads[p.Partition])
			}
		}
		raw, err := c.Publish(t.Context(), sluice.StreamID{Namespace: "payments", Key: "raw"}, sluice.Event{Body: []byte("r")})
		if err != nil {
			t.Fatal(err)
		}
		msgs := subscribe(t, sub, "payments")
		got := make(map[string][]string)
		for range len(batch) + 1 {
			m := next(t, msgs)
			if string(m.Payload) == "r" {
				part := sluice.PartitionOf(sluice.StreamID{Namespace: "payments", Key: "raw"}, c.StreamPartitions())
				if want := fmt.Sprintf("%d-%d", part, raw[0]); m.UUID != want {
					t.Errorf("an event published without a Publisher has UUID %q, want %q", m.UUID, want)
				}
				m.Ack()
				continue
			}
			if _, ok := m.Metadata[sluicewm.UUIDProperty]; ok {
				t.Errorf("message %s carries %s in its metadata", m.UUID, sluicewm.UUIDProperty)
			}
			if n, _ := strconv.Atoi(m.Metadata.Get("n")); string(m.Payload) != strconv.Itoa(n) {
				t.Errorf("message %s: payload %q, metadata n=%q", m.UUID, m.Payload, m.Metadata.Get("n"))
			}
			key := m.Metadata.Get("account")
			if key == "" {
				key = "payments"
			}
			got[key] = append(got[key], m.UUID)
			m.Ack()
		}
		for key, ids := range want {
			if !slices.Equal(got[key], ids) {
				t.Errorf("stream %s: got %v, want %v", key, got[key], ids)
			}
		}
	})
}

// A nacked event comes again, up to its consumer's MaxAttempts, and is
// then parked with the Nack as its error, while its stream goes on.
func TestStreamNacksPark(t *testing.T) {
	forEachClient(t, func(t *testing.T, c *sluice.Client, api sluice.API) {
		pub, err := sluicewm.NewPublisher(api, sluicewm.Config{Entities: sluicewm.Streams})
		if err != nil {
			t.Fatal(err)
		}
		sub := streamSubscriber(t, api, "mailer", &sluice.ConsumerOptions{MaxAttempts: 2, RetryBackoff: time.Millisecond})
		if err := sub.SubscribeInitialize("mails"); err != nil {
			t.Fatal(err)
		}
		publish(t, pub, "mails", "x", "y")
		msgs := subscribe(t, sub, "mails")
		for attempt := 1; attempt <= 2; attempt++ {
			m := next(t, msgs)
			if string(m.Payload) != "x" {
				t.Fatalf("attempt %d delivered %q, want x", attempt, m.Payload)
			}
			m.Nack()
		}
		if m := next(t, msgs); string(m.Payload) != "y" {
			t.Fatalf("after x's attempts were used up the stream gave %q, want y", m.Payload)
		} else {
			m.Ack()
		}
		parked, err := c.ParkedEvents(t.Context(), "ns/mails/mails/mailer", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) != 1 || string(parked[0].Body) != "x" || !strings.Contains(parked[0].Error, "nacked") {
			t.Fatalf("parked events %+v, want x, nacked", parked)
		}
	})
}

// A subscription that ends before its message is acked hands the event
// back uncounted: to another subscription of its group, or, when it was
// the last, to the next one, even where a single failed attempt would
// park the event.
func TestStreamCloseHandsBack(t *testing.T) {
	forEachClient(t, func(t *testing.T, c *sluice.Client, api sluice.API) {
		pub, err := sluicewm.NewPublisher(api, sluicewm.Config{Entities: sluicewm.Streams})
		if err != nil {
			t.Fatal(err)
		}
		once := &sluice.ConsumerOptions{MaxAttempts: 1}
		first := streamSubscriber(t, api, "audit", once)
		if err := first.SubscribeInitialize("events"); err != nil {
			t.Fatal(err)
		}
		publish(t, pub, "events", "a", "b")
		second := streamSubscriber(t, api, "audit", once)
		subs := []*sluicewm.Subscriber{first, second}
		chans := []<-chan *message.Message{subscribe(t, first, "events"), subscribe(t, second, "events")}
		var held int
		select {
		case m := <-chans[0]:
			held = 0
			if string(m.Payload) != "a" {
				t.Fatalf("got %q, want a", m.Payload)
			}
		case m := <-chans[1]:
			held = 1
			if string(m.Payload) != "a" {
				t.Fatalf("got %q, want a", m.Payload)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no message within 30s")
		}
		subs[held].Close() // a is neither acked nor nacked
		other := chans[1-held]
		for _, want := range []string{"a", "b"} {
			m := next(t, other)
			if string(m.Payload) != want {
				t.Fatalf("the other subscription got %q, want %s", m.Payload, want)
			}
			m.Ack()
		}

		publish(t, pub, "events", "c")
		if m := next(t, other); string(m.Payload) != "c" {
			t.Fatalf("got %q, want c", m.Payload)
		}
		subs[1-held].Close() // the last subscription: the processor stops
		third := streamSubscriber(t, api, "audit", once)
		m := next(t, subscribe(t, third, "events"))
		if string(m.Payload) != "c" {
			t.Fatalf("the next subscription got %q, want c again", m.Payload)
		}
		m.Ack()
		third.Close()
		if parked, err := c.ParkedEvents(t.Context(), "ns/events/events/audit", 10); err != nil || len(parked) != 0 {
			t.Fatalf("parked events %+v, %v: a hand-back counted as a failed attempt", parked, err)
		}
	})
}

// A transactional publisher appends with its transaction, or not at all.
func TestStreamTxPublisher(t *testing.T) {
	libtest.ForEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		db := appDB(t, kind)
		sub := streamSubscriber(t, c, "outbox", nil)
		if err := sub.SubscribeInitialize("orders"); err != nil {
			t.Fatal(err)
		}
		for _, commit := range []bool{false, true} {
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			pub, err := sluicewm.NewTxPublisher(c, tx, sluicewm.Config{Entities: sluicewm.Streams})
			if err != nil {
				t.Fatal(err)
			}
			publish(t, pub, "orders", strconv.FormatBool(commit))
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		m := next(t, subscribe(t, sub, "orders"))
		if string(m.Payload) != "true" {
			t.Fatalf("got %q, want the committed message only", m.Payload)
		}
		m.Ack()
	})
}

// A message's delivery time counts from when it goes out, not from when
// its event started waiting for a subscription: events queued behind
// slow handling are not failed for the wait, and a message not acked in
// its time comes again.
func TestStreamDeliveryTimeFromHandOut(t *testing.T) {
	forEachClient(t, func(t *testing.T, c *sluice.Client, api sluice.API) {
		pub, err := sluicewm.NewPublisher(api, sluicewm.Config{Entities: sluicewm.Streams, StreamKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		const within = 2 * time.Second
		sub := streamSubscriber(t, api, "slow", &sluice.ConsumerOptions{DeliveryTimeout: within, MaxAttempts: 1})
		if err := sub.SubscribeInitialize("jobs"); err != nil {
			t.Fatal(err)
		}
		// 16 streams, all delivered at once, handled one at a time for a
		// tenth of the delivery time each: the last waits well past it.
		const n = 16
		for i := range n {
			m := message.NewMessage(wm.NewUUID(), []byte(strconv.Itoa(i)))
			m.Metadata.Set("k", strconv.Itoa(i))
			if err := pub.Publish("jobs", m); err != nil {
				t.Fatal(err)
			}
		}
		msgs := subscribe(t, sub, "jobs")
		seen := make(map[string]bool)
		for range n {
			m := next(t, msgs)
			if seen[string(m.Payload)] {
				t.Fatalf("message %s came twice", m.Payload)
			}
			seen[string(m.Payload)] = true
			time.Sleep(within / 10) // the handler's work
			m.Ack()
		}
		if parked, err := c.ParkedEvents(t.Context(), "ns/jobs/jobs/slow", 100); err != nil || len(parked) != 0 {
			t.Fatalf("parked %d events (%v): a wait for a subscription was counted as delivery time", len(parked), err)
		}

		// Not acked in its time, a message fails its attempt (here the
		// only one): its event is parked and the stream goes on.
		publish(t, pub, "jobs", "forgotten", "next")
		if m := next(t, msgs); string(m.Payload) != "forgotten" {
			t.Fatalf("got %q, want forgotten", m.Payload)
		} else {
			select {
			case <-m.Context().Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the context of a message not acked in its time did not end")
			}
		}
		if m := next(t, msgs); string(m.Payload) != "next" {
			t.Fatalf("got %q, want next", m.Payload)
		} else {
			m.Ack()
		}
		parked, err := c.ParkedEvents(t.Context(), "ns/jobs/jobs/slow", 100)
		if err != nil || len(parked) != 1 || !strings.Contains(parked[0].Error, "not acked within") {
			t.Fatalf("parked events %+v, %v; want forgotten, not acked in its time", parked, err)
		}
	})
}
