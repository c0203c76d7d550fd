package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func createQueue(t *testing.T, c *sluice.Client, props *sluice.QueueProperties) string {
	t.Helper()
	name := "q-" + randHex(4)
	if _, err := c.CreateQueue(t.Context(), name, props); err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	return name
}

func newSender(t *testing.T, c *sluice.Client, q string) *sluice.Sender {
	t.Helper()
	s, err := c.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newReceiver(t *testing.T, c *sluice.Client, q string, mode sluice.ReceiveMode) *sluice.Receiver {
	t.Helper()
	r, err := c.NewReceiver(q, &sluice.ReceiverOptions{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func send(t *testing.T, s *sluice.Sender, bodies ...string) []int64 {
	t.Helper()
	var seqs []int64
	for _, b := range bodies {
		seq, err := s.Send(t.Context(), &sluice.Message{Body: []byte(b)})
		if err != nil {
			t.Fatalf("Send(%q): %v", b, err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// receive waits up to 10 s for messages.
func receive(t *testing.T, r *sluice.Receiver, max int) []*sluice.ReceivedMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ms, err := r.Receive(ctx, max)
	if err != nil {
		t.Fatalf("Receive(%d): %v", max, err)
	}
	return ms
}

// receiveNone checks that nothing arrives within d.
func receiveNone(t *testing.T, r *sluice.Receiver, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	ms, err := r.Receive(ctx, 10)
	if !errors.Is(err, context.DeadlineExceeded) || len(ms) != 0 {
		t.Fatalf("Receive with nothing available = %d messages, %v; want none and DeadlineExceeded", len(ms), err)
	}
}

func bodies(ms []*sluice.ReceivedMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Body)
	}
	return out
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want an error wrapping %q", what, err, target)
	}
}

func TestQueueEntities(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		info, err := c.CreateQueue(ctx, "orders", nil)
		if err != nil {
			t.Fatalf("CreateQueue: %v", err)
		}
		want := sluice.QueueInfo{Name: "orders", QueueProperties: sluice.QueueProperties{
			LockDuration: 60 * time.Second, MaxDeliveryCount: 10, MaxMessageSize: 1 << 20,
			DefaultTTL: sluice.Forever, DeadLetterRetention: sluice.Forever, // never
			PartitionCount: 1,
		}}
		if info != want {
			t.Fatalf("CreateQueue with no properties = %+v, want the Service Bus defaults %+v", info, want)
		}
		if got, err := c.GetQueue(ctx, "orders"); err != nil || got != want {
			t.Fatalf("GetQueue = %+v, %v; want %+v", got, err, want)
		}
		_, err = c.CreateQueue(ctx, "orders", nil)
		wantErr(t, "CreateQueue of a taken name", err, sluice.ErrEntityExists)
		_, err = c.CreateQueue(ctx, "bad name", nil)
		wantErr(t, "CreateQueue with a space in the name", err, sluice.ErrInvalidName)
		for _, p := range []sluice.QueueProperties{
			{LockDuration: 6 * time.Minute}, {LockDuration: time.Millisecond},
			{MaxMessageSize: 10}, {MaxMessageSize: 2 << 20}, {MaxDeliveryCount: -1},
			{DefaultTTL: -time.Second},
			{UserMetadata: strings.Repeat("m", sluice.MaxUserMetadataLength+1)}, {UserMetadata: "\xff"},
		} {
			_, err = c.CreateQueue(ctx, "invalid-"+randHex(2), &p)
			wantErr(t, fmt.Sprintf("CreateQueue(%+v)", p), err, sluice.ErrInvalidArgument)
		}

		changed := sluice.QueueProperties{
			LockDuration: 30 * time.Second, MaxDeliveryCount: 3, DefaultTTL: time.Hour,
			DeadLetterOnExpiry: true, DeadLetterRetention: 24 * time.Hour, MaxMessageSize: 64 << 10,
			PartitionCount: 1, // as it was: fixed at creation
			UserMetadata:   strings.Repeat("é", sluice.MaxUserMetadataLength/2),
		}
		if _, err := c.UpdateQueue(ctx, "orders", changed); err != nil {
			t.Fatalf("UpdateQueue: %v", err)
		}
		if got, _ := c.GetQueue(ctx, "orders"); got.QueueProperties != changed {
			t.Fatalf("GetQueue after UpdateQueue = %+v, want %+v", got.QueueProperties, changed)
		}
		changed.UserMetadata = "" // an update sets it as given
		if _, err := c.UpdateQueue(ctx, "orders", changed); err != nil {
			t.Fatalf("UpdateQueue: %v", err)
		}
		if got, _ := c.GetQueue(ctx, "orders"); got.QueueProperties != changed {
			t.Fatalf("GetQueue after UpdateQueue clearing the metadata = %+v, want %+v", got.QueueProperties, changed)
		}
		_, err = c.UpdateQueue(ctx, "missing", changed)
		wantErr(t, "UpdateQueue of a missing queue", err, sluice.ErrEntityNotFound)

		for _, n := range []string{"b", "a", "c"} {
			if _, err := c.CreateQueue(ctx, n, nil); err != nil {
				t.Fatal(err)
			}
		}
		var names []string
		for after := ""; ; {
			page, err := c.ListQueues(ctx, after, 2)
			if err != nil {
				t.Fatalf("ListQueues: %v", err)
			}
			if len(page) == 0 {
				break
			}
			for _, q := range page {
				names = append(names, q.Name)
			}
			after = page[len(page)-1].Name
		}
		if want := []string{"a", "b", "c", "orders"}; !slices.Equal(names, want) {
			t.Fatalf("ListQueues = %v, want %v", names, want)
		}

		if err := c.DeleteQueue(ctx, "orders"); err != nil {
			t.Fatalf("DeleteQueue: %v", err)
		}
		_, err = c.GetQueue(ctx, "orders")
		wantErr(t, "GetQueue of a deleted queue", err, sluice.ErrEntityNotFound)
		s := newSender(t, c, "orders")
		_, err = s.Send(ctx, &sluice.Message{Body: []byte("x")})
		wantErr(t, "Send to a deleted queue", err, sluice.ErrEntityNotFound)
	})
}

func TestSendReceiveAllFields(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		sent := sluice.Message{
			Body: []byte("body"), MessageID: "m-1", SessionID: "s-1", PartitionKey: "s-1",
			CorrelationID: "corr", Subject: "subj", ContentType: "text/plain", ReplyTo: "replies",
			ReplyToSessionID: "rs", To: "someone",
			ApplicationProperties: map[string]string{"color": "red", "n": "7"},
			TimeToLive:            time.Hour,
		}
		seq, err := newSender(t, c, q).Send(ctx, &sent)
		if err != nil || seq != 1 {
			t.Fatalf("Send = %d, %v; want 1", seq, err)
		}
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 10)
		if len(ms) != 1 {
			t.Fatalf("Receive returned %d messages, want 1", len(ms))
		}
		m := ms[0]
		if !reflect.DeepEqual(m.Message, sent) {
			t.Fatalf("received %+v\nsent     %+v", m.Message, sent)
		}
		if m.SequenceNumber != 1 || m.DeliveryCount != 1 || m.State != sluice.StateLocked {
			t.Fatalf("received seq %d delivery %d state %v, want 1, 1, locked", m.SequenceNumber, m.DeliveryCount, m.State)
		}
		if d := m.LockedUntil.Sub(m.EnqueuedTime); d < 50*time.Second || d > 70*time.Second {
			t.Fatalf("locked until %v after enqueue, want about the default 60 s", d)
		}
		if err := r.Complete(ctx, m); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		wantErr(t, "Complete twice", r.Complete(ctx, m), sluice.ErrLockLost)
		if st, _ := c.GetQueueStats(ctx, q); st != (sluice.QueueStats{}) {
			t.Fatalf("stats after complete: %+v", st)
		}
	})
}

func TestReceiveWaitsForSend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, nil)
		r := newReceiver(t, c, q, sluice.PeekLock)
		receiveNone(t, r, 200*time.Millisecond)
		go func() {
			time.Sleep(300 * time.Millisecond)
			send(t, newSender(t, c, q), "late")
		}()
		ms := receive(t, r, 10)
		if got := bodies(ms); !slices.Equal(got, []string{"late"}) {
			t.Fatalf("Receive woke with %v", got)
		}
		_, err := r.Receive(t.Context(), 0)
		wantErr(t, "Receive(0)", err, sluice.ErrInvalidArgument)
	})
}

func TestReceiveAndDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "1", "2", "3")
		r := newReceiver(t, c, q, sluice.ReceiveAndDelete)
		ms := receive(t, r, 2)
		if got := bodies(ms); !slices.Equal(got, []string{"1", "2"}) {
			t.Fatalf("ReceiveAndDelete got %v", got)
		}
		wantErr(t, "Complete of a message received and deleted", r.Complete(ctx, ms[0]), sluice.ErrInvalidArgument)
		if st, _ := c.GetQueueStats(ctx, q); st.Active != 1 || st.InFlight != 0 {
			t.Fatalf("stats after receiving 2 of 3 and deleting them: %+v", st)
		}
	})
}

// A lock that expires while the handler still works: the settle fails
// with ErrLockLost and the message comes again, one delivery later.
func TestLockExpiresMidHandler(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: 2 * time.Second})
		send(t, newSender(t, c, q), "slow")
		r := newReceiver(t, c, q, sluice.PeekLock)
		first := receive(t, r, 1)[0]
		time.Sleep(2300 * time.Millisecond) // the handler outlives its lock
		wantErr(t, "Complete after the lock expired", r.Complete(ctx, first), sluice.ErrLockLost)
		wantErr(t, "RenewLock after the lock expired", r.RenewLock(ctx, first), sluice.ErrLockLost)
		again := receive(t, r, 1)[0]
		if again.SequenceNumber != first.SequenceNumber || again.DeliveryCount != 2 {
			t.Fatalf("redelivered seq %d with delivery count %d, want seq %d and 2", again.SequenceNumber, again.DeliveryCount, first.SequenceNumber)
		}
		// A renewed lock outlives the lock duration.
		time.Sleep(1200 * time.Millisecond)
		if err := r.RenewLock(ctx, again); err != nil {
			t.Fatalf("RenewLock: %v", err)
		}
		time.Sleep(1200 * time.Millisecond)
		if err := r.Complete(ctx, again); err != nil {
			t.Fatalf("Complete after a renewal, 2.4 s into a 2 s lock: %v", err)
		}
	})
}

func TestAbandonDeadLetterDefer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{MaxDeliveryCount: 2})
		s := newSender(t, c, q)
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte("a"), ApplicationProperties: map[string]string{"keep": "1", "n": "1"}}); err != nil {
			t.Fatal(err)
		}
		send(t, s, "b", "c")
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 3)
		if err := r.Abandon(ctx, ms[0], &sluice.AbandonOptions{PropertiesToModify: map[string]string{"n": "2"}}); err != nil {
			t.Fatalf("Abandon: %v", err)
		}
		if err := r.DeadLetter(ctx, ms[1], &sluice.DeadLetterOptions{Reason: "poison", Description: "cannot parse"}); err != nil {
			t.Fatalf("DeadLetter: %v", err)
		}
		if err := r.Defer(ctx, ms[2], nil); err != nil {
			t.Fatalf("Defer: %v", err)
		}
		again := receive(t, r, 10)
		if len(again) != 1 || string(again[0].Body) != "a" || again[0].DeliveryCount != 2 ||
			!reflect.DeepEqual(again[0].ApplicationProperties, map[string]string{"keep": "1", "n": "2"}) {
			t.Fatalf("after abandon, received %+v", again[0].Message)
		}
		// Abandoned on its last delivery: dead-lettered.
		if err := r.Abandon(ctx, again[0], nil); err != nil {
			t.Fatalf("Abandon: %v", err)
		}
		st, _ := c.GetQueueStats(ctx, q)
		if st.DeadLettered != 2 || st.Deferred != 1 || st.Active != 0 {
			t.Fatalf("stats: %+v, want 2 dead-lettered and 1 deferred", st)
		}
		receiveNone(t, r, 100*time.Millisecond)
		d, err := r.ReceiveDeferred(ctx, ms[2].SequenceNumber)
		if err != nil || len(d) != 1 || string(d[0].Body) != "c" {
			t.Fatalf("ReceiveDeferred = %v, %v", d, err)
		}
		_, err = r.ReceiveDeferred(ctx, ms[0].SequenceNumber)
		wantErr(t, "ReceiveDeferred of a message not deferred", err, sluice.ErrMessageNotFound)
		if err := r.Complete(ctx, d[0]); err != nil {
			t.Fatalf("Complete of a deferred message: %v", err)
		}
	})
}

// Scheduled messages are not received before their time, and are
// received within a second after it; cancelled ones never.
func TestScheduled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		s := newSender(t, c, q)
		at := time.Now().Add(1500 * time.Millisecond)
		var seqs []int64
		for _, b := range []string{"first", "cancelled", "second"} {
			seq, err := s.Send(ctx, &sluice.Message{Body: []byte(b), ScheduledEnqueueTime: at})
			if err != nil {
				t.Fatalf("Send scheduled: %v", err)
			}
			seqs = append(seqs, seq)
		}
		if err := s.CancelScheduled(ctx, seqs[1]); err != nil {
			t.Fatalf("CancelScheduled: %v", err)
		}
		wantErr(t, "CancelScheduled twice", s.CancelScheduled(ctx, seqs[1]), sluice.ErrMessageNotFound)
		r := newReceiver(t, c, q, sluice.PeekLock)
		peeked, err := r.Peek(ctx, 10, nil)
		if err != nil || len(peeked) != 2 || peeked[0].State != sluice.StateScheduled || !peeked[0].ScheduledEnqueueTime.Equal(at.Truncate(time.Millisecond)) {
			t.Fatalf("Peek of scheduled messages = %+v, %v", peeked, err)
		}
		var got []string
		for len(got) < 2 {
			ms := receive(t, r, 10)
			now := time.Now()
			if now.Before(at.Add(-50 * time.Millisecond)) {
				t.Fatalf("scheduled message received %v before its time", at.Sub(now))
			}
			if late := now.Sub(at); late > time.Second {
				t.Fatalf("scheduled message received %v after its time, want within 1 s", late)
			}
			got = append(got, bodies(ms)...)
		}
		if !slices.Equal(got, []string{"first", "second"}) {
			t.Fatalf("scheduled messages received as %v, want in order without the cancelled one", got)
		}
	})
}

// A scheduled message whose TTL is shorter than its delay is delivered:
// its TTL counts from its time, when it is enqueued under a new number
// (Service Bus). The lease that activates it must come within the TTL of
// its time: 1.5 s of margin.
func TestScheduledTTLFromActivation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{DeadLetterOnExpiry: true})
		s := newSender(t, c, q)
		at := time.Now().Add(2 * time.Second)
		seq, err := s.Send(ctx, &sluice.Message{Body: []byte("later"), TimeToLive: 1500 * time.Millisecond, ScheduledEnqueueTime: at})
		if err != nil {
			t.Fatal(err)
		}
		r := newReceiver(t, c, q, sluice.PeekLock)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		ms, err := r.Receive(rctx, 1)
		if err != nil || len(ms) != 1 {
			reasons, _ := c.DeadLetterReasons(ctx, q)
			t.Fatalf("Receive = %d messages, %v; dead letters %v", len(ms), err, reasons)
		}
		m := ms[0]
		if m.SequenceNumber == seq || m.EnqueuedTime.Before(at.Add(-time.Second)) {
			t.Fatalf("received seq %d enqueued %v; want a number other than the scheduled %d, enqueued at its time %v",
				m.SequenceNumber, m.EnqueuedTime, seq, at)
		}
		if err := r.Complete(ctx, m); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPeek(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		s := newSender(t, c, q)
		send(t, s, "1", "2", "3", "4", "5")
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 1)
		if err := r.Defer(ctx, ms[0], nil); err != nil {
			t.Fatal(err)
		}
		locked := receive(t, r, 1)[0] // 2 stays locked
		var seen []string
		var states []sluice.MessageState
		var lockedUntil []time.Time
		for {
			page, err := r.Peek(ctx, 2, nil)
			if err != nil {
				t.Fatalf("Peek: %v", err)
			}
			if len(page) == 0 {
				break
			}
			for _, m := range page {
				seen, states = append(seen, string(m.Body)), append(states, m.State)
				lockedUntil = append(lockedUntil, m.LockedUntil)
			}
		}
		if !slices.Equal(seen, []string{"1", "2", "3", "4", "5"}) {
			t.Fatalf("Peek pages = %v", seen)
		}
		if want := []sluice.MessageState{sluice.StateDeferred, sluice.StateLocked, sluice.StateActive, sluice.StateActive, sluice.StateActive}; !slices.Equal(states, want) {
			t.Fatalf("Peek states = %v, want %v", states, want)
		}
		// The locked one says when its lock ends; none has a lock token.
		if !lockedUntil[1].Equal(locked.LockedUntil) || !lockedUntil[0].IsZero() || !lockedUntil[2].IsZero() {
			t.Fatalf("Peek: locked until %v, want %v for the locked message alone", lockedUntil, locked.LockedUntil)
		}
		from, err := r.Peek(ctx, 10, &sluice.PeekOptions{FromSequenceNumber: 4})
		if err != nil || !slices.Equal(bodies(from), []string{"4", "5"}) {
			t.Fatalf("Peek from 4 = %v, %v", bodies(from), err)
		}
		wantErr(t, "Complete of a peeked message", r.Complete(ctx, from[0]), sluice.ErrInvalidArgument)
		_, err = r.Peek(ctx, 251, nil)
		wantErr(t, "Peek of 251", err, sluice.ErrInvalidArgument)
		if st, _ := c.GetQueueStats(ctx, q); st.Active != 3 || st.InFlight != 1 || st.Deferred != 1 {
			t.Fatalf("Peek changed the queue: %+v", st)
		}
	})
}

func TestMaxMessageSize(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{MaxMessageSize: 1024})
		s := newSender(t, c, q)
		big := &sluice.Message{Body: []byte(strings.Repeat("x", 1025))}
		_, err := s.Send(ctx, big)
		wantErr(t, "Send of 1025 bytes to a 1 KiB queue", err, sluice.ErrMessageTooLarge)
		_, err = s.SendBatch(ctx, []*sluice.Message{{Body: []byte("ok")}, big})
		wantErr(t, "SendBatch holding one message too large", err, sluice.ErrMessageTooLarge)
		if st, _ := c.GetQueueStats(ctx, q); st.Active != 0 {
			t.Fatalf("a refused batch stored %d messages", st.Active)
		}
		if _, err := s.SendBatch(ctx, []*sluice.Message{{Body: []byte("a")}, {Body: []byte("b")}}); err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
	})
}

// Competing receivers never hold the same message: every message is
// received once while its lock lasts.
func TestCompetingReceivers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		const n = 300
		s := newSender(t, c, q)
		msgs := make([]*sluice.Message, n)
		for i := range msgs {
			msgs[i] = &sluice.Message{Body: []byte(fmt.Sprint(i))}
		}
		if _, err := s.SendBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		var (
			mu       sync.Mutex
			seen     = map[int64]int{}
			received int
			wg       sync.WaitGroup
		)
		// Receivers run until all messages came (the last ones wait for
		// their context), or 20 s passed.
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, _ := c.NewReceiver(q, nil)
				for {
					ms, err := r.Receive(rctx, 7)
					if rctx.Err() != nil {
						return
					}
					if err != nil {
						t.Errorf("Receive: %v", err)
						return
					}
					mu.Lock()
					for _, m := range ms {
						seen[m.SequenceNumber]++
					}
					received += len(ms)
					if received >= n {
						// Wait a little for any message received twice.
						time.AfterFunc(200*time.Millisecond, cancel)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("received %d distinct messages, want %d", len(seen), n)
		}
		for seq, k := range seen {
			if k != 1 {
				t.Fatalf("message %d received %d times under unexpired locks", seq, k)
			}
		}
	})
}

// Duplicate detection holds within one client, and for another node or a
// restarted process on the same database.
func TestDuplicateDetection(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		q := "dedup-" + randHex(3)
		info, err := c.CreateQueue(ctx, q, &sluice.QueueProperties{RequiresDuplicateDetection: true})
		if err != nil {
			t.Fatalf("CreateQueue: %v", err)
		}
		if info.DuplicateDetectionWindow != 10*time.Minute {
			t.Fatalf("default window %v, want 10m", info.DuplicateDetectionWindow)
		}
		s := newSender(t, c, q)
		seqs, err := s.SendBatch(ctx, []*sluice.Message{
			{Body: []byte("a"), MessageID: "order-1"}, {Body: []byte("b"), MessageID: "order-2"},
			{Body: []byte("a twice"), MessageID: "order-1"},
		})
		if err != nil || !slices.Equal(seqs, []int64{1, 2, 1}) {
			t.Fatalf("SendBatch with a duplicate = %v, %v; want [1 2 1]", seqs, err)
		}

		other := reopen(t, kind, service)
		seq, err := newSender(t, other, q).Send(ctx, &sluice.Message{Body: []byte("a again"), MessageID: "order-1"})
		if err != nil || seq != 1 {
			t.Fatalf("Send of a duplicate from another process = %d, %v; want 1", seq, err)
		}
		got := bodies(receive(t, newReceiver(t, other, q, sluice.ReceiveAndDelete), 10))
		if !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("received %v, want [a b]", got)
		}

		_, err = c.CreateQueue(ctx, "w-"+randHex(3), &sluice.QueueProperties{RequiresDuplicateDetection: true, DuplicateDetectionWindow: time.Second})
		wantErr(t, "a 1 s window", err, sluice.ErrInvalidArgument)
	})
}
