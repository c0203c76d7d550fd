package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var dedupTests = []suiteTest{
	{"Batch", testDedupBatch},
	{"Off", testDedupOff},
	{"Concurrent", testDedupConcurrent},
	{"Window", testDedupWindow},
	{"MissingQueue", testDedupMissingQueue},
}

func withID(payload, id string) store.NewMessage {
	return store.NewMessage{Payload: []byte(payload), MessageID: id}
}

func testDedupBatch(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DuplicateDetectionWindow: time.Minute})
	seqs := enqueue(t, ctx, st, q, withID("a", "id-1"), withID("b", "id-2"), msg("no id"), withID("a again", "id-1"))
	wantSeqs(t, "enqueue with a duplicate in the batch", seqs, []int64{1, 2, 3, 1})
	seqs = enqueue(t, ctx, st, q, withID("b again", "id-2"), withID("c", "id-3"), msg("no id"))
	wantSeqs(t, "enqueue with a duplicate of a stored id", seqs, []int64{2, 4, 5})
	pk := withID("keyed", "id-1")
	pk.PartitionKey = "p"
	seqs = enqueue(t, ctx, st, q, pk)
	wantSeqs(t, "same id, another partition key", seqs, []int64{6})
	// An id that spells out another pair's key is not that pair.
	spelled := withID("spelled", "1:pid-1")
	seqs = enqueue(t, ctx, st, q, spelled)
	wantSeqs(t, "an id spelling out a partition key and id", seqs, []int64{7})

	// A completed message's id still counts within the window.
	ls := lease(t, ctx, st, q, 1, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls...)
	seqs = enqueue(t, ctx, st, q, withID("a third time", "id-1"))
	wantSeqs(t, "id of a completed message", seqs, []int64{1})

	var payloads []string
	for _, m := range peekAll(t, ctx, st, q) {
		payloads = append(payloads, string(m.Payload))
	}
	if want := []string{"b", "no id", "c", "no id", "keyed", "spelled"}; !slices.Equal(payloads, want) {
		t.Fatalf("stored messages %q, want %q (no duplicate stored)", payloads, want)
	}
	// Numbers stay gap-free after duplicates.
	wantSeqs(t, "next number", enqueue(t, ctx, st, q, msg("next")), []int64{8})
}

func testDedupOff(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	seqs := enqueue(t, ctx, st, q, withID("a", "id-1"), withID("a", "id-1"))
	wantSeqs(t, "same id without duplicate detection", seqs, []int64{1, 2})

	// Turning it on applies to what is sent from then on.
	if err := st.UpdateQueue(ctx, &store.QueueSettings{Name: q, DuplicateDetectionWindow: time.Minute}); err != nil {
		t.Fatalf("UpdateQueue: %v", err)
	}
	seqs = enqueue(t, ctx, st, q, withID("a", "id-1"), withID("a", "id-1"))
	wantSeqs(t, "same id after turning duplicate detection on", seqs, []int64{3, 3})
	got, err := st.GetQueue(ctx, q)
	if err != nil || got.DuplicateDetectionWindow != time.Minute {
		t.Fatalf("GetQueue: window %v, %v", got.DuplicateDetectionWindow, err)
	}
	err = st.UpdateQueue(ctx, &store.QueueSettings{Name: q, DuplicateDetectionWindow: time.Second})
	wantErr(t, "a window under 20 s", err, sluicetype.ErrInvalidArgument)
}

// Producers racing to send the same ids store each id once, and all of
// them learn the same sequence number for it.
func testDedupConcurrent(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DuplicateDetectionWindow: time.Minute})
	const producers, ids = 8, 40
	got := make([][]int64, producers)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[p] = make([]int64, ids)
			for i := range ids {
				// Producers walk the ids in different orders: rotated,
				// and every other one backwards.
				id := (i + 5*p) % ids
				if p%2 == 1 {
					id = ids - 1 - id
				}
				seqs, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: []store.NewMessage{withID("x", fmt.Sprint("id-", id))}})
				if err != nil {
					t.Errorf("Enqueue: %v", err)
					return
				}
				got[p][id] = seqs[0]
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for p := 1; p < producers; p++ {
		if !slices.Equal(got[p], got[0]) {
			t.Fatalf("producers learned different numbers for the same ids:\n%v\n%v", got[0], got[p])
		}
	}
	all := peekAll(t, ctx, st, q)
	if len(all) != ids {
		t.Fatalf("%d messages stored for %d ids", len(all), ids)
	}
	wantSeqs(t, "stored numbers", messageSeqs(all), seqRange(1, ids))
}

// An id is a duplicate within the window, and new again after it.
func testDedupWindow(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DuplicateDetectionWindow: store.MinDuplicateDetectionWindow})
	start := time.Now()
	wantSeqs(t, "first send", enqueue(t, ctx, st, q, withID("a", "id")), []int64{1})
	time.Sleep(store.MinDuplicateDetectionWindow - 2*time.Second - time.Since(start))
	wantSeqs(t, "a send just within the window", enqueue(t, ctx, st, q, withID("a", "id")), []int64{1})
	time.Sleep(3 * time.Second)
	wantSeqs(t, "a send after the window", enqueue(t, ctx, st, q, withID("a", "id")), []int64{2})
	if _, err := evict(ctx, st, q); err != nil {
		t.Fatalf("Evict: %v", err)
	}
	wantSeqs(t, "a send after eviction", enqueue(t, ctx, st, q, withID("a", "id")), []int64{2})
}

func testDedupMissingQueue(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DuplicateDetectionWindow: time.Minute})
	enqueue(t, ctx, st, q, withID("a", "id"))
	if err := st.DeleteQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	_, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: []store.NewMessage{withID("a", "id")}})
	wantErr(t, "Enqueue to a deleted queue", err, sluicetype.ErrQueueNotFound)
	createQueue(t, ctx, st, store.QueueSettings{Name: q, DuplicateDetectionWindow: time.Minute})
	wantSeqs(t, "an id sent before the queue was deleted and created again", enqueue(t, ctx, st, q, withID("a", "id")), []int64{1})
}

// seqRange returns the numbers from first through last.
func seqRange(first, last int64) []int64 {
	var out []int64
	for s := first; s <= last; s++ {
		out = append(out, s)
	}
	return out
}
