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
		if err != nil || seq != 0 {
			t.Fatalf("Send through forwarding = %d, %v; want 0: the message is not the forwarding queue's", seq, err)
		}
		if got := drain(t, c, "final"); !slices.Equal(got, []string{"routed"}) {
			t.Fatalf("final received %v", got)
		}
		if got := drain(t, c, sluice.SubscriptionPath("hub", "to-final")); len(got) != 0 {
			t.Fatalf("the forwarding subscription kept %v", got)
		}

		// A chain longer than MaxForwardHops ends in the dead-letter queue
		// of the entity that would forward once too often.
		mustQ("h5", "")
		for _, q := range []string{"h4", "h3", "h2", "h1", "h0"} {
			mustQ(q, "h"+string(q[1]+1))
		}
		if _, err := newSender(t, c, "h0").Send(ctx, &sluice.Message{Body: []byte("far")}); err != nil {
			t.Fatalf("Send along a long chain: %v", err)
		}
		for _, q := range []string{"h0", "h1", "h2", "h3", "h4", "h5"} {
			st, _ := c.GetQueueStats(ctx, q)
			if want := int64(map[bool]int{true: 1}[q == "h4"]); st.DeadLettered != want || st.Active != 0 {
				t.Fatalf("%s holds %d active messages and %d dead letters, want 0 and %d", q, st.Active, st.DeadLettered, want)
			}
		}
		_, err = c.UpdateQueueForwarding(ctx, "h1", sluice.QueueProperties{}, "h1")
		wantErr(t, "a queue forwarding to itself", err, sluice.ErrInvalidArgument)
	})
}

// A topic with duplicate detection checks a message id once, at the
// topic, before its fan-out: a duplicate reaches no subscription, not
// even one created since the first send.
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
		if _, err := s.SendBatch(ctx, []*sluice.Message{
			{Body: []byte("batch"), MessageID: "order-3"}, {Body: []byte("batch again"), MessageID: "order-3"},
		}); err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"a", "b"} {
			if got := drain(t, c, sluice.SubscriptionPath("dedup", sub)); !slices.Equal(got, []string{"first", "other", "batch"}) {
				t.Fatalf("subscription %s received %v", sub, got)
			}
		}
		if _, err := c.CreateSubscription(ctx, "dedup", "late", nil); err != nil {
			t.Fatal(err)
		}
		for _, m := range []*sluice.Message{{Body: []byte("late dup"), MessageID: "order-1"}, {Body: []byte("new"), MessageID: "order-4"}} {
			if _, err := s.Send(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if got := drain(t, c, sluice.SubscriptionPath("dedup", "late")); !slices.Equal(got, []string{"new"}) {
			t.Fatalf("a subscription created after the first send received %v, want only the new id", got)
		}
		// Duplicate detection is fixed when the topic is created: an update
		// that leaves it off keeps it.
		if got, err := c.UpdateTopic(ctx, "dedup", sluice.TopicProperties{DefaultTTL: time.Hour}); err != nil || !got.RequiresDuplicateDetection {
			t.Fatalf("UpdateTopic = %+v, %v; want duplicate detection kept", got, err)
		}
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte("third"), MessageID: "order-1"}); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, c, sluice.SubscriptionPath("dedup", "a")); len(got) != 1 || got[0] != "new" {
			t.Fatalf("after UpdateTopic, received %v, want only the new id", got)
		}
	})
}

// An entity that forwards checks duplicates before it forwards: two
// sends of one id, to a forwarding queue with duplicate detection or
// through a topic with it and a forwarding subscription, deliver once;
// and a scheduled message counts as sent.
func TestForwardingDuplicateDetection(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		dedup := &sluice.QueueProperties{RequiresDuplicateDetection: true}
		for _, q := range []string{"dest", "dest2"} {
			if _, err := c.CreateQueue(ctx, q, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.CreateQueueForwarding(ctx, "fwd", dedup, "dest"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateTopic(ctx, "t", &sluice.TopicProperties{RequiresDuplicateDetection: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateSubscription(ctx, "t", "fw", &sluice.SubscriptionProperties{ForwardTo: "dest2"}); err != nil {
			t.Fatal(err)
		}
		for _, entity := range []string{"fwd", "t"} {
			s := newSender(t, c, entity)
			for _, body := range []string{"one", "two"} {
				if _, err := s.Send(ctx, &sluice.Message{Body: []byte(body), MessageID: "X"}); err != nil {
					t.Fatalf("Send to %s: %v", entity, err)
				}
			}
		}
		// In the caller's transaction too.
		for _, body := range []string{"tx one", "tx two"} {
			tx, err := rawDB(t, kind).BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := newSender(t, c, "t").SendTx(ctx, tx, &sluice.Message{Body: []byte(body), MessageID: "TX"}); err != nil {
				tx.Rollback()
				t.Fatalf("SendTx: %v", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		for q, want := range map[string][]string{"dest": {"one"}, "dest2": {"one", "tx one"}} {
			if got := drain(t, c, q); !slices.Equal(got, want) {
				t.Fatalf("%s received %v, want %v", q, got, want)
			}
		}

		// A scheduled message takes part: the same id sent now is a
		// duplicate, on a plain queue and on a forwarding one.
		if _, err := c.CreateQueue(ctx, "plain", dedup); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour)
		for _, entity := range []string{"plain", "fwd", "t"} {
			s := newSender(t, c, entity)
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte("later"), MessageID: "S", ScheduledEnqueueTime: later}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte("now"), MessageID: "S"}); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []string{"plain", "dest", "dest2"} {
			st, err := c.GetQueueStats(ctx, q)
			if err != nil || st.Scheduled != 1 || st.Active != 0 {
				t.Fatalf("stats of %s = %+v, %v; want the scheduled message only", q, st, err)
			}
		}
	})
}

// Scheduled messages sent to a topic, or through a forwarding queue, are
// numbered by the entity sent to, and cancelling that number deletes
// every copy still waiting, atomically.
func TestCancelScheduledCopies(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		if _, err := c.CreateQueue(ctx, "archive", nil); err != nil {
			t.Fatal(err)
		}
		c.CreateTopic(ctx, "orders", nil)
		c.CreateSubscription(ctx, "orders", "all", nil)
		c.CreateSubscription(ctx, "orders", "red", nil, sluice.Rule{Name: "red", Filter: sluice.SQLFilter{Expression: "color = 'red'"}})
		c.CreateSubscription(ctx, "orders", "to-archive", &sluice.SubscriptionProperties{ForwardTo: "archive"})
		if _, err := c.CreateQueueForwarding(ctx, "inbox", nil, "orders"); err != nil {
			t.Fatal(err)
		}
		c.CreateTopic(ctx, "quiet", nil)
		c.CreateSubscription(ctx, "quiet", "none", nil, sluice.Rule{Name: "never", Filter: sluice.FalseFilter{}})

		// scheduled counts the scheduled copies in each queue.
		scheduled := func() []int64 {
			t.Helper()
			var out []int64
			for _, q := range []string{sluice.SubscriptionPath("orders", "all"), sluice.SubscriptionPath("orders", "red"), "archive"} {
				st, err := c.GetQueueStats(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, st.Scheduled)
			}
			return out
		}
		later := time.Now().Add(time.Hour)
		red := map[string]string{"color": "red"}
		orders := newSender(t, c, "orders")
		seqs, err := orders.SendBatch(ctx, []*sluice.Message{
			{Body: []byte("now"), ApplicationProperties: red},
			{Body: []byte("red later"), ApplicationProperties: red, ScheduledEnqueueTime: later},
			{Body: []byte("blue later"), ScheduledEnqueueTime: later},
		})
		if err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
		if seqs[0] != 0 || seqs[1] == 0 || seqs[2] == 0 || seqs[1] == seqs[2] {
			t.Fatalf("SendBatch to a topic = %v, want 0 for the message sent now and a number for each scheduled one", seqs)
		}
		if got := scheduled(); !slices.Equal(got, []int64{2, 1, 2}) {
			t.Fatalf("scheduled copies in all, red, archive = %v, want [2 1 2]", got)
		}

		// One unknown number cancels nothing.
		wantErr(t, "CancelScheduled with an unknown number", orders.CancelScheduled(ctx, seqs[1], seqs[2]+100), sluice.ErrMessageNotFound)
		if got := scheduled(); !slices.Equal(got, []int64{2, 1, 2}) {
			t.Fatalf("a failed cancel left %v scheduled copies, want [2 1 2]", got)
		}
		if err := orders.CancelScheduled(ctx, seqs[1]); err != nil {
			t.Fatalf("CancelScheduled: %v", err)
		}
		if got := scheduled(); !slices.Equal(got, []int64{1, 0, 1}) {
			t.Fatalf("after cancelling the red message, scheduled copies = %v, want [1 0 1]", got)
		}
		wantErr(t, "CancelScheduled twice", orders.CancelScheduled(ctx, seqs[1]), sluice.ErrMessageNotFound)

		// Through a forwarding queue, and in the caller's transaction.
		inbox := newSender(t, c, "inbox")
		viaInbox, err := inbox.Send(ctx, &sluice.Message{Body: []byte("via inbox"), ScheduledEnqueueTime: later})
		if err != nil || viaInbox == 0 {
			t.Fatalf("Send scheduled through a forwarding queue = %d, %v", viaInbox, err)
		}
		tx, err := rawDB(t, kind).BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		inTx, err := orders.SendTx(ctx, tx, &sluice.Message{Body: []byte("in tx"), ScheduledEnqueueTime: later})
		if err != nil || len(inTx) != 1 || inTx[0] == 0 {
			tx.Rollback()
			t.Fatalf("SendTx scheduled to a topic = %v, %v", inTx, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := scheduled(); !slices.Equal(got, []int64{3, 0, 3}) {
			t.Fatalf("scheduled copies = %v, want [3 0 3]", got)
		}
		wantErr(t, "the topic's number cancelled through the inbox", inbox.CancelScheduled(ctx, seqs[2]), sluice.ErrMessageNotFound)
		if err := inbox.CancelScheduled(ctx, viaInbox); err != nil {
			t.Fatalf("CancelScheduled through the inbox: %v", err)
		}
		if err := orders.CancelScheduled(ctx, seqs[2], inTx[0]); err != nil {
			t.Fatalf("CancelScheduled of two: %v", err)
		}
		if got := scheduled(); !slices.Equal(got, []int64{0, 0, 0}) {
			t.Fatalf("scheduled copies after every cancel = %v, want none", got)
		}

		// A send no subscription takes is numbered and cancelled all the
		// same.
		quiet := newSender(t, c, "quiet")
		n, err := quiet.Send(ctx, &sluice.Message{Body: []byte("unheard"), ScheduledEnqueueTime: later})
		if err != nil || n == 0 {
			t.Fatalf("Send scheduled to a topic no subscription takes it from = %d, %v", n, err)
		}
		if err := quiet.CancelScheduled(ctx, n); err != nil {
			t.Fatalf("CancelScheduled of a message no subscription took: %v", err)
		}

		// Once its time has come, a message can no longer be cancelled: its
		// copies are delivered, and the map of its copies is deleted by the
		// next scheduled send.
		if got := drain(t, c, sluice.SubscriptionPath("orders", "red")); !slices.Equal(got, []string{"now"}) {
			t.Fatalf("red received %v, want the message sent now", got)
		}
		soon := time.Now().Add(time.Second)
		due, err := orders.Send(ctx, &sluice.Message{Body: []byte("due"), ApplicationProperties: red, ScheduledEnqueueTime: soon})
		if err != nil {
			t.Fatal(err)
		}
		r := newReceiver(t, c, sluice.SubscriptionPath("orders", "red"), sluice.PeekLock)
		if ms := receive(t, r, 10); len(ms) != 1 || string(ms[0].Body) != "due" {
			t.Fatalf("red received %v, want the due message", bodies(ms))
		}
		wantErr(t, "CancelScheduled of a delivered message", orders.CancelScheduled(ctx, due), sluice.ErrMessageNotFound)
		if _, err := orders.Send(ctx, &sluice.Message{Body: []byte("next"), ApplicationProperties: red, ScheduledEnqueueTime: later}); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, c, "archive"); !slices.Equal(got, []string{"now", "due"}) {
			t.Fatalf("archive received %v, want the message sent now and the due one", got)
		}
		var rows int
		if err := rawDB(t, kind).QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice_routed_schedules WHERE service = "+placeholder(kind)+" AND queue = 'orders'", service).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 4 {
			t.Fatalf("%d rows map the topic's scheduled sends, want 4: the waiting send and its 3 copies", rows)
		}
	})
}

// placeholder is a kind's first query parameter.
func placeholder(kind string) string {
	if kind == "postgres" {
		return "$1"
	}
	return "?"
}
