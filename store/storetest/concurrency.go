package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	mathrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var concurrencyTests = []suiteTest{
	{"Enqueue", testConcurrentEnqueue},
	{"LeaseExclusive", testLeaseExclusive},
	{"GapSafeRead", testGapSafeRead},
	{"ReadStreamWhileTrimming", testReadStreamWhileTrimming},
	{"AppendManyPartitions", testAppendManyPartitions},
	{"NoLoss", testNoLoss},
	{"ReceiveNotBehindSend", testReceiveNotBehindSend},
	{"PipelinesMixed", testPipelinesMixed},
}

// concurrentDeadline bounds each concurrent test.
const concurrentDeadline = 30 * time.Second

func testConcurrentEnqueue(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	const workers, calls = 8, 200
	var (
		mu       sync.Mutex
		payloads = map[int64]string{} // seq → payload, from Enqueue's answers
		total    atomic.Int64
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				n := 1 + (w+i)%3
				var ms []store.NewMessage
				for j := range n {
					ms = append(ms, msg(fmt.Sprintf("w%d-c%d-m%d", w, i, j)))
				}
				seqs, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: ms})
				if err != nil {
					t.Errorf("worker %d: Enqueue: %v", w, err)
					return
				}
				if len(seqs) != n {
					t.Errorf("worker %d: Enqueue of %d messages returned %d sequence numbers", w, n, len(seqs))
					return
				}
				mu.Lock()
				for j, s := range seqs {
					if j > 0 && s != seqs[0]+int64(j) {
						t.Errorf("worker %d: batch got sequence numbers %v, not consecutive", w, seqs)
					}
					if old, dup := payloads[s]; dup {
						t.Errorf("sequence number %d given to %q and %s", s, old, ms[j].Payload)
					}
					payloads[s] = string(ms[j].Payload)
				}
				mu.Unlock()
				total.Add(int64(n))
			}
		})
	}
	// An observer peeks while the enqueuers run. Sequence numbers are
	// assigned in commit order and nothing is removed, so it must always see
	// a gap-free prefix: a hole means a later number became visible before
	// an earlier one.
	stop := make(chan struct{})
	var observer sync.WaitGroup
	observer.Go(func() {
		next := int64(1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			page, err := st.Peek(ctx, &store.PeekParams{Queue: q, FromSeq: next, Max: 500})
			if err != nil {
				t.Errorf("observer: Peek: %v", err)
				return
			}
			for i, m := range page {
				if m.Seq != next+int64(i) {
					t.Errorf("observer: Peek from %d saw sequence number %d at index %d: sequence numbers became visible out of order", next, m.Seq, i)
					return
				}
			}
			next += int64(len(page))
			if len(page) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	wg.Wait()
	close(stop)
	observer.Wait()
	if t.Failed() {
		return
	}
	n := total.Load()
	all := peekAll(t, ctx, st, q)
	wantSeqs(t, "sequence numbers after concurrent enqueues", messageSeqs(all), span(1, n))
	for _, m := range all {
		if string(m.Payload) != payloads[m.Seq] {
			t.Fatalf("seq %d holds %q, but Enqueue gave it to %q", m.Seq, m.Payload, payloads[m.Seq])
		}
	}
}

func testLeaseExclusive(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	const n = 400
	var in []store.NewMessage
	for i := range n {
		in = append(in, msg(fmt.Sprint(i)))
	}
	enqueue(t, ctx, st, q, in...)
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		wg   sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for {
				ls, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: 1 + w%5, Visibility: long})
				if err != nil {
					t.Errorf("worker %d: Lease: %v", w, err)
					return
				}
				if len(ls) == 0 {
					return
				}
				mu.Lock()
				for _, l := range ls {
					if prev, dup := seen[l.Seq]; dup {
						t.Errorf("seq %d leased by worker %d while worker %d held a valid lease on it", l.Seq, w, prev)
					}
					seen[l.Seq] = w
					if l.DeliveryCount != 1 {
						t.Errorf("seq %d: DeliveryCount %d, want 1", l.Seq, l.DeliveryCount)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("the workers leased %d distinct messages, want %d", len(seen), n)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: n})
}

func testGapSafeRead(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	const producers, perProducer, partition = 8, 300, 5
	total := producers * perProducer
	var (
		mu    sync.Mutex
		where = map[string]int64{} // payload → position, from Append's answers
		wg    sync.WaitGroup
	)
	for p := range producers {
		wg.Go(func() {
			rng := mathrand.New(mathrand.NewPCG(uint64(p), 1))
			for i := 0; i < perProducer; {
				n := min(1+rng.IntN(5), perProducer-i)
				rs := make([]store.NewRecord, n)
				for j := range rs {
					rs[j] = rec(fmt.Sprintf("p%d-%d", p, i+j))
				}
				res, err := st.Append(ctx, &store.AppendParams{Partition: partition, Records: rs})
				if err != nil {
					t.Errorf("producer %d: Append: %v", p, err)
					return
				}
				if res.Last-res.First+1 != int64(n) {
					t.Errorf("producer %d: Append of %d records at %d..%d", p, n, res.First, res.Last)
					return
				}
				mu.Lock()
				for j, r := range rs {
					where[string(r.Payload)] = res.First + int64(j)
				}
				mu.Unlock()
				i += n
			}
		})
	}

	defer wg.Wait()

	// The reader tails the partition while the producers append. Positions
	// are assigned in commit order, so it must see every position, in order,
	// each once: a record that commits behind the reader's position is lost
	// to it for good.
	ch, stop := st.WatchPartition(partition)
	defer stop()
	seen := make([]string, 0, total)
	deadline := time.Now().Add(concurrentDeadline)
	for len(seen) < total && !t.Failed() {
		if time.Now().After(deadline) {
			t.Fatalf("reader saw %d of %d records within %v", len(seen), total, concurrentDeadline)
		}
		after := int64(len(seen))
		rs, err := st.Read(ctx, &store.ReadParams{Partition: partition, After: after, Max: 100})
		if err != nil {
			t.Fatalf("Read after %d: %v", after, err)
		}
		for i, r := range rs {
			if r.Position != after+int64(i)+1 {
				t.Fatalf("Read after %d returned position %d at index %d: a gap, so a record committed behind the reader", after, r.Position, i)
			}
			seen = append(seen, string(r.Payload))
		}
		if len(rs) == 0 {
			select {
			case <-ch:
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(where) != total {
		t.Fatalf("producers appended %d records, want %d", len(where), total)
	}
	once := map[string]bool{}
	for i, p := range seen {
		pos := int64(i + 1)
		if once[p] {
			t.Fatalf("record %q read twice", p)
		}
		once[p] = true
		if where[p] != pos {
			t.Fatalf("record %q read at position %d, but Append put it at %d", p, pos, where[p])
		}
	}
	wantInfo(t, st, partition, store.PartitionInfo{Head: int64(total)})
	if rs := read(t, st, partition, int64(total), 10); len(rs) != 0 {
		t.Fatalf("records past the head: %v", positions(rs))
	}
}

// testAppendManyPartitions races appends to several partitions, so that
// groups commit appends to many partitions at once, beside enqueues that
// put some of those groups in a transaction with other writes: every
// partition's positions stay gap-free, and every record is where its
// append said.
func testAppendManyPartitions(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	const producers, perProducer, partitions = 8, 200, 6
	type placed struct {
		partition int32
		position  int64
	}
	var (
		mu    sync.Mutex
		where = map[string]placed{} // payload → where Append put it
		wg    sync.WaitGroup
	)
	for p := range producers {
		wg.Go(func() {
			rng := mathrand.New(mathrand.NewPCG(uint64(p), 2))
			for i := 0; i < perProducer && !t.Failed(); {
				if p%4 == 3 { // a quarter of the producers enqueue between appends
					if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: []store.NewMessage{{Payload: []byte("m")}}}); err != nil {
						t.Errorf("producer %d: Enqueue: %v", p, err)
						return
					}
				}
				partition := int32(rng.IntN(partitions))
				n := min(1+rng.IntN(4), perProducer-i)
				rs := make([]store.NewRecord, n)
				for j := range rs {
					rs[j] = store.NewRecord{Namespace: "ns", Key: fmt.Sprint("k", p),
						Properties: map[string]string{"p": fmt.Sprint(p)}, Payload: fmt.Appendf(nil, "p%d-%d", p, i+j)}
				}
				res, err := st.Append(ctx, &store.AppendParams{Partition: partition, Records: rs})
				if err != nil {
					t.Errorf("producer %d: Append: %v", p, err)
					return
				}
				if res.Last-res.First+1 != int64(n) {
					t.Errorf("producer %d: Append of %d records at %d..%d", p, n, res.First, res.Last)
					return
				}
				mu.Lock()
				for j, r := range rs {
					where[string(r.Payload)] = placed{partition, res.First + int64(j)}
				}
				mu.Unlock()
				i += n
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(where) != producers*perProducer {
		t.Fatalf("producers appended %d records, want %d", len(where), producers*perProducer)
	}
	total := 0
	for part := range int32(partitions) {
		head := info(t, st, part).Head
		var got []sluicetype.Record
		for after := int64(0); after < head; {
			rs := read(t, st, part, after, 500)
			if len(rs) == 0 {
				t.Fatalf("partition %d: nothing to read after %d below its head %d", part, after, head)
			}
			got = append(got, rs...)
			after = rs[len(rs)-1].Position
		}
		wantSeqs(t, fmt.Sprintf("positions of partition %d", part), positions(got), span(1, head))
		for _, r := range got {
			w, ok := where[string(r.Payload)]
			if !ok || w != (placed{part, r.Position}) {
				t.Fatalf("record %q read at partition %d position %d, but Append put it at %+v", r.Payload, part, r.Position, w)
			}
			if want := "k" + r.Properties["p"]; r.Key != want || r.Namespace != "ns" {
				t.Fatalf("record %q came back as %s/%s with properties %v", r.Payload, r.Namespace, r.Key, r.Properties)
			}
		}
		total += len(got)
	}
	if total != len(where) {
		t.Fatalf("read %d records from the partitions, appended %d", total, len(where))
	}
}

func testNoLoss(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	const producers, perProducer, consumers = 4, 250, 4
	total := producers * perProducer

	// Every payload is an 8-byte id and random bytes; want holds each
	// payload's sha256, and wantSum the xor of them all.
	want := make([][32]byte, total)
	payloads := make([][]byte, total)
	var wantSum, gotSum [32]byte
	for i := range payloads {
		p := binary.BigEndian.AppendUint64(nil, uint64(i))
		p = append(p, []byte(randHex(8+i%64))...)
		payloads[i] = p
		want[i] = sha256.Sum256(p)
		xor(&wantSum, want[i])
	}

	var (
		mu        sync.Mutex
		completed = make([]int, total)
		done      int
		wg        sync.WaitGroup
	)
	for p := range producers {
		wg.Go(func() {
			ids := payloads[p*perProducer : (p+1)*perProducer]
			for i := 0; i < len(ids); {
				n := min(1+(i+p)%8, len(ids)-i)
				var ms []store.NewMessage
				for _, id := range ids[i : i+n] {
					ms = append(ms, store.NewMessage{Payload: id})
				}
				if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: ms}); err != nil {
					t.Errorf("producer %d: Enqueue: %v", p, err)
					return
				}
				i += n
			}
		})
	}
	deadline := time.Now().Add(concurrentDeadline)
	for c := range consumers {
		wg.Go(func() {
			ch, stop := st.WatchQueue(q)
			defer stop()
			for {
				mu.Lock()
				finished := done == total
				mu.Unlock()
				if finished || t.Failed() {
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("consumer %d: not everything completed within %v", c, concurrentDeadline)
					return
				}
				ls, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: 16, Visibility: time.Minute})
				if err != nil {
					t.Errorf("consumer %d: Lease: %v", c, err)
					return
				}
				if len(ls) == 0 {
					select {
					case <-ch:
					case <-time.After(10 * time.Millisecond):
					}
					continue
				}
				p := store.SettleParams{Queue: q, Action: store.Complete}
				for _, l := range ls {
					if len(l.Payload) < 8 {
						t.Errorf("consumer %d: seq %d holds a %d-byte payload", c, l.Seq, len(l.Payload))
						return
					}
					id := binary.BigEndian.Uint64(l.Payload)
					if id >= uint64(total) || sha256.Sum256(l.Payload) != want[id] {
						t.Errorf("consumer %d: seq %d holds a corrupt payload %s", c, l.Seq, short(l.Payload))
						return
					}
					p.Receipts = append(p.Receipts, l.Receipt)
				}
				res, err := st.Settle(ctx, &p)
				if err != nil {
					t.Errorf("consumer %d: Settle: %v", c, err)
					return
				}
				mu.Lock()
				for i, r := range res {
					if r.Err != nil {
						t.Errorf("consumer %d: complete of seq %d: %v", c, ls[i].Seq, r.Err)
						continue
					}
					id := binary.BigEndian.Uint64(ls[i].Payload)
					if completed[id] == 0 {
						done++
						xor(&gotSum, want[id])
					}
					completed[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for id, n := range completed {
		if n == 0 {
			t.Fatalf("payload %d was enqueued but never completed", id)
		}
	}
	if !bytes.Equal(gotSum[:], wantSum[:]) {
		t.Fatalf("checksum of completed payloads %x, want %x", gotSum, wantSum)
	}
	wantEmpty(t, ctx, st, q)
	if n := slices.Max(completed); n > 1 {
		t.Logf("some payloads were completed %d times (allowed: at-least-once)", n)
	}
}

// xor folds b into sum.
func xor(sum *[32]byte, b [32]byte) {
	for i := range sum {
		sum[i] ^= b[i]
	}
}
