package sluice_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// tally adds up the message events a client reports, by what they
// say: "sent ENTITY", "received ENTITY MODE", "settled ENTITY ACTION",
// "lost ENTITY"; a dead-letter queue's entity is ENTITY/$dlq.
type tally struct {
	t  *testing.T
	mu sync.Mutex
	n  map[string]int
}

func observe(t *testing.T, c *sluice.Client) (*tally, func()) {
	x := &tally{t: t, n: make(map[string]int)}
	stop := c.ObserveMessages(x.add)
	t.Cleanup(stop)
	return x, stop
}

func (x *tally) add(e sluice.MessageEvent) {
	entity := e.Entity
	if e.SubQueue == sluice.SubQueueDeadLetter {
		entity += "/$dlq"
	}
	var key string
	switch e.Kind {
	case sluice.MessagesSent:
		key = "sent " + entity
	case sluice.MessagesReceived:
		mode := "peek_lock"
		if e.Mode == sluice.ReceiveAndDelete {
			mode = "receive_and_delete"
		}
		key = "received " + entity + " " + mode
		if len(e.EnqueuedTimes) != e.Count {
			x.t.Errorf("%s: %d enqueued times for %d messages", key, len(e.EnqueuedTimes), e.Count)
		}
		for _, at := range e.EnqueuedTimes {
			if at.IsZero() || at.After(time.Now()) {
				x.t.Errorf("%s: enqueued at %v", key, at)
			}
		}
	case sluice.MessagesSettled:
		key = "settled " + entity + " " + e.Action.String()
	case sluice.LocksLost:
		key = "lost " + entity
	default:
		x.t.Errorf("an event of kind %v", e.Kind)
	}
	if e.Count < 1 {
		x.t.Errorf("%s: count %d", key, e.Count)
	}
	x.mu.Lock()
	x.n[key] += e.Count
	x.mu.Unlock()
}

// want checks that the events add up to exactly want.
func (x *tally) want(what string, want map[string]int) {
	x.t.Helper()
	x.mu.Lock()
	got := maps.Clone(x.n)
	x.mu.Unlock()
	if !maps.Equal(got, want) {
		var diff []string
		for _, k := range slices.Sorted(maps.Keys(mergeKeys(got, want))) {
			if got[k] != want[k] {
				diff = append(diff, fmt.Sprintf("%s: got %d, want %d", k, got[k], want[k]))
			}
		}
		x.t.Fatalf("%s: the events add up otherwise:\n%s", what, strings.Join(diff, "\n"))
	}
}

func mergeKeys(a, b map[string]int) map[string]int {
	out := maps.Clone(a)
	for k := range b {
		out[k] += 0
	}
	return out
}

// Every path that sends, receives or settles messages, or loses a lock,
// reports it once, with the entity's canonical name: senders (scheduled
// sends too, to a topic too), receivers in both modes, ReceiveDeferred,
// dead-letter queues, session receivers, batch completes (what they
// completed, and their lost locks), renewals, the processor. Failed
// calls, empty receives and SendTx report nothing.
func TestObserveMessagesEveryPath(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		x, _ := observe(t, c)
		want := map[string]int{}
		q := createQueue(t, c, nil)

		// Sends: a batch, a scheduled one, a name spelled otherwise.
		send(t, newSender(t, c, q), "1", "2")
		loud := newSender(t, c, strings.ToUpper(q))
		if _, err := loud.SendBatch(ctx, []*sluice.Message{{Body: []byte("3")}, {Body: []byte("later"),
			ScheduledEnqueueTime: time.Now().Add(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		want["sent "+q] = 4
		if _, err := newSender(t, c, "missing").Send(ctx, &sluice.Message{Body: []byte("x")}); err == nil {
			t.Fatal("a send to a missing queue succeeded")
		}
		x.want("sends", want)

		// Peek-lock: every action, a lost lock on a settle and a renewal.
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 3)
		if len(ms) != 3 {
			t.Fatalf("received %v", bodies(ms))
		}
		want["received "+q+" peek_lock"] = 3
		must(t, r.Complete(ctx, ms[0]))
		wantErr(t, "Complete again", r.Complete(ctx, ms[0]), sluice.ErrLockLost)
		wantErr(t, "RenewLock of a completed message", r.RenewLock(ctx, ms[0]), sluice.ErrLockLost)
		must(t, r.DeadLetter(ctx, ms[1], &sluice.DeadLetterOptions{Reason: "broken"}))
		must(t, r.Defer(ctx, ms[2], nil))
		want["settled "+q+" complete"] = 1
		want["lost "+q] = 2
		want["settled "+q+" dead_letter"] = 1
		want["settled "+q+" defer"] = 1
		deferred, err := r.ReceiveDeferred(ctx, ms[2].SequenceNumber)
		if err != nil || len(deferred) != 1 {
			t.Fatalf("ReceiveDeferred = %v, %v", deferred, err)
		}
		want["received "+q+" peek_lock"]++
		must(t, r.Abandon(ctx, deferred[0], nil))
		want["settled "+q+" abandon"] = 1
		if got, err := r.TryReceive(ctx, 1); err != nil || len(got) != 0 {
			t.Fatalf("TryReceive of an empty queue = %v, %v", got, err)
		}
		x.want("peek-lock", want)

		// Receive-and-delete, and a batch complete with a lost lock.
		send(t, newSender(t, c, q), "4", "5", "6", "7")
		if got := receive(t, newReceiver(t, c, q, sluice.ReceiveAndDelete), 1); len(got) != 1 {
			t.Fatalf("received %v", bodies(got))
		}
		want["sent "+q] += 4
		want["received "+q+" receive_and_delete"] = 1
		ms = receive(t, r, 3)
		if len(ms) != 3 {
			t.Fatalf("received %v", bodies(ms))
		}
		want["received "+q+" peek_lock"] += 3
		must(t, r.Complete(ctx, ms[1]))
		wantBatchFailures(t, "CompleteBatch", r.CompleteBatch(ctx, ms), 3, 1)
		want["settled "+q+" complete"] += 3
		want["lost "+q]++
		x.want("receive-and-delete and a batch", want)

		// The dead-letter queue, in both modes.
		send(t, newSender(t, c, q), "8")
		if got := receive(t, r, 1); len(got) != 1 || r.DeadLetter(ctx, got[0], nil) != nil {
			t.Fatalf("received %v", bodies(got))
		}
		want["sent "+q]++
		want["received "+q+" peek_lock"]++
		want["settled "+q+" dead_letter"]++
		dlq, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		dead := receive(t, dlq, 2)
		if len(dead) != 2 {
			t.Fatalf("received %v from the dead-letter queue", bodies(dead))
		}
		must(t, dlq.Abandon(ctx, dead[0], nil))
		must(t, dlq.Complete(ctx, dead[1]))
		wantErr(t, "Complete of a dead letter again", dlq.Complete(ctx, dead[1]), sluice.ErrLockLost)
		want["received "+q+"/$dlq peek_lock"] = 2
		want["settled "+q+"/$dlq abandon"] = 1
		want["settled "+q+"/$dlq complete"] = 1
		want["lost "+q+"/$dlq"] = 1
		dlqDelete, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter, Mode: sluice.ReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		if got := receive(t, dlqDelete, 1); len(got) != 1 {
			t.Fatalf("received %v from the dead-letter queue", bodies(got))
		}
		want["received "+q+"/$dlq receive_and_delete"] = 1
		x.want("dead-letter queue", want)

		// A topic: sent to the topic, received from the subscription.
		topic := "t-" + randHex(4)
		if _, err := c.CreateTopic(ctx, topic, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateSubscription(ctx, topic, "all", nil); err != nil {
			t.Fatal(err)
		}
		send(t, newSender(t, c, topic), "t")
		sub := sluice.SubscriptionPath(topic, "all")
		if got := receive(t, newReceiver(t, c, sub, sluice.ReceiveAndDelete), 1); len(got) != 1 {
			t.Fatalf("received %v", bodies(got))
		}
		want["sent "+topic] = 1
		want["received "+sub+" receive_and_delete"] = 1
		x.want("topic", want)

		// Sessions: a receive, a complete and a batch, then the session
		// lost: a renewal and a complete refused.
		sq := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
		ss := newSender(t, c, sq)
		for _, b := range []string{"a", "b", "c"} {
			if _, err := ss.Send(ctx, sessionMsg("s", b)); err != nil {
				t.Fatal(err)
			}
		}
		want["sent "+sq] = 3
		sr, err := c.AcceptSession(ctx, sq, "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		sms, err := sr.Receive(ctx, 3)
		if err != nil || len(sms) != 3 {
			t.Fatalf("session Receive = %v, %v", sms, err)
		}
		want["received "+sq+" peek_lock"] = 3
		must(t, sr.Complete(ctx, sms[0]))
		must(t, sr.CompleteBatch(ctx, sms[1:2]))
		want["settled "+sq+" complete"] = 2
		must(t, sr.Close(ctx))
		wantErr(t, "RenewSessionLock after Close", sr.RenewSessionLock(ctx), sluice.ErrSessionLockLost)
		wantErr(t, "Complete after Close", sr.Complete(ctx, sms[2]), sluice.ErrSessionLockLost)
		want["lost "+sq] = 2
		x.want("session", want)

		// SendTx: the caller commits, so it is not reported.
		tx, err := rawDB(t, kind).BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newSender(t, c, q).SendTx(ctx, tx, &sluice.Message{Body: []byte("tx")}); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		must(t, tx.Commit())
		x.want("SendTx", want)

		// The processor: it completes what its handler returned nil for
		// and abandons what it failed; the handler dead-letters one
		// itself; a message settled behind the processor's back loses
		// its lock at the next renewal, and then on the abandon.
		pq := createQueue(t, c, &sluice.QueueProperties{LockDuration: 2 * time.Second})
		send(t, newSender(t, c, pq), "ok", "fail once", "dead", "taken")
		elsewhere := newReceiver(t, c, pq, sluice.PeekLock)
		handled := make(chan string, 5)
		p := startProcessor(t, c, pq, func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			defer func() { handled <- string(m.Body) }()
			switch string(m.Body) {
			case "fail once":
				if m.DeliveryCount == 1 {
					return fmt.Errorf("failed on purpose")
				}
			case "dead":
				return r.DeadLetter(ctx, m, nil)
			case "taken":
				if err := elsewhere.Complete(ctx, &sluice.ReceivedMessage{LockToken: m.LockToken}); err != nil {
					t.Errorf("Complete elsewhere: %v", err)
				}
				<-ctx.Done() // the renewal finds the lock lost
				return ctx.Err()
			}
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 4, OnError: func(error) {}})
		for range 5 {
			<-handled
		}
		stop(t, p) // waits for the settles after the handlers
		want["sent "+pq] = 4
		want["received "+pq+" peek_lock"] = 5
		want["settled "+pq+" complete"] = 3
		want["settled "+pq+" abandon"] = 1
		want["settled "+pq+" dead_letter"] = 1
		want["lost "+pq] = 2
		x.want("processor", want)
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// After stop returns, fn is not called again, even while other
// goroutines send; another observer goes on; a nil fn observes nothing.
func TestObserveMessagesStop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		s := newSender(t, c, q)
		var stopped atomic.Bool
		var before, after atomic.Int64
		stop := c.ObserveMessages(func(e sluice.MessageEvent) {
			if stopped.Load() {
				after.Add(1)
			}
			before.Add(1)
		})
		other, stopOther := observe(t, c)
		var wg sync.WaitGroup
		sent := make(chan struct{}, 100)
		for range 2 {
			wg.Go(func() {
				for range 20 {
					if _, err := s.Send(ctx, &sluice.Message{Body: []byte("x")}); err != nil {
						t.Error(err)
						return
					}
					sent <- struct{}{}
				}
			})
		}
		<-sent // at least one send reported before the stop
		stop()
		stopped.Store(true)
		stop() // idempotent
		wg.Wait()
		if after.Load() != 0 {
			t.Errorf("%d events reported after stop returned", after.Load())
		}
		if before.Load() < 1 {
			t.Errorf("no event reported before stop")
		}
		other.want("the other observer", map[string]int{"sent " + q: 40})
		stopOther()
		stopNil := c.ObserveMessages(nil) // observes nothing
		send(t, s, "y")
		stopNil()
		other.want("the other observer, stopped", map[string]int{"sent " + q: 40})
	})
}

// BenchmarkMessageRound sends, receives and completes a message on
// SQLite, with no observer of message events (what every client pays
// for the hook: an atomic load a call) and with one.
func BenchmarkMessageRound(b *testing.B) {
	for _, observers := range []int{0, 1} {
		b.Run(fmt.Sprintf("observers=%d", observers), func(b *testing.B) {
			ctx := b.Context()
			c, err := sluice.Open(ctx, "sqlite://"+b.TempDir()+"/bench.db?synchronous=NORMAL", nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
				b.Fatal(err)
			}
			var events atomic.Int64
			for range observers {
				defer c.ObserveMessages(func(sluice.MessageEvent) { events.Add(1) })()
			}
			s, _ := c.NewSender("q")
			r, _ := c.NewReceiver("q", nil)
			msg := &sluice.Message{Body: []byte("x")}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Send(ctx, msg); err != nil {
					b.Fatal(err)
				}
				ms, err := r.TryReceive(ctx, 1)
				if err != nil || len(ms) != 1 {
					b.Fatalf("TryReceive = %v, %v", ms, err)
				}
				if err := r.Complete(ctx, ms[0]); err != nil {
					b.Fatal(err)
				}
			}
			if want := int64(3 * observers * b.N); events.Load() != want {
				b.Fatalf("%d events, want %d", events.Load(), want)
			}
		})
	}
}
