package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Backlog sizes of LoadBacklog.
const (
	BacklogInFlight  = 4000
	BacklogScheduled = 2000
	BacklogReady     = 32
)

// LoadBacklog fills a new queue of st, for tests of what a lease costs:
// BacklogInFlight messages leased for an hour (sequence numbers from 1),
// then BacklogScheduled scheduled an hour ahead, then BacklogReady ready
// ones, the last sequence numbers.
func LoadBacklog(t *testing.T, st store.Store, queue string) {
	t.Helper()
	ctx := t.Context()
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: queue}); err != nil {
		t.Fatal(err)
	}
	batch := func(n int, at time.Time) []store.NewMessage {
		ms := make([]store.NewMessage, n)
		for i := range ms {
			ms[i] = store.NewMessage{Payload: []byte("x"), VisibleAt: at}
		}
		return ms
	}
	for range BacklogInFlight / 1000 {
		if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: queue, Messages: batch(1000, time.Time{})}); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Lease(ctx, &store.LeaseParams{Queue: queue, Max: 1000, Visibility: time.Hour}); err != nil || len(got) != 1000 {
			t.Fatalf("Lease: %d, %v", len(got), err)
		}
	}
	for _, ms := range [][]store.NewMessage{
		batch(BacklogScheduled/2, time.Now().Add(time.Hour)),
		batch(BacklogScheduled/2, time.Now().Add(time.Hour)),
		batch(BacklogReady, time.Time{}),
	} {
		if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: queue, Messages: ms}); err != nil {
			t.Fatal(err)
		}
	}
}

// Sizes of LoadInterleavedStreams.
const (
	// InterleavedRecords is how many records partition 0 holds.
	InterleavedRecords = 5000
	// InterleavedEvery is the spacing of stream InterleavedNamespace /
	// InterleavedKey's records: positions InterleavedEvery,
	// 2·InterleavedEvery, ...
	InterleavedEvery = 50
	// InterleavedNamespace and InterleavedKey name the stream read.
	InterleavedNamespace = "ns"
	InterleavedKey       = "wanted"
)

// LoadInterleavedStreams fills partition 0 of st, for tests of what a
// stream's read costs: InterleavedRecords records, of which every
// InterleavedEvery-th belongs to the stream read and the others to streams
// around it in an index (the same key in other namespaces, other keys of
// its namespace, keys it is a prefix of), and partition 1 with as many
// records of the stream read.
func LoadInterleavedStreams(t *testing.T, st store.Store) {
	t.Helper()
	ctx := t.Context()
	others := []store.NewRecord{
		{Namespace: "a", Key: InterleavedKey},
		{Namespace: "nt", Key: InterleavedKey},
		{Namespace: InterleavedNamespace, Key: "a"},
		{Namespace: InterleavedNamespace, Key: InterleavedKey + "1"},
		{Namespace: InterleavedNamespace, Key: "z"},
	}
	wanted := store.NewRecord{Namespace: InterleavedNamespace, Key: InterleavedKey, Payload: []byte("x")}
	var batch []store.NewRecord
	for i := 1; i <= InterleavedRecords; i++ {
		r := wanted
		if i%InterleavedEvery != 0 {
			r = others[i%len(others)]
			r.Payload = []byte("x")
		}
		if batch = append(batch, r); len(batch) == 500 {
			if _, err := st.Append(ctx, &store.AppendParams{Partition: 0, Records: batch}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Append(ctx, &store.AppendParams{Partition: 1, Records: slices.Repeat([]store.NewRecord{wanted}, 500)}); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
}

// CheckInterleavedReads reads the stream of LoadInterleavedStreams after a
// few positions and fails t unless each read returns the stream's records
// after its position, up to its maximum.
func CheckInterleavedReads(t *testing.T, st store.Store) {
	t.Helper()
	const every = InterleavedEvery
	for _, c := range []struct{ after, max, n int64 }{
		{0, 1000, InterleavedRecords / every},
		{1000, 10, 10},
		{1001, 10, 10},
		{InterleavedRecords - 1, 10, 1},
		{InterleavedRecords, 10, 0},
	} {
		rs, err := st.Read(t.Context(), &store.ReadParams{Namespace: InterleavedNamespace, Key: InterleavedKey, After: c.after, Max: int(c.max)})
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for i := range c.n {
			want = append(want, (c.after/every+1+i)*every)
		}
		wantSeqs(t, fmt.Sprintf("Read of the stream after %d, max %d", c.after, c.max), positions(rs), want)
	}
}
