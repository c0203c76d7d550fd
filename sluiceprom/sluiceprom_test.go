package sluiceprom_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceprom"
)

// A program that embeds the library, with no server, gets the server's
// figures: depths by state, dead letters by reason, every
// dead-lettering counted, stream lag per consumer; the series of each
// entity there from the first collection, and a lint-clean exposition.
func TestCollector(t *testing.T) {
	ctx := t.Context()
	c, err := sluice.Open(ctx, filepath.Join(t.TempDir(), "app.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateQueue(ctx, "Orders", &sluice.QueueProperties{MaxDeliveryCount: 1}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	m := sluiceprom.New(c, &sluiceprom.Options{Fresh: time.Nanosecond})
	defer m.Close()
	reg.MustRegister(m)

	gather := func() string {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, f := range families {
			for _, metric := range f.GetMetric() {
				var labels []string
				for _, l := range metric.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				v := metric.GetGauge().GetValue() + metric.GetCounter().GetValue()
				b.WriteString(f.GetName() + "{" + strings.Join(labels, ",") + "} " + strconv.FormatFloat(v, 'f', -1, 64) + "\n")
			}
		}
		return b.String()
	}
	want := func(body string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(body, l+"\n") {
				t.Errorf("the collection lacks %s:\n%s", l, body)
			}
		}
	}
	want(gather(), "sluice_messages_dead_lettered_total{entity=orders,reason=MaxDeliveryCountExceeded} 0",
		"sluice_entity_messages{entity=orders,state=active} 0")

	s, _ := c.NewSender("orders")
	if _, err := s.SendBatch(ctx, []*sluice.Message{{Body: []byte("a")}, {Body: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	r, _ := c.NewReceiver("orders", nil)
	ms, err := r.Receive(ctx, 2)
	if err != nil || len(ms) != 2 {
		t.Fatalf("Receive = %v, %v", ms, err)
	}
	if err := r.DeadLetter(ctx, ms[0], &sluice.DeadLetterOptions{Reason: "Broken"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Abandon(ctx, ms[1], nil); err != nil { // its last delivery
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, sluice.StreamID{Namespace: "shop", Key: "k"}, "audit", sluice.FromBeginning()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, sluice.StreamID{Namespace: "shop", Key: "k"}, sluice.Event{Body: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	body := gather()
	want(body, "sluice_messages_dead_lettered_total{entity=orders,reason=Broken} 1",
		"sluice_messages_dead_lettered_total{entity=orders,reason=MaxDeliveryCountExceeded} 1",
		"sluice_entity_dead_letters{entity=orders,reason=Broken} 1",
		"sluice_entity_messages{entity=orders,state=dead_lettered} 2",
		"sluice_stream_consumer_lag{consumer=audit,group=default,namespace=shop} 1",
		"sluice_stream_consumer_processors{consumer=audit,group=default} 0")
	if strings.Contains(body, "sluice_stream_subscription_lag") {
		t.Errorf("a series per subscription without SubscriptionLag:\n%s", body)
	}
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}

	// Closed, it counts no more.
	m.Close()
	if _, err := s.Send(ctx, &sluice.Message{Body: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	ms, err = r.TryReceive(ctx, 1)
	if err != nil || len(ms) != 1 || r.DeadLetter(ctx, ms[0], &sluice.DeadLetterOptions{Reason: "Broken"}) != nil {
		t.Fatalf("TryReceive = %v, %v", ms, err)
	}
	want(gather(), "sluice_messages_dead_lettered_total{entity=orders,reason=Broken} 1")
}

// Snapshot hands out the collections' last read while it is fresh, else
// reads the counts and the cluster's status itself, without making the
// collections' figures any older.
func TestSnapshot(t *testing.T) {
	ctx := t.Context()
	c, err := sluice.Open(ctx, filepath.Join(t.TempDir(), "app.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateQueue(ctx, "Orders", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "news", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSubscription(ctx, "news", "reader", nil); err != nil {
		t.Fatal(err)
	}
	m := sluiceprom.New(c, &sluiceprom.Options{Fresh: time.Hour})
	defer m.Close()

	// Before any collection: a read of its own.
	first := m.Snapshot(ctx, time.Hour)
	if !first.EntitiesComplete || !first.ClusterRead || len(first.Entities) != 2 || first.Entities[0].Path != "news/Subscriptions/reader" ||
		first.Entities[0].Topic != "news" || first.Entities[1].Path != "orders" || first.At.IsZero() {
		t.Fatalf("the first snapshot: %+v", first)
	}
	snd, _ := c.NewSender("orders")
	if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	// Its read served only it: the collection reads now, and sees the
	// message.
	testutil.CollectAndCount(m) // a collection, which reads
	collected := m.Snapshot(ctx, time.Hour)
	if collected.At.Equal(first.At) || collected.Entities[1].Stats.Active != 1 {
		t.Fatalf("after a collection: %+v (the first read at %v)", collected, first.At)
	}
	// A fresh collection serves the next snapshot; an older one does not.
	if again := m.Snapshot(ctx, time.Hour); !again.At.Equal(collected.At) {
		t.Errorf("a snapshot within maxAge of the collection read at %v, not %v", again.At, collected.At)
	}
	if own := m.Snapshot(ctx, time.Nanosecond); !own.At.After(collected.At) || own.Entities[1].Stats.Active != 1 {
		t.Errorf("a snapshot with a tiny maxAge: %+v", own)
	}
	// A read cut short says so: not complete, no status.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if cut := m.Snapshot(done, time.Nanosecond); cut.EntitiesComplete || cut.ClusterRead {
		t.Errorf("a snapshot of a cancelled context: %+v", cut)
	}
}

// ConsumerLags sums lag per consumer and namespace, with the group and
// the live processors serving each consumer.
func TestConsumerLags(t *testing.T) {
	cs := sluice.ClusterStatus{
		Nodes: []sluice.ClusterNode{{ID: "dead", Group: "old", Consumers: []string{"a"}}, {ID: "n1", Group: "g", Consumers: []string{"a"}, Alive: true},
			{ID: "n2", Group: "g", Consumers: []string{"a", "b"}, Alive: true}},
		Partitions: []sluice.PartitionStatus{
			{Partition: 0, Subscriptions: []sluice.SubscriptionLag{{ID: "s1", Consumer: "a", Namespace: "x", Lag: 2}, {ID: "gone", Lag: 9}}},
			{Partition: 1, Subscriptions: []sluice.SubscriptionLag{{ID: "s1", Consumer: "a", Namespace: "x", Lag: 3},
				{ID: "s2", Consumer: "a", Namespace: "y", Lag: 1}, {ID: "s3", Consumer: "c", Namespace: "x", Lag: 4}}},
		},
	}
	got := sluiceprom.ConsumerLags(cs)
	slices.SortFunc(got, func(a, b sluiceprom.ConsumerLag) int {
		return strings.Compare(a.Consumer+a.Namespace, b.Consumer+b.Namespace)
	})
	want := []sluiceprom.ConsumerLag{{Group: "g", Consumer: "a", Namespace: "x", Lag: 5, Processors: 2},
		{Group: "g", Consumer: "a", Namespace: "y", Lag: 1, Processors: 2}, {Consumer: "c", Namespace: "x", Lag: 4}}
	if !slices.Equal(got, want) {
		t.Errorf("ConsumerLags = %+v, want %+v", got, want)
	}
}
