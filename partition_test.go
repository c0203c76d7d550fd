package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// partitionOf is the partition a sequence number carries in its top 16
// bits, and own the partition's own number.
func partitionOf(seq int64) (part int, own int64) { return int(seq >> 48), seq & (1<<48 - 1) }

func TestPartitionedQueueEntity(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		for _, n := range []int{-1, sluice.MaxPartitionCount + 1} {
			_, err := c.CreateQueue(ctx, "bad-"+randHex(4), &sluice.QueueProperties{PartitionCount: n})
			wantErr(t, fmt.Sprintf("CreateQueue with %d partitions", n), err, sluice.ErrInvalidArgument)
		}
		_, err := c.CreateQueue(ctx, "a/partitions/1", nil)
		wantErr(t, "CreateQueue of a partition's name", err, sluice.ErrInvalidName)

		plain := createQueue(t, c, nil)
		if info, err := c.GetQueue(ctx, plain); err != nil || info.PartitionCount != 1 {
			t.Fatalf("GetQueue(unpartitioned) = %+v, %v; want PartitionCount 1", info, err)
		}
		q := createQueue(t, c, &sluice.QueueProperties{PartitionCount: 4, MaxDeliveryCount: 5})
		if info, err := c.GetQueue(ctx, q); err != nil || info.PartitionCount != 4 {
			t.Fatalf("GetQueue = %+v, %v; want PartitionCount 4", info, err)
		}
		_, err = c.CreateQueue(ctx, q, &sluice.QueueProperties{PartitionCount: 2})
		wantErr(t, "CreateQueue again", err, sluice.ErrEntityExists)
		_, err = c.UpdateQueue(ctx, q, sluice.QueueProperties{PartitionCount: 2})
		wantErr(t, "UpdateQueue changing PartitionCount", err, sluice.ErrInvalidArgument)

		// Only the queue is listed, and its partitions are no entities.
		qs, err := c.ListQueues(ctx, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, qi := range qs {
			names = append(names, qi.Name)
		}
		if slices.Sort(names); !slices.Equal(names, sorted(plain, q)) {
			t.Fatalf("ListQueues = %v; want %v", names, sorted(plain, q))
		}
		_, err = c.GetQueue(ctx, q+"/partitions/1")
		wantErr(t, "GetQueue of a partition", err, sluice.ErrEntityNotFound)
		_, err = newSender(t, c, q+"/partitions/1").Send(ctx, &sluice.Message{Body: []byte("x")})
		wantErr(t, "Send to a partition", err, sluice.ErrEntityNotFound)

		// An update reaches every partition: with MaxDeliveryCount 1, one
		// abandon dead-letters a message of any partition.
		if _, err := c.UpdateQueue(ctx, q, sluice.QueueProperties{MaxDeliveryCount: 1}); err != nil {
			t.Fatal(err)
		}
		s := newSender(t, c, q)
		for p := range 8 {
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte("m"), PartitionKey: fmt.Sprint("k", p)}); err != nil {
				t.Fatal(err)
			}
		}
		c2 := reopen(t, kind, service) // without the first client's cached settings
		r := newReceiver(t, c2, q, sluice.PeekLock)
		got := receiveAll(t, r, 8)
		for _, m := range got {
			if err := r.Abandon(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		st, err := c.GetQueueStats(ctx, q)
		if err != nil || st.DeadLettered != 8 || st.Active != 0 {
			t.Fatalf("stats after abandons = %+v, %v; want 8 dead letters", st, err)
		}
		reasons, err := c.DeadLetterReasons(ctx, q)
		if err != nil || reasons[sluice.ReasonMaxDeliveryCountExceeded] != 8 {
			t.Fatalf("DeadLetterReasons = %v, %v; want 8 MaxDeliveryCountExceeded", reasons, err)
		}

		// Delete takes every partition: a queue created again under the
		// name is empty.
		if err := c.DeleteQueue(ctx, q); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateQueue(ctx, q, &sluice.QueueProperties{PartitionCount: 4}); err != nil {
			t.Fatal(err)
		}
		if st, err := c.GetQueueStats(ctx, q); err != nil || st != (sluice.QueueStats{}) {
			t.Fatalf("stats of the queue created again = %+v, %v; want none", st, err)
		}
	})
}

// sorted returns its arguments in order.
func sorted(s ...string) []string { slices.Sort(s); return s }

// receiveAll receives until it has n messages, failing after 10 s.
func receiveAll(t *testing.T, r *sluice.Receiver, n int) []*sluice.ReceivedMessage {
	t.Helper()
	var out []*sluice.ReceivedMessage
	for len(out) < n {
		out = append(out, receive(t, r, n-len(out))...)
	}
	return out
}

func TestPartitionedQueueSendReceive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{PartitionCount: 4})
		s := newSender(t, c, q)

		// Unkeyed sends take turns over the partitions: sent for long
		// enough, they reach every partition.
		unkeyed := 0
		parts := map[int]bool{}
		for deadline := time.Now().Add(10 * time.Second); len(parts) < 4; unkeyed++ {
			if time.Now().After(deadline) {
				t.Fatalf("%d unkeyed sends reached partitions %v; want all 4", unkeyed, parts)
			}
			seq, err := s.Send(ctx, &sluice.Message{Body: []byte("u")})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := partitionOf(seq)
			parts[p] = true
		}
		// Keyed ones stay in their key's partition, numbered gap-free
		// within it.
		var keyed []int64
		for i := range 5 {
			seq, err := s.Send(ctx, &sluice.Message{Body: fmt.Appendf(nil, "k%d", i), PartitionKey: "key"})
			if err != nil {
				t.Fatal(err)
			}
			keyed = append(keyed, seq)
		}
		kp, first := partitionOf(keyed[0])
		for i, seq := range keyed {
			if p, own := partitionOf(seq); p != kp || own != first+int64(i) {
				t.Fatalf("keyed sends numbered %x; want one partition, consecutive", keyed)
			}
		}

		// A batch of keyed and unkeyed messages: numbers in the batch's
		// order, each naming its message.
		batch := []*sluice.Message{
			{Body: []byte("b0")}, {Body: []byte("b1"), SessionID: ""}, {Body: []byte("b2"), PartitionKey: "x"},
			{Body: []byte("b3"), PartitionKey: "y"}, {Body: []byte("b4")},
		}
		bseqs, err := s.SendBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		r := newReceiver(t, c, q, sluice.PeekLock)
		for i, seq := range bseqs {
			ms, err := r.Peek(ctx, 1, &sluice.PeekOptions{FromSequenceNumber: seq})
			if err != nil || len(ms) != 1 || ms[0].SequenceNumber != seq || string(ms[0].Body) != string(batch[i].Body) {
				t.Fatalf("peek of batch message %d (seq %x) = %v, %v", i, seq, ms, err)
			}
		}

		// Peek walks every partition in sequence-number order.
		total := unkeyed + 5 + len(batch)
		all, err := r.Peek(ctx, sluice.MaxPeek, &sluice.PeekOptions{FromSequenceNumber: 1})
		if err != nil || len(all) != min(total, sluice.MaxPeek) {
			t.Fatalf("peek all = %d messages, %v; want %d", len(all), err, min(total, sluice.MaxPeek))
		}
		if !slices.IsSortedFunc(all, func(a, b *sluice.ReceivedMessage) int { return int(a.SequenceNumber - b.SequenceNumber) }) {
			t.Fatal("peek is not in sequence-number order")
		}
		// Browse pages through them all too.
		var browsed int
		for from := int64(0); ; {
			page, err := r.Browse(ctx, 50, &sluice.BrowseOptions{FromSequenceNumber: from})
			if err != nil {
				t.Fatal(err)
			}
			browsed += len(page.Messages)
			if page.Next == 0 {
				break
			}
			from = page.Next
		}
		if browsed != total {
			t.Fatalf("browse found %d messages; want %d", browsed, total)
		}

		// The partitions that have messages share the receives: one at a
		// time, a receiver takes at most a few in a row from one partition
		// while another still has messages.
		left := map[int]int{}
		for _, m := range all {
			p, _ := partitionOf(m.SequenceNumber)
			left[p]++
		}
		var held []*sluice.ReceivedMessage
		run, last := 0, -1
		for len(held) < total {
			m := receive(t, r, 1)[0]
			p, _ := partitionOf(m.SequenceNumber)
			if p == last {
				run++
			} else {
				run, last = 1, p
			}
			others := 0
			for k, n := range left {
				if k != p {
					others += n
				}
			}
			if run > 4 && others > 0 {
				t.Fatalf("%d receives in a row from partition %d while others hold %v", run, p, left)
			}
			left[p]--
			held = append(held, m)
		}
		// Settling works by the partitioned numbers: complete, renew,
		// defer and receive deferred, and a batch across partitions.
		if err := r.RenewLock(ctx, held[0]); err != nil {
			t.Fatal(err)
		}
		if err := r.Defer(ctx, held[1], nil); err != nil {
			t.Fatal(err)
		}
		def, err := r.ReceiveDeferred(ctx, held[1].SequenceNumber)
		if err != nil || len(def) != 1 || def[0].SequenceNumber != held[1].SequenceNumber {
			t.Fatalf("ReceiveDeferred = %v, %v", def, err)
		}
		held[1] = def[0]
		if err := r.CompleteBatch(ctx, held); err != nil {
			t.Fatal(err)
		}
		if st, err := c.GetQueueStats(ctx, q); err != nil || st != (sluice.QueueStats{}) {
			t.Fatalf("stats after completing all = %+v, %v; want none", st, err)
		}

		// Scheduled messages cancel by their partitioned numbers.
		later := time.Now().Add(time.Hour)
		sch, err := s.SendBatch(ctx, []*sluice.Message{
			{Body: []byte("s1"), ScheduledEnqueueTime: later, PartitionKey: "p1"},
			{Body: []byte("s2"), ScheduledEnqueueTime: later, PartitionKey: "p2"},
			{Body: []byte("s3"), ScheduledEnqueueTime: later, PartitionKey: "p3"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CancelScheduled(ctx, sch...); err != nil {
			t.Fatal(err)
		}
		if st, err := c.GetQueueStats(ctx, q); err != nil || st.Scheduled != 0 {
			t.Fatalf("stats after cancelling = %+v, %v; want nothing scheduled", st, err)
		}
		err = s.CancelScheduled(ctx, 15<<48|1)
		wantErr(t, "CancelScheduled of a partition the queue lacks", err, sluice.ErrMessageNotFound)

		// ReceiveAndDelete takes from every partition as well.
		send(t, s, "d1", "d2", "d3", "d4", "d5")
		rd := newReceiver(t, c, q, sluice.ReceiveAndDelete)
		if got := receiveAll(t, rd, 5); len(got) != 5 {
			t.Fatalf("ReceiveAndDelete got %d; want 5", len(got))
		}
		if st, err := c.GetQueueStats(ctx, q); err != nil || st != (sluice.QueueStats{}) {
			t.Fatalf("stats after ReceiveAndDelete = %+v, %v; want none", st, err)
		}
	})
}

func TestPartitionedQueueDeadLetters(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{PartitionCount: 3})
		s := newSender(t, c, q)
		send(t, s, "a", "b", "c", "d", "e", "f")
		r := newReceiver(t, c, q, sluice.PeekLock)
		for _, m := range receiveAll(t, r, 6) {
			if err := r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: "bad"}); err != nil {
				t.Fatal(err)
			}
		}
		dr, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		peeked, err := dr.Peek(ctx, 10, &sluice.PeekOptions{FromSequenceNumber: 1})
		if err != nil || len(peeked) != 6 {
			t.Fatalf("peek of dead letters = %d, %v; want 6", len(peeked), err)
		}
		dead := receiveAll(t, dr, 6)
		if err := dr.Abandon(ctx, dead[0], nil); err != nil { // unlock one
			t.Fatal(err)
		}
		if err := dr.CompleteBatch(ctx, dead[1:2]); err != nil {
			t.Fatal(err)
		}
		// Resubmit the rest by number, bar one deleted by number.
		if n, err := c.DeleteDeadLetters(ctx, q, dead[2].SequenceNumber); err != nil || n != 1 {
			t.Fatalf("DeleteDeadLetters = %d, %v; want 1", n, err)
		}
		c2 := reopen(t, kind, service) // dead[3:] are still locked by dr: resubmit does not wait on locks
		var rest []int64
		for _, m := range append(dead[:1:1], dead[3:]...) {
			rest = append(rest, m.SequenceNumber)
		}
		if n, err := c2.ResubmitDeadLetters(ctx, q, &sluice.ResubmitOptions{SequenceNumbers: rest}); err != nil || n != 4 {
			t.Fatalf("ResubmitDeadLetters = %d, %v; want 4", n, err)
		}
		if got := receiveAll(t, r, 4); len(got) != 4 {
			t.Fatalf("received %d resubmitted; want 4", len(got))
		}
		if st, err := c.GetQueueStats(ctx, q); err != nil || st.DeadLettered != 0 || st.InFlight != 4 {
			t.Fatalf("stats = %+v, %v; want 4 in flight, no dead letters", st, err)
		}
	})
}

func TestPartitionedQueueDuplicates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{PartitionCount: 4, RequiresDuplicateDetection: true})
		s := newSender(t, c, q)
		// Without a key, the MessageID picks the partition, so a
		// duplicate meets its first copy there.
		for i := range 8 {
			id := fmt.Sprint("id-", i)
			a, err := s.Send(ctx, &sluice.Message{Body: []byte("1"), MessageID: id})
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Send(ctx, &sluice.Message{Body: []byte("2"), MessageID: id})
			if err != nil || b != a {
				t.Fatalf("duplicate send = %x, %v; want the first's number %x", b, err, a)
			}
		}
		// The same id with another partition key is another message.
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte("3"), MessageID: "id-0", PartitionKey: "other"}); err != nil {
			t.Fatal(err)
		}
		if st, err := c.GetQueueStats(ctx, q); err != nil || st.Active != 9 {
			t.Fatalf("stats = %+v, %v; want 9 active", st, err)
		}
	})
}

func TestPartitionedQueueSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{PartitionCount: 4, RequiresSession: true})
		s := newSender(t, c, q)
		const sessions, each = 6, 5
		for i := range each {
			for k := range sessions {
				if _, err := s.Send(ctx, &sluice.Message{Body: fmt.Appendf(nil, "%d", i), SessionID: fmt.Sprint("s", k)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := map[string]bool{}
		for range sessions {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			sr, err := c.AcceptNextSession(actx, q, nil)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if got[sr.SessionID()] {
				t.Fatalf("session %s accepted twice", sr.SessionID())
			}
			got[sr.SessionID()] = true
			ms, err := sr.TryReceive(ctx, 100)
			if err != nil || len(ms) != each {
				t.Fatalf("session %s: %d messages, %v; want %d", sr.SessionID(), len(ms), err, each)
			}
			for i, m := range ms {
				if string(m.Body) != fmt.Sprint(i) {
					t.Fatalf("session %s: message %d is %q: out of order", sr.SessionID(), i, m.Body)
				}
			}
			if err := sr.SetSessionState(ctx, []byte("done")); err != nil {
				t.Fatal(err)
			}
			if err := sr.CompleteBatch(ctx, ms); err != nil {
				t.Fatal(err)
			}
			if err := sr.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// AcceptSession finds a session's state in its partition.
		sr, err := c.AcceptSession(ctx, q, "s3", nil)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := sr.SessionState(ctx); err != nil || string(st) != "done" {
			t.Fatalf("SessionState = %q, %v; want done", st, err)
		}
		if _, err := c.AcceptSession(ctx, q, "s3", nil); !errors.Is(err, sluice.ErrSessionCannotBeLocked) {
			t.Fatalf("second AcceptSession = %v; want ErrSessionCannotBeLocked", err)
		}
		resumed, err := c.ResumeSession(q, "s3", sr.LockToken(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if held, err := resumed.Held(ctx); err != nil || !held {
			t.Fatalf("resumed session Held = %v, %v; want true", held, err)
		}
	})
}

// TestPartitionedQueueConcurrent races producers and consumers on a
// partitioned queue: every message arrives once, and each partition's
// numbers are gap-free.
func TestPartitionedQueueConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{PartitionCount: 4})
		const producers, each, consumers = 4, 40, 3
		s := newSender(t, c, q)
		var wg sync.WaitGroup
		errs := make(chan error, producers+consumers)
		for p := range producers {
			wg.Go(func() {
				for i := range each {
					m := &sluice.Message{Body: fmt.Appendf(nil, "%d-%d", p, i)}
					if i%2 == 0 {
						m.PartitionKey = fmt.Sprint("k", (p+i)%7)
					}
					if _, err := s.Send(ctx, m); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		var (
			mu   sync.Mutex
			got  = map[string]int{}
			seqs = map[int][]int64{}
		)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		rctx, stop := context.WithCancel(rctx)
		defer stop()
		for range consumers {
			wg.Go(func() {
				r := newReceiver(t, c, q, sluice.PeekLock)
				for {
					mu.Lock()
					done := len(got) == producers*each
					mu.Unlock()
					if done {
						return
					}
					ms, err := r.Receive(rctx, 16)
					if err != nil {
						mu.Lock()
						done := len(got) == producers*each
						mu.Unlock()
						if !done {
							errs <- err
						}
						return
					}
					mu.Lock()
					for _, m := range ms {
						got[string(m.Body)]++
						p, own := partitionOf(m.SequenceNumber)
						seqs[p] = append(seqs[p], own)
					}
					if len(got) == producers*each {
						stop() // the others' receives end
					}
					mu.Unlock()
					if err := r.CompleteBatch(ctx, ms); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for k, n := range got {
			if n != 1 {
				t.Fatalf("message %s received %d times", k, n)
			}
		}
		for p, s := range seqs {
			slices.Sort(s)
			for i, own := range s {
				if own != int64(i+1) {
					t.Fatalf("partition %d numbered %v: not gap-free from 1", p, s)
				}
			}
		}
	})
}

// SendTx across partitions commits with the caller's transaction, or
// not at all; CompleteTx settles in the message's partition.
func TestPartitionedQueueTx(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		db := rawDB(t, kind)
		q := createQueue(t, c, &sluice.QueueProperties{PartitionCount: 4})
		s := newSender(t, c, q)
		msgs := func() []*sluice.Message {
			var out []*sluice.Message
			for k := range 6 {
				out = append(out, &sluice.Message{Body: fmt.Appendf(nil, "m%d", k), PartitionKey: fmt.Sprint("k", k)})
			}
			return out
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SendTx(ctx, tx, msgs()...); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if tx, err = db.BeginTx(ctx, nil); err != nil {
			t.Fatal(err)
		}
		seqs, err := s.SendTx(ctx, tx, msgs()...)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		parts := map[int]bool{}
		for _, seq := range seqs {
			p, own := partitionOf(seq)
			parts[p] = true
			if own < 1 {
				t.Fatalf("SendTx numbers %x", seqs)
			}
		}
		if len(parts) < 2 {
			t.Fatalf("six keys went to partitions %v; want several", parts)
		}
		r := newReceiver(t, c, q, sluice.PeekLock)
		got := receiveAll(t, r, 6)
		if tx, err = db.BeginTx(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for _, m := range got {
			if err := r.CompleteTx(ctx, tx, m); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if st, err := c.GetQueueStats(ctx, q); err != nil || st != (sluice.QueueStats{}) {
			t.Fatalf("stats after CompleteTx = %+v, %v; want none (and nothing of the rolled-back send)", st, err)
		}
	})
}

// A partitioned topic's subscriptions are partitioned: a key's copies go
// to its partition in each, receives and sessions cover every partition,
// and deleting the topic takes every partition with it.
func TestPartitionedTopic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		topic := "t-" + randHex(4)
		if _, err := c.CreateTopic(ctx, topic, &sluice.TopicProperties{PartitionCount: 3}); err != nil {
			t.Fatal(err)
		}
		if info, err := c.GetTopic(ctx, topic); err != nil || info.PartitionCount != 3 {
			t.Fatalf("GetTopic = %+v, %v; want PartitionCount 3", info, err)
		}
		_, err := c.UpdateTopic(ctx, topic, sluice.TopicProperties{PartitionCount: 2})
		wantErr(t, "UpdateTopic changing PartitionCount", err, sluice.ErrInvalidArgument)
		for _, sub := range []string{"a", "b"} {
			if _, err := c.CreateSubscription(ctx, topic, sub, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.CreateSubscription(ctx, topic, "s", &sluice.SubscriptionProperties{RequiresSession: true}); err != nil {
			t.Fatal(err)
		}
		subs, err := c.ListSubscriptions(ctx, topic)
		if err != nil || len(subs) != 3 {
			t.Fatalf("ListSubscriptions = %d, %v; want 3 (no partitions listed)", len(subs), err)
		}
		s := newSender(t, c, topic)
		const keys = 9
		for k := range keys {
			if _, err := s.Send(ctx, &sluice.Message{Body: fmt.Appendf(nil, "m%d", k), SessionID: fmt.Sprint("k", k)}); err != nil {
				t.Fatal(err)
			}
		}
		part := map[string]map[int]bool{} // body: the partitions its copies went to
		for _, sub := range []string{"a", "b"} {
			path := sluice.SubscriptionPath(topic, sub)
			if st, err := c.GetQueueStats(ctx, path); err != nil || st.Active != keys {
				t.Fatalf("stats of %s = %+v, %v; want %d active", path, st, err, keys)
			}
			r := newReceiver(t, c, path, sluice.PeekLock)
			ms := receiveAll(t, r, keys)
			for _, m := range ms {
				p, _ := partitionOf(m.SequenceNumber)
				if part[string(m.Body)] == nil {
					part[string(m.Body)] = map[int]bool{}
				}
				part[string(m.Body)][p] = true
			}
			if err := r.CompleteBatch(ctx, ms); err != nil {
				t.Fatal(err)
			}
		}
		used := map[int]bool{}
		for body, ps := range part {
			if len(ps) != 1 {
				t.Fatalf("copies of %s went to partitions %v; want one partition number in every subscription", body, ps)
			}
			for p := range ps {
				used[p] = true
			}
		}
		if len(used) < 2 {
			t.Fatalf("nine keys went to partitions %v; want several", used)
		}
		// Sessions of a partitioned subscription, each in its partition.
		for range keys {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			sr, err := c.AcceptNextSession(actx, sluice.SubscriptionPath(topic, "s"), nil)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			ms, err := sr.TryReceive(ctx, 10)
			if err != nil || len(ms) != 1 || string(ms[0].Body) != "m"+sr.SessionID()[1:] {
				t.Fatalf("session %s received %v, %v", sr.SessionID(), ms, err)
			}
			if err := sr.Complete(ctx, ms[0]); err != nil {
				t.Fatal(err)
			}
		}
		// Deleting the topic takes its subscriptions' partitions: one
		// created again in their place, unpartitioned, is empty.
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte("left"), SessionID: "k1"}); err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteTopic(ctx, topic); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateTopic(ctx, topic, &sluice.TopicProperties{PartitionCount: 3}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateSubscription(ctx, topic, "a", nil); err != nil {
			t.Fatal(err)
		}
		if st, err := c.GetQueueStats(ctx, sluice.SubscriptionPath(topic, "a")); err != nil || st != (sluice.QueueStats{}) {
			t.Fatalf("stats of the subscription created again = %+v, %v; want none", st, err)
		}
	})
}

// A partitioned queue is one entity wherever entities are listed,
// counted or observed, and its partitions are reached through it alone.
func TestPartitionedQueueIsOneEntity(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{PartitionCount: 3, MaxDeliveryCount: 1})
		var (
			mu   sync.Mutex
			dead = map[string]int{}
		)
		stop := c.ObserveDeadLetters(func(entity, _ string, n int) {
			mu.Lock()
			dead[entity] += n
			mu.Unlock()
		})
		defer stop()
		s := newSender(t, c, q)
		for k := range 6 {
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte("m"), PartitionKey: fmt.Sprint("k", k)}); err != nil {
				t.Fatal(err)
			}
		}
		es, err := c.ListMessageEntities(ctx, "", "", 100)
		if err != nil || len(es) != 1 || es[0].Path != q {
			t.Fatalf("ListMessageEntities = %v, %v; want %s alone", es, err, q)
		}
		if st, err := c.GetQueueStats(ctx, q); err != nil || st.Active != 6 {
			t.Fatalf("stats = %+v, %v; want 6 active", st, err)
		}
		for _, call := range []struct {
			what string
			err  error
		}{
			{"GetQueueStats", func() error { _, err := c.GetQueueStats(ctx, q+"/partitions/1"); return err }()},
			{"Peek", func() error {
				r, err := c.NewReceiver(q+"/partitions/1", nil)
				if err == nil {
					_, err = r.Peek(ctx, 1, nil)
				}
				return err
			}()},
			{"PurgeMessages", func() error { _, err := c.PurgeMessages(ctx, q+"/partitions/2", time.Time{}); return err }()},
		} {
			wantErr(t, call.what+" of a partition by name", call.err, sluice.ErrEntityNotFound)
		}

		// A batch settle fails the receipts it cannot settle alone.
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receiveAll(t, r, 6)
		bogus := &sluice.ReceivedMessage{LockToken: fmt.Sprintf("%016x%016x", uint64(9<<48|1), 1)}
		err = r.CompleteBatch(ctx, []*sluice.ReceivedMessage{ms[0], bogus, ms[1]})
		var be *sluice.SettleBatchError
		if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Index != 1 || !errors.Is(err, sluice.ErrLockLost) {
			t.Fatalf("CompleteBatch with a bogus receipt = %v; want a SettleBatchError failing #1 alone with ErrLockLost", err)
		}
		for _, m := range ms[2:] {
			if err := r.Abandon(ctx, m, nil); err != nil { // the last delivery: dead-lettered
				t.Fatal(err)
			}
		}
		mu.Lock()
		got := maps.Clone(dead)
		mu.Unlock()
		if len(got) != 1 || got[q] != 4 {
			t.Fatalf("dead-letter events %v; want 4 for %s alone", got, q)
		}

		// Numbers of partitions the queue lacks name nothing; bad numbers
		// are refused.
		n, err := c.DeleteMessages(ctx, q, &sluice.DeleteOptions{SequenceNumbers: []int64{7<<48 | 1}})
		if err != nil || n != 0 {
			t.Fatalf("DeleteMessages of a partition the queue lacks = %d, %v; want 0, nil", n, err)
		}
		_, err = c.DeleteDeadLetters(ctx, q, 1<<48)
		wantErr(t, "DeleteDeadLetters of number 1<<48", err, sluice.ErrInvalidArgument)
		_, err = r.ReceiveDeferred(ctx, 7<<48|1)
		wantErr(t, "ReceiveDeferred of a partition the queue lacks", err, sluice.ErrMessageNotFound)
	})
}

// On an unpartitioned queue a lock token with partition bits holds no
// lock, as any unknown token.
func TestUnpartitionedQueueHighToken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "a")
		r := newReceiver(t, c, q, sluice.PeekLock)
		m := receive(t, r, 1)[0]
		bogus := &sluice.ReceivedMessage{LockToken: fmt.Sprintf("%016x%s", uint64(1<<48)|uint64(m.SequenceNumber), m.LockToken[16:])}
		wantErr(t, "Complete with partition bits", r.Complete(t.Context(), bogus), sluice.ErrLockLost)
		if err := r.Complete(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	})
}
