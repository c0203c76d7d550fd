package sluice_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A topic's fan-out does not count against the sender's limits: they
// apply to what was sent, and the copies are written, all or none, in
// one transaction of bounded pieces.
func TestTopicFanOutLimits(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		const subs = 200
		if _, err := c.CreateTopic(ctx, "wide", nil); err != nil {
			t.Fatal(err)
		}
		for i := range subs {
			if _, err := c.CreateSubscription(ctx, "wide", fmt.Sprintf("s%03d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		s := newSender(t, c, "wide")
		start := time.Now()
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte("small")}); err != nil {
			t.Fatalf("Send to %d subscriptions: %v", subs, err)
		}
		t.Logf("%s: a send to %d subscriptions took %v", kind, subs, time.Since(start))
		for i := range subs {
			st, err := c.GetQueueStats(ctx, sluice.SubscriptionPath("wide", fmt.Sprintf("s%03d", i)))
			if err != nil || st.Active != 1 {
				t.Fatalf("subscription %d holds %+v, %v; want the message", i, st, err)
			}
		}

		// 900 KB to 200 subscriptions: 175 MB of copies, far more than a
		// batch (the body is stored once).
		if _, err := c.CreateTopic(ctx, "large", nil); err != nil {
			t.Fatal(err)
		}
		for i := range subs {
			if _, err := c.CreateSubscription(ctx, "large", fmt.Sprintf("s%02d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		body := make([]byte, 900<<10)
		rand.Read(body)
		start = time.Now()
		if _, err := newSender(t, c, "large").Send(ctx, &sluice.Message{Body: body}); err != nil {
			t.Fatalf("Send of 900 KB to %d subscriptions: %v", subs, err)
		}
		t.Logf("%s: a 900 KB send to %d subscriptions took %v", kind, subs, time.Since(start))
		for i := range subs {
			st, err := c.GetQueueStats(ctx, sluice.SubscriptionPath("large", fmt.Sprintf("s%02d", i)))
			if err != nil || st.Active != 1 {
				t.Fatalf("subscription %d of large holds %+v, %v; want the message", i, st, err)
			}
		}
		for _, i := range []int{0, subs - 1} {
			r := newReceiver(t, c, sluice.SubscriptionPath("large", fmt.Sprintf("s%02d", i)), sluice.ReceiveAndDelete)
			ms, err := r.Receive(ctx, 1)
			if err != nil || len(ms) != 1 || !bytes.Equal(ms[0].Body, body) {
				t.Fatalf("subscription %d of large: %d messages, %v; want the 900 KB sent", i, len(ms), err)
			}
		}

		// A batch of 1,000 to a topic with 12 subscriptions: 12,000 copies.
		if _, err := c.CreateTopic(ctx, "busy", nil); err != nil {
			t.Fatal(err)
		}
		for i := range 12 {
			if _, err := c.CreateSubscription(ctx, "busy", fmt.Sprintf("s%02d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		batch := make([]*sluice.Message, 1000)
		for i := range batch {
			batch[i] = &sluice.Message{Body: fmt.Appendf(nil, "m%d", i)}
		}
		b := newSender(t, c, "busy")
		start = time.Now()
		if _, err := b.SendBatch(ctx, batch); err != nil {
			t.Fatalf("SendBatch of 1,000 to 12 subscriptions: %v", err)
		}
		t.Logf("%s: a batch of 1,000 to 12 subscriptions took %v", kind, time.Since(start))
		for i := range 12 {
			st, err := c.GetQueueStats(ctx, sluice.SubscriptionPath("busy", fmt.Sprintf("s%02d", i)))
			if err != nil || st.Active != 1000 {
				t.Fatalf("subscription %d holds %+v, %v; want 1,000 messages", i, st, err)
			}
		}

		// The sender's own limits hold.
		_, err := b.SendBatch(ctx, append(batch, &sluice.Message{}))
		wantErr(t, "a batch of 1,001", err, sluice.ErrBatchTooLarge)
		big := make([]*sluice.Message, 20)
		for i := range big {
			big[i] = &sluice.Message{Body: make([]byte, 900<<10)}
		}
		_, err = b.SendBatch(ctx, big)
		wantErr(t, "a batch of 18 MB", err, sluice.ErrBatchTooLarge)
	})
}
