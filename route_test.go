package sluice_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// wantDead checks the dead letters of an entity by reason.
func wantDead(t *testing.T, c *sluice.Client, entity string, want map[string]int64) {
	t.Helper()
	got, err := c.DeadLetterReasons(t.Context(), entity)
	if err != nil {
		t.Fatalf("DeadLetterReasons(%s): %v", entity, err)
	}
	if len(want) == 0 && len(got) == 0 {
		return
	}
	if !maps.Equal(got, want) {
		t.Fatalf("dead letters of %s = %v, want %v", entity, got, want)
	}
}

// A subscription that cannot take a message (its forward target was
// deleted, it or its target requires sessions, the target is too small,
// the chain is too long) gets its copy dead-lettered with a reason; every
// other subscription gets its copy, and the send succeeds.
func TestBrokenSubscriptionDoesNotBlockTopic(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		mustQ := func(name string, props *sluice.QueueProperties, forward string) {
			t.Helper()
			if _, err := c.CreateQueueForwarding(ctx, name, props, forward); err != nil {
				t.Fatalf("create queue %s: %v", name, err)
			}
		}
		mustQ("gone", nil, "")
		mustQ("sessions", &sluice.QueueProperties{RequiresSession: true}, "")
		mustQ("small", &sluice.QueueProperties{MaxMessageSize: 1024}, "")
		mustQ("c5", nil, "")
		for i := 4; i >= 1; i-- {
			mustQ("c"+string(rune('0'+i)), nil, "c"+string(rune('0'+i+1)))
		}
		if _, err := c.CreateTopic(ctx, "t", nil); err != nil {
			t.Fatal(err)
		}
		subs := map[string]*sluice.SubscriptionProperties{
			"ok":       nil,
			"to-gone":  {ForwardTo: "gone"},
			"sessions": {RequiresSession: true},
			"to-sess":  {ForwardTo: "sessions"},
			"to-small": {ForwardTo: "small"},
			"far":      {ForwardTo: "c1"},
		}
		for name, p := range subs {
			if _, err := c.CreateSubscription(ctx, "t", name, p); err != nil {
				t.Fatalf("CreateSubscription(%s): %v", name, err)
			}
		}
		if err := c.DeleteQueue(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		body := strings.Repeat("x", 2000)
		if _, err := newSender(t, c, "t").Send(ctx, &sluice.Message{Body: []byte(body)}); err != nil {
			t.Fatalf("Send to a topic with broken subscriptions: %v", err)
		}
		if got := drain(t, c, sluice.SubscriptionPath("t", "ok")); !slices.Equal(got, []string{body}) {
			t.Fatalf("the healthy subscription received %d messages, want 1", len(got))
		}
		path := func(s string) string { return sluice.SubscriptionPath("t", s) }
		wantDead(t, c, path("ok"), nil)
		wantDead(t, c, path("to-gone"), map[string]int64{sluice.ReasonForwardTargetNotFound: 1})
		wantDead(t, c, path("sessions"), map[string]int64{sluice.ReasonSessionIDNull: 1})
		wantDead(t, c, path("to-sess"), map[string]int64{sluice.ReasonSessionIDNull: 1})
		wantDead(t, c, path("to-small"), map[string]int64{sluice.ReasonMessageSizeExceeded: 1})
		wantDead(t, c, "c4", map[string]int64{sluice.ReasonMaxTransferHops: 1})
		for _, q := range []string{"sessions", "small", "c5"} {
			if st, err := c.GetQueueStats(ctx, q); err != nil || st.Active != 0 {
				t.Fatalf("stats of %s = %+v, %v; want nothing delivered", q, st, err)
			}
		}
		r, err := c.NewReceiver(path("to-gone"), &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		ms := receive(t, r, 10)
		if len(ms) != 1 || !strings.Contains(ms[0].DeadLetterDescription, `"gone"`) {
			t.Fatalf("dead letter of to-gone = %+v", ms)
		}

		// A message with a session id goes where sessions are required.
		if _, err := newSender(t, c, "t").Send(ctx, &sluice.Message{Body: []byte("s"), SessionID: "a"}); err != nil {
			t.Fatal(err)
		}
		if st, _ := c.GetQueueStats(ctx, "sessions"); st.Active != 1 {
			t.Fatalf("session queue holds %d messages, want 1", st.Active)
		}
		// A target deleted by another client, while this one's cache
		// still knows it: the send is routed again, and dead-letters.
		if _, err := c.CreateQueue(ctx, "gone", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.UpdateSubscriptionForwarding(ctx, "t", "to-gone", sluice.SubscriptionProperties{ForwardTo: "gone"}); err != nil {
			t.Fatal(err)
		}
		if _, err := newSender(t, c, "t").Send(ctx, &sluice.Message{Body: []byte("cached"), SessionID: "a"}); err != nil {
			t.Fatal(err)
		}
		if st, _ := c.GetQueueStats(ctx, "gone"); st.Active != 1 {
			t.Fatalf("the recreated target holds %d messages, want 1", st.Active)
		}
		if err := reopen(t, kind, service).DeleteQueue(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := newSender(t, c, "t").Send(ctx, &sluice.Message{Body: []byte("stale"), SessionID: "a"}); err != nil {
			t.Fatalf("Send with a stale cache of a deleted target: %v", err)
		}
		// The first send, the one with a session id, and this one.
		wantDead(t, c, path("to-gone"), map[string]int64{sluice.ReasonForwardTargetNotFound: 3})

		// The topic's own limits still apply to what was sent.
		_, err = newSender(t, c, "t").Send(ctx, &sluice.Message{Body: make([]byte, sluice.DefaultMaxMessageSize+1)})
		wantErr(t, "a message larger than the topic allows", err, sluice.ErrMessageTooLarge)
	})
}

// Forwarding is checked where it is set, applies the source's default TTL
// and the target's size limit, and survives updates that do not mention
// it.
func TestForwardingSettings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		_, err := c.CreateQueueForwarding(ctx, "orphan", nil, "nowhere")
		wantErr(t, "forwarding to a missing entity", err, sluice.ErrEntityNotFound)
		wantErr(t, "forwarding to a missing entity", err, sluice.ErrInvalidArgument)
		if _, err := c.GetQueue(ctx, "orphan"); err == nil {
			t.Fatal("a refused CreateQueueForwarding created the queue")
		}
		_, err = c.CreateQueueForwarding(ctx, "self", nil, "self")
		wantErr(t, "forwarding to itself", err, sluice.ErrInvalidArgument)
		if _, err := c.CreateQueue(ctx, "dest", &sluice.QueueProperties{MaxMessageSize: 1024}); err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateQueueForwarding(ctx, "sess", &sluice.QueueProperties{RequiresSession: true}, "dest")
		wantErr(t, "a session queue that forwards", err, sluice.ErrInvalidArgument)
		if _, err := c.CreateQueueForwarding(ctx, "src", &sluice.QueueProperties{DefaultTTL: time.Minute, LockDuration: 30 * time.Second}, "dest"); err != nil {
			t.Fatal(err)
		}

		// Loops, direct and through a topic's subscription.
		if _, err := c.CreateQueueForwarding(ctx, "ping", nil, "src"); err != nil {
			t.Fatal(err)
		}
		_, err = c.UpdateQueueForwarding(ctx, "src", sluice.QueueProperties{}, "ping")
		wantErr(t, "a forwarding loop", err, sluice.ErrInvalidArgument)
		_, err = c.UpdateQueueForwarding(ctx, "src", sluice.QueueProperties{}, "src")
		wantErr(t, "an update forwarding to itself", err, sluice.ErrInvalidArgument)
		c.CreateTopic(ctx, "hub", nil)
		if _, err := c.CreateQueueForwarding(ctx, "into-hub", nil, "hub"); err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateSubscription(ctx, "hub", "back", &sluice.SubscriptionProperties{ForwardTo: "into-hub"})
		wantErr(t, "a subscription forwarding back to its topic", err, sluice.ErrInvalidArgument)
		_, err = c.CreateSubscription(ctx, "hub", "s", &sluice.SubscriptionProperties{RequiresSession: true, ForwardTo: "dest"})
		wantErr(t, "a session subscription that forwards", err, sluice.ErrInvalidArgument)
		if _, err := c.CreateSubscription(ctx, "hub", "s", nil); err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateQueueForwarding(ctx, "to-sub", nil, sluice.SubscriptionPath("hub", "s"))
		wantErr(t, "forwarding to a subscription", err, sluice.ErrInvalidName)
		_, err = c.UpdateSubscription(ctx, "hub", "s", sluice.SubscriptionProperties{ForwardTo: "into-hub"})
		wantErr(t, "a subscription update that makes a loop", err, sluice.ErrInvalidArgument)

		// The source's default TTL holds after forwarding; a message too
		// large for the target is dead-lettered at the source.
		s := newSender(t, c, "src")
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte("fits")}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(ctx, &sluice.Message{Body: make([]byte, 2000)}); err != nil {
			t.Fatalf("Send of a message too large for the forward target: %v", err)
		}
		ms := receive(t, newReceiver(t, c, "dest", sluice.PeekLock), 10)
		if len(ms) != 1 || string(ms[0].Body) != "fits" {
			t.Fatalf("dest received %v, want only the message that fits", bodies(ms))
		}
		if ms[0].ExpiresAt.IsZero() || ms[0].ExpiresAt.Sub(ms[0].EnqueuedTime) > time.Minute {
			t.Fatalf("forwarded message expires at %v, enqueued %v: want the source's 1 min TTL", ms[0].ExpiresAt, ms[0].EnqueuedTime)
		}
		wantDead(t, c, "src", map[string]int64{sluice.ReasonMessageSizeExceeded: 1})

		// Updates that do not mention forwarding keep it, and settings
		// whose zero means "the default" keep their value.
		got, err := c.UpdateQueue(ctx, "src", sluice.QueueProperties{MaxDeliveryCount: 3})
		if err != nil || got.ForwardTo != "dest" || got.LockDuration != 30*time.Second || got.MaxDeliveryCount != 3 {
			t.Fatalf("UpdateQueue = %+v, %v; want ForwardTo dest and LockDuration 30s kept", got, err)
		}
		if q, _ := c.GetQueue(ctx, "src"); q.ForwardTo != "dest" || q.LockDuration != 30*time.Second {
			t.Fatalf("GetQueue after UpdateQueue = %+v", q)
		}
		if _, err := c.UpdateSubscription(ctx, "hub", "s", sluice.SubscriptionProperties{ForwardTo: "dest"}); err != nil {
			t.Fatal(err)
		}
		if sub, err := c.UpdateSubscription(ctx, "hub", "s", sluice.SubscriptionProperties{MaxDeliveryCount: 4}); err != nil || sub.ForwardTo != "dest" {
			t.Fatalf("UpdateSubscription = %+v, %v; want ForwardTo kept", sub, err)
		}
		if sub, _ := c.GetSubscription(ctx, "hub", "s"); sub.ForwardTo != "dest" || sub.MaxDeliveryCount != 4 {
			t.Fatalf("GetSubscription after UpdateSubscription = %+v", sub)
		}
		if sub, err := c.UpdateSubscriptionForwarding(ctx, "hub", "s", sluice.SubscriptionProperties{}); err != nil || sub.ForwardTo != "" {
			t.Fatalf("UpdateSubscriptionForwarding to nowhere = %+v, %v", sub, err)
		}
		if q, err := c.UpdateQueueForwarding(ctx, "src", sluice.QueueProperties{}, ""); err != nil || q.ForwardTo != "" {
			t.Fatalf("UpdateQueueForwarding to nowhere = %+v, %v", q, err)
		}
		_, err = c.UpdateQueue(ctx, "src", sluice.QueueProperties{RequiresSession: true})
		wantErr(t, "turning sessions on", err, sluice.ErrInvalidArgument)
		_, err = c.UpdateQueue(ctx, "src", sluice.QueueProperties{RequiresDuplicateDetection: true})
		wantErr(t, "turning duplicate detection on", err, sluice.ErrInvalidArgument)
	})
}
