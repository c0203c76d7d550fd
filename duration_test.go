package sluice_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The duration rule at the library's edge: negative refused with nothing
// written, Forever (math.MaxInt64) meaning never, Service Bus maxima
// refused past them, and no stored time negative or wrapped.
func TestDurationEdges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		for _, bad := range []sluice.QueueProperties{
			{DefaultTTL: -time.Nanosecond}, {DeadLetterRetention: -time.Second},
			{LockDuration: -time.Second}, {LockDuration: sluice.MaxLockDuration + time.Millisecond}, {LockDuration: sluice.Forever},
			{RequiresDuplicateDetection: true, DuplicateDetectionWindow: -time.Second},
			{RequiresDuplicateDetection: true, DuplicateDetectionWindow: sluice.Forever},
		} {
			name := "bad-" + randHex(4)
			_, err := c.CreateQueue(ctx, name, &bad)
			wantErr(t, "CreateQueue with a refused duration", err, sluice.ErrInvalidArgument)
			_, err = c.GetQueue(ctx, name)
			wantErr(t, "GetQueue of the refused queue", err, sluice.ErrEntityNotFound)
		}
		_, err := c.CreateTopic(ctx, "t-"+randHex(4), &sluice.TopicProperties{DefaultTTL: -1})
		wantErr(t, "CreateTopic with a negative TTL", err, sluice.ErrInvalidArgument)

		q, err := c.CreateQueue(ctx, "forever-"+randHex(4), &sluice.QueueProperties{
			DefaultTTL: time.Duration(math.MaxInt64), DeadLetterRetention: sluice.Forever, DeadLetterOnExpiry: true})
		if err != nil {
			t.Fatal(err)
		}
		if q.DefaultTTL != sluice.Forever || q.DeadLetterRetention != sluice.Forever {
			t.Fatalf("Forever read back as TTL %v, retention %v; want Forever (never)", q.DefaultTTL, q.DeadLetterRetention)
		}
		s := newSender(t, c, q.Name)
		_, err = s.Send(ctx, &sluice.Message{Body: []byte("bad"), TimeToLive: -time.Second})
		wantErr(t, "Send with a negative TTL", err, sluice.ErrInvalidArgument)
		for _, ttl := range []time.Duration{sluice.Forever, sluice.Forever - 1, sluice.Forever - time.Millisecond} {
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte("m"), TimeToLive: ttl}); err != nil {
				t.Fatalf("Send with TTL %v: %v", ttl, err)
			}
		}
		r := newReceiver(t, c, q.Name, sluice.PeekLock)
		ms := receive(t, r, 10)
		if len(ms) != 3 {
			t.Fatalf("received %d messages, want the 3 long-lived ones (none dropped as expired)", len(ms))
		}
		far := time.Now().Add(100 * 365 * 24 * time.Hour)
		for _, m := range ms {
			if !m.ExpiresAt.IsZero() && m.ExpiresAt.Before(far) {
				t.Fatalf("message %d: ExpiresAt %v, want never or far in the future", m.SequenceNumber, m.ExpiresAt)
			}
		}
		if reasons, err := c.DeadLetterReasons(ctx, q.Name); err != nil || len(reasons) != 0 {
			t.Fatalf("dead letters: %v, %v", reasons, err)
		}

		err = c.SetStreamRetention(ctx, "ns", sluice.StreamRetention{MaxAge: -time.Second})
		wantErr(t, "SetStreamRetention with a negative age", err, sluice.ErrInvalidArgument)
		if err := c.SetStreamRetention(ctx, "ns", sluice.StreamRetention{MaxAge: sluice.Forever}); err != nil {
			t.Fatal(err)
		}
		p := c.NewStreamProcessor(nil)
		err = p.Handle("c", func(context.Context, *sluice.StreamEvent) error { return nil }, &sluice.ConsumerOptions{DeliveryTimeout: -time.Second})
		wantErr(t, "Handle with a negative delivery timeout", err, sluice.ErrInvalidArgument)
	})
}

// A stream processor's durations follow the rule too: a negative one, or
// a heartbeat or failure timeout too long for the balancer's sums, fails
// Start with ErrInvalidArgument, and nothing runs.
func TestStreamProcessorDurationEdges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		for _, bad := range []sluice.StreamProcessorOptions{
			{HeartbeatInterval: -time.Second}, {FailureTimeout: -1}, {PollInterval: -time.Millisecond},
			{IdlePollInterval: -time.Second}, {ProgressInterval: -1}, {RefreshInterval: -time.Second},
			{HeartbeatInterval: sluice.Forever}, {FailureTimeout: sluice.Forever},
		} {
			p := c.NewStreamProcessor(&bad)
			if err := p.Handle("c-"+randHex(4), func(context.Context, *sluice.StreamEvent) error { return nil },
				&sluice.ConsumerOptions{Namespace: "ns"}); err != nil {
				t.Fatal(err)
			}
			err := p.Start(t.Context())
			wantErr(t, fmt.Sprintf("Start with %+v", bad), err, sluice.ErrInvalidArgument)
		}
		p := c.NewStreamProcessor(nil)
		err := p.Handle("c-"+randHex(4), func(context.Context, *sluice.StreamEvent) error { return nil },
			&sluice.ConsumerOptions{Namespace: "ns", DeliveryTimeout: -time.Second})
		wantErr(t, "Handle with a negative delivery timeout", err, sluice.ErrInvalidArgument)
	})
}

// Never reads back as Forever, as Service Bus reads back TimeSpan.MaxValue:
// a queue, topic or subscription created with the defaults, with 0 or
// with a duration that reaches Forever reads back its DefaultTTL and
// DeadLetterRetention as Forever, in what the create returns, a get and a
// listing alike; and an update with the properties read back succeeds
// and changes nothing.
func TestNeverReadsBackAsForever(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		for i, props := range []*sluice.QueueProperties{nil, {}, {DefaultTTL: sluice.Forever, DeadLetterRetention: sluice.Forever},
			{DefaultTTL: sluice.Forever - 1, DeadLetterRetention: sluice.Forever - time.Millisecond, LockDuration: time.Minute}} {
			name := fmt.Sprintf("never-%d-%s", i, randHex(4))
			created, err := c.CreateQueue(ctx, name, props)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.GetQueue(ctx, name)
			if err != nil || got.DefaultTTL != sluice.Forever || got.DeadLetterRetention != sluice.Forever {
				t.Fatalf("queue created with %+v reads back as %+v, %v; want TTL and retention Forever", props, got, err)
			}
			// (What the create returns is what it was given: a duration
			// within a millisecond of Forever is stored as never.)
			if created.DefaultTTL == sluice.Forever && created != got {
				t.Fatalf("CreateQueue returned %+v, GetQueue %+v", created, got)
			}
			if ls, err := c.ListQueuesWithPrefix(ctx, name, "", 1); err != nil || len(ls) != 1 || ls[0] != got {
				t.Fatalf("ListQueues = %+v, %v; want %+v", ls, err, got)
			}
			if updated, err := c.UpdateQueue(ctx, name, got.QueueProperties); err != nil || updated != got {
				t.Fatalf("UpdateQueue with the properties read back = %+v, %v; want %+v", updated, err, got)
			}
			if again, err := c.GetQueue(ctx, name); err != nil || again != got {
				t.Fatalf("after an update with the properties read back: %+v, %v; want %+v", again, err, got)
			}
		}
		// From a TTL to never and back.
		q, err := c.CreateQueue(ctx, "ttl-"+randHex(4), &sluice.QueueProperties{DefaultTTL: time.Hour, DeadLetterRetention: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		p := q.QueueProperties
		p.DefaultTTL, p.DeadLetterRetention = sluice.Forever, 0
		if u, err := c.UpdateQueue(ctx, q.Name, p); err != nil || u.DefaultTTL != sluice.Forever || u.DeadLetterRetention != sluice.Forever {
			t.Fatalf("update to never: %+v, %v", u, err)
		}
		p.DefaultTTL = time.Hour
		if u, err := c.UpdateQueue(ctx, q.Name, p); err != nil || u.DefaultTTL != time.Hour || u.DeadLetterRetention != sluice.Forever {
			t.Fatalf("update back to an hour: %+v, %v", u, err)
		}
		// A message sent under a never TTL never expires, and keeps no TTL.
		nq, err := c.CreateQueue(ctx, "never-msg-"+randHex(4), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newSender(t, c, nq.Name).Send(ctx, &sluice.Message{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
		if ms := receive(t, newReceiver(t, c, nq.Name, sluice.PeekLock), 1); len(ms) != 1 || !ms[0].ExpiresAt.IsZero() || ms[0].TimeToLive != 0 {
			t.Fatalf("a message under the default TTL: %+v", ms)
		}

		topic, err := c.CreateTopic(ctx, "never-t-"+randHex(4), nil)
		if err != nil || topic.DefaultTTL != sluice.Forever {
			t.Fatalf("CreateTopic with the defaults = %+v, %v; want DefaultTTL Forever", topic, err)
		}
		if got, err := c.GetTopic(ctx, topic.Name); err != nil || got != topic {
			t.Fatalf("GetTopic = %+v, %v; want %+v", got, err, topic)
		}
		if u, err := c.UpdateTopic(ctx, topic.Name, topic.TopicProperties); err != nil || u != topic {
			t.Fatalf("UpdateTopic with the properties read back = %+v, %v; want %+v", u, err, topic)
		}
		sub, err := c.CreateSubscription(ctx, topic.Name, "s", &sluice.SubscriptionProperties{DefaultTTL: sluice.Forever})
		if err != nil || sub.DefaultTTL != sluice.Forever || sub.DeadLetterRetention != sluice.Forever {
			t.Fatalf("CreateSubscription = %+v, %v; want DefaultTTL and DeadLetterRetention Forever", sub, err)
		}
		got, err := c.GetSubscription(ctx, topic.Name, "s")
		if err != nil || got.SubscriptionProperties != sub.SubscriptionProperties {
			t.Fatalf("GetSubscription = %+v, %v; want %+v", got, err, sub)
		}
		if ls, err := c.ListSubscriptions(ctx, topic.Name); err != nil || len(ls) != 1 || ls[0].SubscriptionProperties != sub.SubscriptionProperties {
			t.Fatalf("ListSubscriptions = %+v, %v", ls, err)
		}
		if u, err := c.UpdateSubscription(ctx, topic.Name, "s", got.SubscriptionProperties); err != nil ||
			u.SubscriptionProperties != got.SubscriptionProperties {
			t.Fatalf("UpdateSubscription with the properties read back = %+v, %v; want %+v", u, err, got)
		}
		if again, err := c.GetSubscription(ctx, topic.Name, "s"); err != nil || again.SubscriptionProperties != got.SubscriptionProperties {
			t.Fatalf("after an update with the properties read back: %+v, %v", again, err)
		}
	})
}
