package sluice_test

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Every dead-letter reason lands in the dead-letter queue, which is
// received from, peeked and resubmitted with the queue API.
func TestDeadLetterQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{MaxDeliveryCount: 2, LockDuration: time.Second, DeadLetterOnExpiry: true})
		s := newSender(t, c, q)
		send(t, s, "poison", "flaky")
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte("stale"), TimeToLive: 1500 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 3)
		if err := r.DeadLetter(ctx, ms[0], &sluice.DeadLetterOptions{Reason: "poison", Description: "cannot parse"}); err != nil {
			t.Fatal(err)
		}
		if err := r.Abandon(ctx, ms[1], nil); err != nil {
			t.Fatal(err)
		}
		again := receive(t, r, 3) // "stale" stays locked
		if len(again) != 1 || string(again[0].Body) != "flaky" {
			t.Fatalf("second receive: %v", bodies(again))
		}
		if err := r.Abandon(ctx, again[0], nil); err != nil { // its last delivery
			t.Fatal(err)
		}
		time.Sleep(1600 * time.Millisecond) // "stale"'s lock and life both end
		receiveNone(t, r, 100*time.Millisecond)

		dlq, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		peeked, err := dlq.Peek(ctx, 10, nil)
		if err != nil || len(peeked) != 3 {
			t.Fatalf("Peek of the dead-letter queue = %d messages, %v", len(peeked), err)
		}
		reasons := map[string]string{}
		for _, m := range peeked {
			reasons[string(m.Body)] = m.DeadLetterReason
			if m.DeadLetterSource != q {
				t.Fatalf("dead letter source %q, want %q", m.DeadLetterSource, q)
			}
		}
		want := map[string]string{"poison": "poison", "flaky": sluice.ReasonMaxDeliveryCountExceeded, "stale": sluice.ReasonTTLExpired}
		for body, reason := range want {
			if reasons[body] != reason {
				t.Fatalf("dead-letter reasons %v, want %v", reasons, want)
			}
		}

		got := receive(t, dlq, 2)
		if len(got) != 2 || got[0].DeadLetterReason == "" || got[0].DeadLetterDescription == "" && got[0].DeadLetterReason == "poison" {
			t.Fatalf("Receive from the dead-letter queue: %+v", got)
		}
		if err := dlq.Complete(ctx, got[0]); err != nil {
			t.Fatalf("Complete of a dead letter: %v", err)
		}
		if err := dlq.Abandon(ctx, got[1], nil); err != nil {
			t.Fatalf("Abandon of a dead letter: %v", err)
		}
		wantErr(t, "DeadLetter of a dead letter", dlq.DeadLetter(ctx, got[1], nil), sluice.ErrInvalidArgument)
		wantErr(t, "Complete of a dead letter by the queue's receiver", r.Complete(ctx, got[1]), sluice.ErrInvalidArgument)

		var progress [][2]int
		n, err := c.ResubmitDeadLetters(ctx, q, &sluice.ResubmitOptions{Progress: func(done, total int) {
			progress = append(progress, [2]int{done, total})
		}})
		if err != nil || n != 2 || !slices.Equal(progress, [][2]int{{2, 2}}) {
			t.Fatalf("ResubmitDeadLetters = %d, %v, progress %v", n, err, progress)
		}
		back := receive(t, newReceiver(t, c, q, sluice.ReceiveAndDelete), 10)
		if len(back) != 2 || back[0].DeliveryCount != 1 {
			t.Fatalf("resubmitted messages came back as %v", bodies(back))
		}
		if st, _ := c.GetQueueStats(ctx, q); st.DeadLettered != 0 {
			t.Fatalf("%d dead letters left", st.DeadLettered)
		}
	})
}

// Resubmitting many dead letters moves them in atomic batches and reports
// progress.
func TestResubmitMany(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		const n = 2500
		msgs := make([]*sluice.Message, 500)
		for i := range msgs {
			msgs[i] = &sluice.Message{Body: []byte("x")}
		}
		s := newSender(t, c, q)
		r := newReceiver(t, c, q, sluice.PeekLock)
		for range n / 500 {
			if _, err := s.SendBatch(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			for got := 0; got < 500; {
				ms := receive(t, r, 500-got)
				for _, m := range ms {
					if err := r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: "bulk"}); err != nil {
						t.Fatal(err)
					}
				}
				got += len(ms)
			}
		}
		var last [2]int
		calls := 0
		moved, err := c.ResubmitDeadLetters(ctx, q, &sluice.ResubmitOptions{Progress: func(done, total int) {
			calls++
			last = [2]int{done, total}
		}})
		if err != nil || moved != n || last != [2]int{n, n} || calls < 3 {
			t.Fatalf("ResubmitDeadLetters = %d, %v; progress calls %d, last %v", moved, err, calls, last)
		}
		if st, _ := c.GetQueueStats(ctx, q); st.Active != n || st.DeadLettered != 0 {
			t.Fatalf("after resubmitting all: %+v", st)
		}
	})
}

// ObserveDeadLetters hears every cause of dead-lettering once it has
// committed: a receiver's, an abandon on the last delivery, a lock that
// ended on it, a time-to-live run out, a filter that failed; and
// nothing of a transaction that rolled back.
func TestObserveDeadLetters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		var mu sync.Mutex
		got := map[string]int{}
		stop := c.ObserveDeadLetters(func(entity, reason string, n int) {
			mu.Lock()
			got[entity+" "+reason] += n
			mu.Unlock()
		})
		defer stop()
		counts := func() map[string]int {
			mu.Lock()
			defer mu.Unlock()
			return maps.Clone(got)
		}

		q := createQueue(t, c, &sluice.QueueProperties{MaxDeliveryCount: 1, LockDuration: time.Second, DeadLetterOnExpiry: true})
		s := newSender(t, c, q)
		send(t, s, "poison", "abandoned", "left locked")
		// "stale" is in a queue of its own, received from only once its
		// time-to-live has run out.
		stale := createQueue(t, c, &sluice.QueueProperties{DeadLetterOnExpiry: true})
		const ttl = time.Second
		if _, err := newSender(t, c, stale).Send(ctx, &sluice.Message{Body: []byte("stale"), TimeToLive: ttl}); err != nil {
			t.Fatal(err)
		}
		expiresBy := time.Now().Add(ttl)
		r, rStale := newReceiver(t, c, q, sluice.PeekLock), newReceiver(t, c, stale, sluice.PeekLock)
		ms := receive(t, r, 3)
		if err := r.DeadLetter(ctx, ms[0], &sluice.DeadLetterOptions{Reason: "poison"}); err != nil {
			t.Fatal(err)
		}
		if err := r.Abandon(ctx, ms[1], nil); err != nil { // its last delivery
			t.Fatal(err)
		}
		if _, err := c.CreateTopic(ctx, "orders", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateSubscription(ctx, "orders", "big", nil,
			sluice.Rule{Name: "big", Filter: sluice.SQLFilter{Expression: "quantity > 10"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := newSender(t, c, "orders").Send(ctx, &sluice.Message{Body: []byte("m"),
			ApplicationProperties: map[string]string{"quantity": "many"}}); err != nil {
			t.Fatal(err)
		}
		big := sluice.SubscriptionPath("orders", "big")
		want := map[string]int{
			q + " poison": 1, q + " " + sluice.ReasonMaxDeliveryCountExceeded: 2, stale + " " + sluice.ReasonTTLExpired: 1,
			big + " " + sluice.ReasonFilterEvaluation: 1,
		}
		// "left locked"'s lock and "stale"'s life end within seconds: a
		// receive resolves each.
		deadline := time.Now().Add(30 * time.Second)
		for !maps.Equal(counts(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("observed %v, want %v", counts(), want)
			}
			if _, err := r.TryReceive(ctx, 10); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(expiresBy) {
				if m, err := rStale.TryReceive(ctx, 10); err != nil || len(m) != 0 {
					t.Fatalf("received %d messages of %s after their time-to-live: %v", len(m), stale, err)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		st, err := c.GetQueueStats(ctx, q)
		if err != nil || st.DeadLettered != 3 {
			t.Fatalf("stats: %+v, %v: want 3 dead letters", st, err)
		}

		// A dead-lettering refused (the lock is gone) reports nothing.
		if err := r.DeadLetter(ctx, ms[0], &sluice.DeadLetterOptions{Reason: "again"}); err == nil {
			t.Fatal("dead-lettered a settled message")
		}
		stop()
		send(t, s, "after stop")
		m := receive(t, r, 1)
		if err := r.DeadLetter(ctx, m[0], &sluice.DeadLetterOptions{Reason: "unheard"}); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(counts(), want) {
			t.Fatalf("after stop: observed %v, want %v", counts(), want)
		}
	})
}
