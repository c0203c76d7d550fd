package storetest

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var logTests = []suiteTest{
	{"AppendPositions", testAppendPositions},
	{"ReadRoundTrip", testReadRoundTrip},
	{"ReadStream", testReadStream},
	{"ReadStreamLongKeys", testReadStreamLongKeys},
	{"ReadStreamTrimmed", testReadStreamTrimmed},
	{"ReadStreamModel", testReadStreamModel},
	{"Trim", testTrim},
	{"TrimEverything", testTrimEverything},
	{"WatchPartition", testWatchPartition},
	{"TailPartition", testTailPartition},
}

// rec returns a record with the given payload.
func rec(payload string) store.NewRecord {
	return store.NewRecord{Namespace: "ns", Key: "key", Payload: []byte(payload)}
}

// recs returns n records with payloads prefix-0, prefix-1, ...
func recs(prefix string, n int) []store.NewRecord {
	r := make([]store.NewRecord, n)
	for i := range r {
		r[i] = rec(fmt.Sprintf("%s-%d", prefix, i))
	}
	return r
}

// appendRecs appends records to partition p.
func appendRecs(t *testing.T, st store.Store, p int32, rs ...store.NewRecord) store.AppendResult {
	t.Helper()
	res, err := st.Append(t.Context(), &store.AppendParams{Partition: p, Records: rs})
	if err != nil {
		t.Fatalf("Append(partition %d, %d records): %v", p, len(rs), err)
	}
	if res.Last-res.First+1 != int64(len(rs)) {
		t.Fatalf("Append of %d records returned positions %d..%d", len(rs), res.First, res.Last)
	}
	return res
}

// wantAppend checks the positions of an append.
func wantAppend(t *testing.T, st store.Store, p int32, n int, first int64) {
	t.Helper()
	res := appendRecs(t, st, p, recs(fmt.Sprint(p), n)...)
	if res.First != first {
		t.Fatalf("Append of %d records to partition %d at %d..%d, want from %d", n, p, res.First, res.Last, first)
	}
}

// read reads partition p after position after.
func read(t *testing.T, st store.Store, p int32, after int64, max int) []sluicetype.Record {
	t.Helper()
	rs, err := st.Read(t.Context(), &store.ReadParams{Partition: p, After: after, Max: max})
	if err != nil {
		t.Fatalf("Read(partition %d, after %d, max %d): %v", p, after, max, err)
	}
	if len(rs) > max {
		t.Fatalf("Read(max %d) returned %d records", max, len(rs))
	}
	return rs
}

// positions returns the positions of records.
func positions(rs []sluicetype.Record) []int64 {
	p := make([]int64, len(rs))
	for i, r := range rs {
		p[i] = r.Position
	}
	return p
}

// info returns a partition's info.
func info(t *testing.T, st store.Store, p int32) store.PartitionInfo {
	t.Helper()
	in, err := st.PartitionInfo(t.Context(), p)
	if err != nil {
		t.Fatalf("PartitionInfo(%d): %v", p, err)
	}
	return in
}

// wantInfo checks a partition's info.
func wantInfo(t *testing.T, st store.Store, p int32, want store.PartitionInfo) {
	t.Helper()
	if got := info(t, st, p); got != want {
		t.Fatalf("PartitionInfo(%d) = %+v, want %+v", p, got, want)
	}
}

func testAppendPositions(t *testing.T, h *harness) {
	_, st := h.setup(t)
	wantInfo(t, st, 0, store.PartitionInfo{})
	wantAppend(t, st, 0, 3, 1)
	wantAppend(t, st, 0, 2, 4)
	wantAppend(t, st, 1, 1, 1)
	wantAppend(t, st, 7, 4, 1)
	wantAppend(t, st, 0, 1, 6)
	wantAppend(t, st, 1, 2, 2)
	wantAppend(t, st, math.MaxInt32, 1, 1)
	wantInfo(t, st, 0, store.PartitionInfo{Head: 6})
	wantInfo(t, st, 1, store.PartitionInfo{Head: 3})
	wantInfo(t, st, 7, store.PartitionInfo{Head: 4})
	wantInfo(t, st, 2, store.PartitionInfo{})
	wantInfo(t, st, math.MaxInt32, store.PartitionInfo{Head: 1})
	for p, n := range map[int32]int64{0: 6, 1: 3, 7: 4} {
		rs := read(t, st, p, 0, 100)
		wantSeqs(t, fmt.Sprintf("positions of partition %d", p), positions(rs), span(1, n))
		for _, r := range rs {
			if !bytes.HasPrefix(r.Payload, fmt.Appendf(nil, "%d-", p)) {
				t.Fatalf("partition %d position %d holds %q, appended to another partition", p, r.Position, r.Payload)
			}
		}
	}
}

func testReadRoundTrip(t *testing.T, h *harness) {
	_, st := h.setup(t)
	binary := make([]byte, 300)
	for i := range binary {
		binary[i] = byte(i)
	}
	in := []store.NewRecord{
		{Namespace: "orders.v1", Key: "customer/ü-42", Properties: map[string]string{"a": "1", "é": ""}, Payload: binary},
		{Namespace: "ns", Key: "k", Payload: nil},
		{Namespace: "ns", Key: "k", Payload: []byte{}, Properties: map[string]string{}},
		rec("4"), rec("5"),
	}
	before := time.Now()
	appendRecs(t, st, 3, in...)
	rs := read(t, st, 3, 0, 100)
	wantSeqs(t, "Read after 0", positions(rs), span(1, 5))
	for i, r := range rs {
		what := fmt.Sprintf("record %d", r.Position)
		if r.Namespace != in[i].Namespace || r.Key != in[i].Key || !bytes.Equal(r.Payload, in[i].Payload) {
			t.Fatalf("%s: %q/%q/%s, want %q/%q/%s", what, r.Namespace, r.Key, short(r.Payload), in[i].Namespace, in[i].Key, short(in[i].Payload))
		}
		sameProps(t, what, r.Properties, in[i].Properties)
		near(t, what+" AppendedAt", r.AppendedAt, before, clockSkew)
	}
	wantSeqs(t, "Read after 2 max 2", positions(read(t, st, 3, 2, 2)), []int64{3, 4})
	wantSeqs(t, "Read after 4", positions(read(t, st, 3, 4, 100)), []int64{5})
	wantSeqs(t, "Read after the head", positions(read(t, st, 3, 5, 100)), nil)
	wantSeqs(t, "Read far after the head", positions(read(t, st, 3, 1000, 100)), nil)
	wantSeqs(t, "Read of an empty partition", positions(read(t, st, 4, 0, 100)), nil)
}

// consume marks a partition's records through position through as
// consumed: a node takes the partition's lease and saves its checkpoint
// there, so that TrimConsumed may delete them when no subscription holds
// them back.
func consume(t *testing.T, st store.Store, partition int32, through int64) {
	t.Helper()
	o := acquire(t, st, "consumer", partition)
	if err := saveProgress(st, store.ProgressParams{Partition: partition, Epoch: o.Epoch, Checkpoint: through}); err != nil {
		t.Fatalf("SaveProgress(partition %d, checkpoint %d): %v", partition, through, err)
	}
}

// trimConsumed runs one TrimConsumed of at most max records.
func trimConsumed(t *testing.T, st store.Store, partition int32, max int) int64 {
	t.Helper()
	n, err := trimNow(t.Context(), st, &store.TrimConsumedParams{Partition: partition, Max: max})
	if err != nil {
		t.Fatalf("TrimConsumed(partition %d, max %d): %v", partition, max, err)
	}
	return n
}

// Consumed records go in bounded batches, up to the checkpoint and no
// further; a read that would skip them fails with ErrTrimmed.
func testTrim(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	appendRecs(t, st, 0, recs("r", 25)...)
	appendRecs(t, st, 1, recs("other", 5)...)
	consume(t, st, 0, 20)
	var total int64
	for i := 0; ; i++ {
		n := trimConsumed(t, st, 0, 7)
		if n < 0 || n > 7 {
			t.Fatalf("TrimConsumed with Max 7 deleted %d records", n)
		}
		if n == 0 {
			break
		}
		total += n
		if i > 10 {
			t.Fatal("TrimConsumed never returned 0")
		}
	}
	if total != 20 {
		t.Fatalf("TrimConsumed through checkpoint 20 deleted %d records, want 20", total)
	}
	wantInfo(t, st, 0, store.PartitionInfo{Head: 25, Trimmed: 20})
	wantInfo(t, st, 1, store.PartitionInfo{Head: 5})
	for _, after := range []int64{0, 10, 19} {
		_, err := st.Read(ctx, &store.ReadParams{Partition: 0, After: after, Max: 10})
		wantErr(t, fmt.Sprintf("Read after trimmed position %d", after), err, sluicetype.ErrTrimmed)
	}
	wantSeqs(t, "Read after the trimmed position", positions(read(t, st, 0, 20, 100)), span(21, 25))
	wantSeqs(t, "Read after 22", positions(read(t, st, 0, 22, 100)), span(23, 25))
	wantSeqs(t, "Read of the untrimmed partition", positions(read(t, st, 1, 0, 100)), span(1, 5))
	if n := trimConsumed(t, st, 0, 100); n != 0 {
		t.Fatalf("TrimConsumed with nothing more consumed = %d; want 0", n)
	}
	wantInfo(t, st, 0, store.PartitionInfo{Head: 25, Trimmed: 20})
}

func testTrimEverything(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	appendRecs(t, st, 0, recs("r", 5)...)
	consume(t, st, 0, 5)
	if n := trimConsumed(t, st, 0, 100); n != 5 {
		t.Fatalf("TrimConsumed through the head = %d; want 5", n)
	}
	wantInfo(t, st, 0, store.PartitionInfo{Head: 5, Trimmed: 5})
	wantSeqs(t, "Read after the trimmed head", positions(read(t, st, 0, 5, 10)), nil)
	// Positions are never reused, even with every record trimmed.
	wantAppend(t, st, 0, 2, 6)
	wantSeqs(t, "Read after the trimmed head", positions(read(t, st, 0, 5, 10)), []int64{6, 7})
	_, err := st.Read(ctx, &store.ReadParams{Partition: 0, After: 4, Max: 10})
	wantErr(t, "Read after trimmed position 4", err, sluicetype.ErrTrimmed)
}

func testWatchPartition(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	ch, stop := st.WatchPartition(2)
	defer stop()
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		time.Sleep(50 * time.Millisecond)
		if _, err := st.Append(ctx, &store.AppendParams{Partition: 2, Records: recs("wake", 1)}); err != nil {
			t.Errorf("Append: %v", err)
		}
	}()
	waitWoken(t, ch, func() bool { return len(read(t, st, 2, 0, 10)) == 1 })
}

func testTailPartition(t *testing.T, h *harness) {
	_, st := h.setup(t)
	tail := st.TailPartition(4)
	defer tail.Stop()
	take := func() ([]sluicetype.Record, bool) {
		t.Helper()
		select {
		case <-tail.Ready():
		case <-time.After(2 * time.Second):
			t.Fatal("the tail was not woken within 2s")
		}
		return tail.Take()
	}

	// Records come as Read returns them, copied from the appender.
	payload := []byte("first")
	first := store.NewRecord{Namespace: "ns", Key: "a", Properties: map[string]string{"x": "1"}, Payload: payload}
	appendRecs(t, st, 4, first, rec("second"))
	appendRecs(t, st, 4, store.NewRecord{Namespace: "other", Key: "b", Payload: []byte{}})
	appendRecs(t, st, 5, rec("elsewhere"))
	// The appender reuses its buffer: the tail must have copied it.
	copy(payload, "XXXXX")
	got, mustRead := take()
	if mustRead {
		t.Fatal("Take says to read after appends of this store only")
	}
	want := read(t, st, 4, 0, 10)
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("Take returned %d records, Read %d; want 3", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Position != w.Position || g.Namespace != w.Namespace || g.Key != w.Key ||
			!bytes.Equal(g.Payload, w.Payload) || (g.Payload == nil) != (w.Payload == nil) ||
			fmt.Sprint(g.Properties) != fmt.Sprint(w.Properties) || !g.AppendedAt.Equal(w.AppendedAt) {
			t.Fatalf("Take returned %+v, Read %+v", g, w)
		}
	}
	if string(got[0].Payload) != "first" {
		t.Fatalf("the taken record changed with the appender's buffer: %q", got[0].Payload)
	}
	if recs, mustRead := tail.Take(); len(recs) != 0 || mustRead {
		t.Fatalf("a second Take returned %d records, read %v", len(recs), mustRead)
	}

	// A follower that does not take in time reads: the tail keeps a
	// prefix at most and says so.
	big := make([]byte, 64<<10)
	for range 20 {
		appendRecs(t, st, 4, store.NewRecord{Namespace: "ns", Key: "big", Payload: big})
	}
	got, mustRead = take()
	if !mustRead {
		t.Fatal("Take kept 1.25 MiB for a follower that did not take it, and did not say to read")
	}
	if len(got) >= 20 || (len(got) > 0 && got[0].Position != 4) {
		t.Fatalf("Take after an overflow returned %d records from position %d, want fewer than 20 from 4", len(got), got[0].Position)
	}
	for i := range got {
		if got[i].Position != 4+int64(i) {
			t.Fatalf("Take after an overflow returned positions %v, not a run from 4", positions(got))
		}
	}

	// After Stop, nothing is kept.
	tail.Stop()
	appendRecs(t, st, 4, rec("late"))
	if recs, mustRead := tail.Take(); len(recs) != 0 || mustRead {
		t.Fatalf("a stopped tail took %d records, read %v", len(recs), mustRead)
	}
}
