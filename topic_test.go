package sluice_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func drain(t *testing.T, c *sluice.Client, path string) []string {
	t.Helper()
	r := newReceiver(t, c, path, sluice.ReceiveAndDelete)
	var got []string
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
		ms, err := r.Receive(ctx, 100)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return got
		}
		if err != nil {
			t.Fatalf("Receive(%s): %v", path, err)
		}
		got = append(got, bodies(ms)...)
	}
}

func TestTopicFilters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		if _, err := c.CreateTopic(ctx, "orders", nil); err != nil {
			t.Fatalf("CreateTopic: %v", err)
		}
		subs := []struct {
			name  string
			props *sluice.SubscriptionProperties
			rules []sluice.Rule
		}{
			{"all", nil, nil},
			{"red", nil, []sluice.Rule{{Name: "red", Filter: sluice.SQLFilter{Expression: "color = 'red'"}}}},
			{"eu-orders", nil, []sluice.Rule{{Name: "corr", Filter: sluice.CorrelationFilter{Subject: "order", Properties: map[string]string{"region": "eu"}}}}},
			{"big", nil, []sluice.Rule{{Name: "big", Filter: sluice.SQLFilter{Expression: "quantity > 10 AND sys.Subject LIKE 'ord%'"}}}},
			{"lenient", &sluice.SubscriptionProperties{IgnoreFilterErrors: true}, []sluice.Rule{{Name: "big", Filter: sluice.SQLFilter{Expression: "quantity > 10"}}}},
			{"none", nil, []sluice.Rule{{Name: "never", Filter: sluice.FalseFilter{}}}},
			{"either", nil, []sluice.Rule{
				{Name: "blue", Filter: sluice.SQLFilter{Expression: "color IN ('blue')"}},
				{Name: "red", Filter: sluice.CorrelationFilter{Properties: map[string]string{"color": "red"}}},
			}},
		}
		for _, s := range subs {
			if _, err := c.CreateSubscription(ctx, "orders", s.name, s.props, s.rules...); err != nil {
				t.Fatalf("CreateSubscription(%s): %v", s.name, err)
			}
		}
		msg := func(body, subject string, props map[string]string) *sluice.Message {
			return &sluice.Message{Body: []byte(body), Subject: subject, ApplicationProperties: props}
		}
		seqs, err := newSender(t, c, "orders").SendBatch(ctx, []*sluice.Message{
			msg("m1", "order", map[string]string{"color": "red", "region": "eu", "quantity": "12"}),
			msg("m2", "order", map[string]string{"color": "blue", "region": "us", "quantity": "3"}),
			msg("m3", "refund", map[string]string{"quantity": "many"}),
		})
		if err != nil || !slices.Equal(seqs, []int64{0, 0, 0}) {
			t.Fatalf("SendBatch to a topic = %v, %v", seqs, err)
		}
		want := map[string][]string{
			"all": {"m1", "m2", "m3"}, "red": {"m1"}, "eu-orders": {"m1"}, "big": {"m1"},
			"lenient": {"m1"}, "none": nil, "either": {"m1", "m2"},
		}
		for name, w := range want {
			if got := drain(t, c, sluice.SubscriptionPath("orders", name)); !slices.Equal(got, w) {
				t.Errorf("subscription %s received %v, want %v", name, got, w)
			}
		}
		// m3's quantity is not a number: "big" dead-letters its copy,
		// "lenient" counts it as not matching.
		for name, dead := range map[string]int64{"big": 1, "lenient": 0, "all": 0} {
			st, err := c.GetQueueStats(ctx, sluice.SubscriptionPath("orders", name))
			if err != nil || st.DeadLettered != dead {
				t.Errorf("subscription %s: %d dead letters (%v), want %d", name, st.DeadLettered, err, dead)
			}
		}
	})
}

func TestTopicEntities(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		if _, err := c.CreateTopic(ctx, "t", &sluice.TopicProperties{DefaultTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
			t.Fatal(err)
		}
		// Sorts between "t/Subscriptions" and "t/Subscriptions/".
		if _, err := c.CreateQueue(ctx, "t/Subscriptions-x", nil); err != nil {
			t.Fatal(err)
		}
		_, err := c.CreateTopic(ctx, "t", nil)
		wantErr(t, "CreateTopic of a taken name", err, sluice.ErrEntityExists)
		_, err = c.CreateQueue(ctx, "t/Subscriptions/x", nil)
		wantErr(t, "a queue named like a subscription", err, sluice.ErrInvalidName)
		_, err = c.GetQueue(ctx, "t")
		wantErr(t, "GetQueue of a topic", err, sluice.ErrEntityNotFound)
		_, err = c.GetTopic(ctx, "q")
		wantErr(t, "GetTopic of a queue", err, sluice.ErrEntityNotFound)
		_, err = c.CreateSubscription(ctx, "q", "s", nil)
		wantErr(t, "a subscription of a queue", err, sluice.ErrEntityNotFound)
		_, err = c.CreateSubscription(ctx, "t", "s", nil, sluice.Rule{Name: "bad", Filter: sluice.SQLFilter{Expression: "color = "}})
		wantErr(t, "a malformed SQL filter", err, sluice.ErrInvalidFilter)

		info, err := c.CreateSubscription(ctx, "t", "s", &sluice.SubscriptionProperties{MaxDeliveryCount: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Rules) != 1 || info.Rules[0].Name != sluice.DefaultRuleName || info.MaxDeliveryCount != 3 {
			t.Fatalf("CreateSubscription = %+v", info)
		}
		if err := c.CreateRule(ctx, "t", "s", sluice.Rule{Name: "vip", Filter: sluice.SQLFilter{Expression: "tier = 'gold'"}}); err != nil {
			t.Fatalf("CreateRule: %v", err)
		}
		wantErr(t, "CreateRule twice", c.CreateRule(ctx, "t", "s", sluice.Rule{Name: "vip", Filter: sluice.TrueFilter{}}), sluice.ErrEntityExists)
		if err := c.DeleteRule(ctx, "t", "s", sluice.DefaultRuleName); err != nil {
			t.Fatalf("DeleteRule: %v", err)
		}
		got, err := c.GetSubscription(ctx, "t", "s")
		if err != nil || len(got.Rules) != 1 || got.Rules[0].Name != "vip" {
			t.Fatalf("rules after create and delete: %+v, %v", got.Rules, err)
		}
		if _, err := c.UpdateSubscription(ctx, "t", "s", sluice.SubscriptionProperties{MaxDeliveryCount: 5}); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.GetSubscription(ctx, "t", "s"); got.MaxDeliveryCount != 5 || len(got.Rules) != 1 {
			t.Fatalf("after UpdateSubscription: %+v", got)
		}
		c.CreateSubscription(ctx, "t", "a", nil)
		subs, err := c.ListSubscriptions(ctx, "t")
		if err != nil || len(subs) != 2 || subs[0].Name != "a" || subs[1].Name != "s" {
			t.Fatalf("ListSubscriptions = %+v, %v", subs, err)
		}
		qs, _ := c.ListQueues(ctx, "", 100)
		ts, _ := c.ListTopics(ctx, "", 100)
		if len(qs) != 2 || qs[0].Name != "q" || len(ts) != 1 || ts[0].Name != "t" || ts[0].DefaultTTL != time.Hour {
			t.Fatalf("ListQueues = %+v, ListTopics = %+v", qs, ts)
		}
		_, err = newSender(t, c, sluice.SubscriptionPath("t", "s")).Send(ctx, &sluice.Message{})
		wantErr(t, "Send to a subscription", err, sluice.ErrInvalidArgument)
		_, err = newReceiver(t, c, "t", sluice.PeekLock).Receive(ctx, 1)
		wantErr(t, "Receive from a topic", err, sluice.ErrInvalidArgument)

		// The topic's default TTL caps the copies'.
		if _, err := newSender(t, c, "t").Send(ctx, &sluice.Message{Body: []byte("x"), ApplicationProperties: map[string]string{"tier": "gold"}}); err != nil {
			t.Fatal(err)
		}
		ms := receive(t, newReceiver(t, c, sluice.SubscriptionPath("t", "s"), sluice.PeekLock), 1)
		if d := ms[0].ExpiresAt.Sub(ms[0].EnqueuedTime); d != time.Hour {
			t.Fatalf("copy lives %v, want the topic's 1h", d)
		}

		if err := c.DeleteTopic(ctx, "t"); err != nil {
			t.Fatalf("DeleteTopic: %v", err)
		}
		_, err = c.GetSubscription(ctx, "t", "s")
		wantErr(t, "a subscription of a deleted topic", err, sluice.ErrEntityNotFound)
	})
}

// Auto-forwarding: queue → topic → subscription → queue, and a loop that
// ends in the dead-letter queue after MaxForwardHops hops.
func TestForwarding(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		mustQ := func(name, forward string) {
			if _, err := c.CreateQueueForwarding(ctx, name, nil, forward); err != nil {
				t.Fatalf("create queue %s: %v", name, err)
			}
		}
		mustQ("final", "")
		c.CreateTopic(ctx, "hub", nil)
		c.CreateSubscription(ctx, "hub", "to-final", &sluice.SubscriptionProperties{ForwardTo: "final"})
		mustQ("inbox", "hub")
		seq, err := newSender(t, c, "inbox").Send(ctx, &sluice.Message{Body: []byte("routed")})
		if err != nil || seq != 1 {
			t.Fatalf("Send through forwarding = %d, %v; want final's number 1", seq, err)
		}
		if got := drain(t, c, "final"); !slices.Equal(got, []string{"routed"}) {
			t.Fatalf("final received %v", got)
		}
		if got := drain(t, c, sluice.SubscriptionPath("hub", "to-final")); len(got) != 0 {
			t.Fatalf("the forwarding subscription kept %v", got)
		}

		// A forwarding loop: ping → pong → ping ...
		mustQ("ping", "")
		mustQ("pong", "ping")
		if _, err := c.UpdateQueueForwarding(ctx, "ping", sluice.QueueProperties{}, "pong"); err != nil {
			t.Fatal(err)
		}
		if _, err := newSender(t, c, "ping").Send(ctx, &sluice.Message{Body: []byte("loop")}); err != nil {
			t.Fatalf("Send into a loop: %v", err)
		}
		var dead int64
		for _, q := range []string{"ping", "pong"} {
			st, _ := c.GetQueueStats(ctx, q)
			dead += st.DeadLettered
			if st.Active != 0 {
				t.Fatalf("%s holds %d active messages", q, st.Active)
			}
		}
		if dead != 1 {
			t.Fatalf("%d dead letters after a forwarding loop, want 1", dead)
		}
		_, err = c.UpdateQueueForwarding(ctx, "ping", sluice.QueueProperties{}, "ping")
		wantErr(t, "a queue forwarding to itself", err, sluice.ErrInvalidArgument)
	})
}

// A topic with duplicate detection delivers a message id once to each
// subscription within the window.
func TestTopicDuplicateDetection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		info, err := c.CreateTopic(ctx, "dedup", &sluice.TopicProperties{RequiresDuplicateDetection: true})
		if err != nil || info.DuplicateDetectionWindow != 10*time.Minute {
			t.Fatalf("CreateTopic = %+v, %v", info, err)
		}
		for _, s := range []string{"a", "b"} {
			if _, err := c.CreateSubscription(ctx, "dedup", s, nil); err != nil {
				t.Fatal(err)
			}
		}
		s := newSender(t, c, "dedup")
		for _, body := range []string{"first", "again", "other"} {
			id := "order-1"
			if body == "other" {
				id = "order-2"
			}
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte(body), MessageID: id}); err != nil {
				t.Fatal(err)
			}
		}
		for _, sub := range []string{"a", "b"} {
			if got := drain(t, c, sluice.SubscriptionPath("dedup", sub)); !slices.Equal(got, []string{"first", "other"}) {
				t.Fatalf("subscription %s received %v", sub, got)
			}
		}
		// Turning it off on the topic turns it off on its subscriptions.
		if _, err := c.UpdateTopic(ctx, "dedup", sluice.TopicProperties{}); err != nil {
			t.Fatal(err)
		}
		if _, err := newSender(t, c, "dedup").Send(ctx, &sluice.Message{Body: []byte("third"), MessageID: "order-1"}); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, c, sluice.SubscriptionPath("dedup", "a")); !slices.Equal(got, []string{"third"}) {
			t.Fatalf("after turning duplicate detection off, received %v", got)
		}
	})
}
