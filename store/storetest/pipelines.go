package storetest

import (
	"context"
	"fmt"
	mathrand "math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Tests of the commit pipelines: writes to independent entities, and a
// queue's sends and its receives, commit side by side, without
// deadlocks and with numbering that stays gap-free per entity.

// While a caller's transaction holds a queue's counter row (an open
// EnqueueTx), so that a send to that queue waits, the queue's leases and
// settles, and sends to other queues, go on. It needs several commit
// pipelines: on SQLite a caller's transaction holds the one write lock.
func testReceiveNotBehindSend(t *testing.T, h *harness) {
	if h.features.CommitPipelines < 2 {
		t.Skipf("backend %q runs %d commit pipeline (SQLite has one writer)", h.features.Name, h.features.CommitPipelines)
	}
	ctx, st, _, begin := h.txSetup(t)
	te, ok := st.(store.TxEnqueuer)
	if !ok {
		t.Fatalf("backend %q: its Store is not a store.TxEnqueuer", h.features.Name)
	}
	q := createQueue(t, ctx, st, store.QueueSettings{})
	others := make([]string, 32)
	for i := range others {
		others[i] = createQueue(t, ctx, st, store.QueueSettings{})
	}
	enqueue(t, ctx, st, q, msgs("a", "b")...)
	tx := begin()
	if _, err := te.EnqueueTx(ctx, tx, &store.EnqueueAllParams{Batches: []store.EnqueueParams{{Queue: q, Messages: msgs("held")}}}); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}

	// A send to q waits for the caller's transaction.
	blocked := make(chan error, 1)
	go func() {
		_, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: msgs("blocked")})
		blocked <- err
	}()
	// Sends to other queues: with several pipelines for sends, those not
	// routed to the blocked one go through (32 queues all routed to the
	// blocked one of two is a chance of one in four billion). With one,
	// TestStalls checks they go on once the pipeline moved on.
	sent := make(chan error, len(others))
	for _, o := range others {
		go func() {
			_, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: o, Messages: msgs("x")})
			sent <- err
		}()
	}
	receive := make(chan error, 1)
	go func() { receive <- leaseAndComplete(ctx, st, q, "a", "b") }()

	deadline := time.After(waitFor)
	select {
	case err := <-receive:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline:
		t.Fatalf("a lease and a complete of a queue waited %v behind a send to it", waitFor)
	}
	// Producers' writes use the first half of the pipelines: with fewer
	// than three, every send shares the blocked one.
	waited := 0
	if h.features.CommitPipelines >= 3 {
		select {
		case err := <-sent:
			if err != nil {
				t.Fatal(err)
			}
			waited = 1
		case <-deadline:
			t.Fatalf("no send to any of %d other queues went through in %v while one queue's send waited", len(others), waitFor)
		}
	}
	select {
	case err := <-blocked:
		t.Fatalf("a send went through while a caller's transaction held its queue's counter row (%v)", err)
	default:
	}
	commit(t, tx)
	if err := <-blocked; err != nil {
		t.Fatalf("the send that waited: %v", err)
	}
	for range len(others) - waited {
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
	// The numbers follow the commits: the caller's message, then the one
	// that waited for it.
	got := lease(t, ctx, st, q, 10, long)
	if p := payloads(got); !slices.Equal(p, []string{"held", "blocked"}) {
		t.Fatalf("after the commit the queue holds %v, want [held blocked]", p)
	}
	if got[1].Seq != got[0].Seq+1 {
		t.Fatalf("sequence numbers %d and %d: want consecutive", got[0].Seq, got[1].Seq)
	}
}

// leaseAndComplete leases q's messages, which must be want in order, and
// completes them.
func leaseAndComplete(ctx context.Context, st store.Store, q string, want ...string) error {
	ls, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: len(want) + 1, Visibility: long})
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if p := payloads(ls); !slices.Equal(p, want) {
		return fmt.Errorf("lease of %s: %v, want %v", q, p, want)
	}
	p := store.SettleParams{Queue: q, Action: store.Complete}
	for _, l := range ls {
		p.Receipts = append(p.Receipts, l.Receipt)
	}
	res, err := st.Settle(ctx, &p)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("complete: %w", r.Err)
		}
	}
	return nil
}

// Producers send to several queues at once (EnqueueAll, in every order
// of the queues, some passing a duplicate check), consumers lease and
// complete, abandon or dead-letter, and appenders append to partitions,
// all at the same time: no call fails (no deadlock surfaces as
// ErrContention), every queue's numbers are gap-free from 1, and every
// message is accounted for.
func testPipelinesMixed(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	const (
		nQueues     = 6
		producers   = 4
		perProducer = 40
		consumers   = 4
		appenders   = 2
		partitions  = 4
	)
	queues := make([]string, nQueues)
	for i := range queues {
		s := store.QueueSettings{MaxDeliveryCount: 3}
		if i == 0 {
			s.DuplicateDetectionWindow = time.Minute
		}
		queues[i] = createQueue(t, ctx, st, s)
	}
	var (
		mu       sync.Mutex
		seqs     = make(map[string][]int64) // numbers each queue gave
		enqueued = make(map[string]int)
		wg       sync.WaitGroup
		sending  sync.WaitGroup
	)
	record := func(q string, s []int64) {
		mu.Lock()
		defer mu.Unlock()
		seqs[q] = append(seqs[q], s...)
		enqueued[q] += len(s)
	}
	for p := range producers {
		sending.Add(1)
		wg.Go(func() {
			defer sending.Done()
			rng := mathrand.New(mathrand.NewPCG(uint64(p), 19))
			for i := range perProducer {
				if t.Failed() {
					return
				}
				a, b := rng.IntN(nQueues), rng.IntN(nQueues-1)
				if b >= a {
					b++
				}
				body := fmt.Sprintf("p%d-%d", p, i)
				if i%3 == 0 {
					s, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: queues[a], Messages: msgs(body)})
					if err != nil {
						t.Errorf("producer %d: Enqueue: %v", p, err)
						return
					}
					record(queues[a], s)
					continue
				}
				all := &store.EnqueueAllParams{Batches: []store.EnqueueParams{
					{Queue: queues[a], Messages: msgs(body)},
					{Queue: queues[b], Messages: msgs(body)},
				}}
				res, err := st.EnqueueAll(ctx, all)
				if err != nil {
					t.Errorf("producer %d: EnqueueAll to %d and %d: %v", p, a, b, err)
					return
				}
				record(queues[a], res.Seqs[0])
				record(queues[b], res.Seqs[1])
			}
		})
	}
	stop := make(chan struct{})
	for a := range appenders {
		wg.Go(func() {
			rng := mathrand.New(mathrand.NewPCG(uint64(a), 23))
			for i := 0; !t.Failed(); i++ {
				select {
				case <-stop:
					return
				default:
				}
				rs := []store.NewRecord{{Namespace: "ns", Key: fmt.Sprint("k", a), Payload: fmt.Appendf(nil, "r%d-%d", a, i)}}
				if _, err := st.Append(ctx, &store.AppendParams{Partition: int32(rng.IntN(partitions)), Records: rs}); err != nil {
					t.Errorf("appender %d: Append: %v", a, err)
					return
				}
			}
		})
	}
	var settled sync.Map // "queue/seq" → the action that ended it
	for c := range consumers {
		wg.Go(func() {
			rng := mathrand.New(mathrand.NewPCG(uint64(c), 29))
			for !t.Failed() {
				select {
				case <-stop:
					return
				default:
				}
				q := queues[rng.IntN(nQueues)]
				ls, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: 8, Visibility: long})
				if err != nil {
					t.Errorf("consumer %d: Lease: %v", c, err)
					return
				}
				for _, l := range ls {
					action := []store.SettleAction{store.Complete, store.Complete, store.Abandon, store.DeadLetter}[rng.IntN(4)]
					res, err := st.Settle(ctx, &store.SettleParams{Queue: q, Action: action, Receipts: []sluicetype.Receipt{l.Receipt}})
					if err != nil {
						t.Errorf("consumer %d: Settle %s: %v", c, action, err)
						return
					}
					if res[0].Err != nil {
						t.Errorf("consumer %d: %s of seq %d: %v", c, action, l.Seq, res[0].Err)
						return
					}
					if action == store.Complete {
						settled.Store(fmt.Sprint(q, "/", l.Seq), action)
					}
				}
			}
		})
	}
	sending.Wait()
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, q := range queues {
		got := slices.Sorted(slices.Values(seqs[q]))
		for i, s := range got {
			if s != int64(i+1) {
				t.Fatalf("queue %s numbered %v: want 1 to %d without gaps", q, got, len(got))
			}
		}
		completed := 0
		settled.Range(func(k, _ any) bool {
			if s, _ := k.(string); len(s) > len(q) && s[:len(q)+1] == q+"/" {
				completed++
			}
			return true
		})
		s := stats(t, ctx, st, q)
		if total := int64(completed) + s.Active + s.InFlight + s.DeadLettered; total != int64(enqueued[q]) {
			t.Fatalf("queue %s: %d completed, stats %+v: %d in all, want the %d enqueued", q, completed, s, total, enqueued[q])
		}
	}
}
