package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// streamRec returns a record of stream ns/key.
func streamRec(ns, key, payload string) store.NewRecord {
	return store.NewRecord{Namespace: ns, Key: key, Payload: []byte(payload)}
}

// readStream reads stream ns/key of partition p after position after.
func readStream(t *testing.T, st store.Store, p int32, ns, key string, after int64, max int) []sluicetype.Record {
	t.Helper()
	rs, err := st.Read(t.Context(), &store.ReadParams{Partition: p, Namespace: ns, Key: key, After: after, Max: max})
	if err != nil {
		t.Fatalf("Read(partition %d, stream %s/%.20s, after %d, max %d): %v", p, ns, key, after, max, err)
	}
	if len(rs) > max {
		t.Fatalf("Read(stream %s/%.20s, max %d) returned %d records", ns, key, max, len(rs))
	}
	for _, r := range rs {
		if r.Namespace != ns || r.Key != key {
			t.Fatalf("Read(stream %s/%.20s) returned position %d of stream %s/%.20s", ns, key, r.Position, r.Namespace, r.Key)
		}
	}
	return rs
}

// testReadStream checks a stream's read among interleaved records of the
// partition's other streams: the same key in another namespace, other keys
// of the namespace, and the same stream in another partition.
func testReadStream(t *testing.T, h *harness) {
	_, st := h.setup(t)
	// Positions 1..60 of partition 2; ns/k holds every third from 3.
	var in []store.NewRecord
	var want []int64
	for i := 1; i <= 60; i++ {
		switch i % 3 {
		case 0:
			in = append(in, streamRec("ns", "k", fmt.Sprint(i)))
			want = append(want, int64(i))
		case 1:
			in = append(in, streamRec("other.ns", "k", fmt.Sprint(i)))
		default:
			in = append(in, streamRec("ns", fmt.Sprintf("k%d", i%5), fmt.Sprint(i)))
		}
	}
	in[0].Properties = map[string]string{"a": "1"}
	in[2].Properties = map[string]string{"é": "ü"}
	appendRecs(t, st, 2, in[:25]...)
	appendRecs(t, st, 3, streamRec("ns", "k", "elsewhere"), streamRec("ns", "k", "elsewhere"))
	appendRecs(t, st, 2, in[25:]...)

	rs := readStream(t, st, 2, "ns", "k", 0, 100)
	wantSeqs(t, "stream ns/k after 0", positions(rs), want)
	for _, r := range rs {
		src := in[r.Position-1]
		if string(r.Payload) != string(src.Payload) {
			t.Fatalf("position %d holds %q, want %q", r.Position, r.Payload, src.Payload)
		}
		sameProps(t, fmt.Sprintf("position %d", r.Position), r.Properties, src.Properties)
		if r.AppendedAt.IsZero() {
			t.Fatalf("position %d has no AppendedAt", r.Position)
		}
	}
	// After a position of the stream, and after one of another stream.
	wantSeqs(t, "stream ns/k after 31", positions(readStream(t, st, 2, "ns", "k", 31, 100)), want[10:])
	wantSeqs(t, "stream ns/k after 33", positions(readStream(t, st, 2, "ns", "k", 33, 100)), want[11:])
	// Max, from the start and in the middle.
	wantSeqs(t, "stream ns/k max 4", positions(readStream(t, st, 2, "ns", "k", 0, 4)), want[:4])
	wantSeqs(t, "stream ns/k after 16 max 3", positions(readStream(t, st, 2, "ns", "k", 16, 3)), []int64{18, 21, 24})
	// Paging through the stream a record at a time meets every record.
	var paged []int64
	for after := int64(0); ; {
		rs := readStream(t, st, 2, "ns", "k", after, 1)
		if len(rs) == 0 {
			break
		}
		paged = append(paged, rs[0].Position)
		after = rs[0].Position
	}
	wantSeqs(t, "stream ns/k paged one at a time", paged, want)
	// At and past the stream's end, and past the head.
	wantSeqs(t, "stream ns/k after its last", positions(readStream(t, st, 2, "ns", "k", 60, 100)), nil)
	wantSeqs(t, "stream ns/k after 59", positions(readStream(t, st, 2, "ns", "k", 59, 100)), []int64{60})
	wantSeqs(t, "stream ns/k far after the head", positions(readStream(t, st, 2, "ns", "k", 1000, 100)), nil)
	// The other streams, each by itself.
	wantSeqs(t, "stream other.ns/k", positions(readStream(t, st, 2, "other.ns", "k", 0, 100)), seqsWhere(1, 60, func(i int) bool { return i%3 == 1 }))
	wantSeqs(t, "stream ns/k2 after 10", positions(readStream(t, st, 2, "ns", "k2", 10, 100)),
		seqsWhere(11, 60, func(i int) bool { return i%3 == 2 && i%5 == 2 }))
	wantSeqs(t, "stream ns/k of partition 3", positions(readStream(t, st, 3, "ns", "k", 0, 100)), []int64{1, 2})
	// Streams with no record there: an unknown key, a key that extends
	// one, a namespace of another case, a partition never written.
	for _, c := range []struct {
		p       int32
		ns, key string
	}{{2, "ns", "nope"}, {2, "ns", "k00"}, {2, "NS", "k"}, {2, "ns", "K"}, {9, "ns", "k"}} {
		wantSeqs(t, fmt.Sprintf("stream %s/%s of partition %d", c.ns, c.key, c.p), positions(readStream(t, st, c.p, c.ns, c.key, 0, 100)), nil)
	}
	// The partition read is unchanged.
	wantSeqs(t, "partition 2", positions(read(t, st, 2, 0, 100)), span(1, 60))
	// Through bounds both reads: the stream's, short of Max when the
	// bound comes first, and the partition's.
	ctx := t.Context()
	for _, c := range []struct {
		ns, key        string
		after, through int64
		max            int
		want           []int64
	}{
		{"ns", "k", 0, 20, 100, []int64{3, 6, 9, 12, 15, 18}},
		{"ns", "k", 0, 21, 100, []int64{3, 6, 9, 12, 15, 18, 21}},
		{"ns", "k", 0, 20, 2, []int64{3, 6}},
		{"ns", "k", 18, 20, 100, nil},
		{"ns", "k", 18, 1000, 100, want[6:]},
		{"", "", 10, 14, 100, span(11, 14)},
		{"", "", 10, 14, 2, span(11, 12)},
	} {
		rs, err := st.Read(ctx, &store.ReadParams{Partition: 2, Namespace: c.ns, Key: c.key, After: c.after, Through: c.through, Max: c.max})
		if err != nil {
			t.Fatalf("Read(%q/%q after %d through %d max %d): %v", c.ns, c.key, c.after, c.through, c.max, err)
		}
		wantSeqs(t, fmt.Sprintf("read of %q/%q after %d through %d max %d", c.ns, c.key, c.after, c.through, c.max), positions(rs), c.want)
	}
	for _, through := range []int64{-1, 10, 5} {
		_, err := st.Read(ctx, &store.ReadParams{Partition: 2, Namespace: "ns", Key: "k", After: 10, Through: through, Max: 10})
		wantErr(t, fmt.Sprintf("Read after 10 through %d", through), err, sluicetype.ErrInvalidArgument)
	}
}

// seqsWhere returns the positions from..to that keep holds for.
func seqsWhere(from, to int, keep func(int) bool) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		if keep(i) {
			s = append(s, int64(i))
		}
	}
	return s
}

// testReadStreamLongKeys checks long keys of multi-byte characters (up to
// the longest, MaxKeyLen bytes) that differ only at their end: a backend
// that indexes a prefix of the key must still tell them apart.
func testReadStreamLongKeys(t *testing.T, h *harness) {
	_, st := h.setup(t)
	base := strings.Repeat("ü", store.MaxKeyLen/2-1) // 1,022 bytes
	keys := []string{base + "a", base + "b", base + "ab", base}
	var in []store.NewRecord
	for i := range 40 {
		in = append(in, streamRec("ns", keys[i%len(keys)], fmt.Sprint(i)))
	}
	appendRecs(t, st, 0, in...)
	for k, key := range keys {
		want := seqsWhere(1, 40, func(i int) bool { return (i-1)%len(keys) == k })
		wantSeqs(t, fmt.Sprintf("long key %d", k), positions(readStream(t, st, 0, "ns", key, 0, 100)), want)
		wantSeqs(t, fmt.Sprintf("long key %d after %d max 2", k, want[3]), positions(readStream(t, st, 0, "ns", key, want[3], 2)), want[4:6])
	}
}

// testReadStreamTrimmed checks ErrTrimmed on a stream's read: a read after
// a position below the partition's trimmed position fails, whether or not
// retention deleted records of that stream.
func testReadStreamTrimmed(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	// ns/a at the odd positions 1..19, ns/b at 2..10, ns/c at 12..20.
	var in []store.NewRecord
	for i := 1; i <= 20; i++ {
		switch {
		case i%2 == 1:
			in = append(in, streamRec("ns", "a", fmt.Sprint(i)))
		case i <= 10:
			in = append(in, streamRec("ns", "b", fmt.Sprint(i)))
		default:
			in = append(in, streamRec("ns", "c", fmt.Sprint(i)))
		}
	}
	appendRecs(t, st, 0, in...)
	consume(t, st, 0, 10)
	if n := trimConsumed(t, st, 0, 100); n != 10 {
		t.Fatalf("TrimConsumed through 10 = %d; want 10", n)
	}
	for _, c := range []struct {
		key   string
		after int64
	}{
		{"a", 0}, {"a", 5}, {"a", 9}, // records of the stream were trimmed
		{"b", 0}, {"b", 9}, // every record of the stream was trimmed
		{"c", 0}, {"c", 9}, // none was, but the read is after a trimmed position
		{"nope", 3}, // a stream with no record at all
	} {
		_, err := st.Read(ctx, &store.ReadParams{Partition: 0, Namespace: "ns", Key: c.key, After: c.after, Max: 100})
		wantErr(t, fmt.Sprintf("Read of stream ns/%s after trimmed position %d", c.key, c.after), err, sluicetype.ErrTrimmed)
	}
	wantSeqs(t, "stream ns/a after the trimmed position", positions(readStream(t, st, 0, "ns", "a", 10, 100)), []int64{11, 13, 15, 17, 19})
	wantSeqs(t, "stream ns/a after 13", positions(readStream(t, st, 0, "ns", "a", 13, 100)), []int64{15, 17, 19})
	wantSeqs(t, "stream ns/b after the trimmed position", positions(readStream(t, st, 0, "ns", "b", 10, 100)), nil)
	wantSeqs(t, "stream ns/c after the trimmed position", positions(readStream(t, st, 0, "ns", "c", 10, 100)), []int64{12, 14, 16, 18, 20})
	// Another partition keeps its records.
	appendRecs(t, st, 1, streamRec("ns", "a", "1"))
	wantSeqs(t, "stream ns/a of an untrimmed partition", positions(readStream(t, st, 1, "ns", "a", 0, 100)), []int64{1})
	// Trimming everything, then appending: positions go on from the head.
	consume(t, st, 0, 20)
	trimConsumed(t, st, 0, 100)
	appendRecs(t, st, 0, streamRec("ns", "a", "21"), streamRec("ns", "b", "22"))
	wantSeqs(t, "stream ns/a after the trimmed head", positions(readStream(t, st, 0, "ns", "a", 20, 100)), []int64{21})
	_, err := st.Read(ctx, &store.ReadParams{Partition: 0, Namespace: "ns", Key: "a", After: 19, Max: 100})
	wantErr(t, "Read of stream ns/a after 19, trimmed through 20", err, sluicetype.ErrTrimmed)
}

// testReadStreamModel appends random records of a few streams (two of
// them with long keys that share all but their last character) and checks
// random stream reads against the partition's records filtered by stream.
func testReadStreamModel(t *testing.T, h *harness) {
	ctx := t.Context()
	long := strings.Repeat("x", store.MaxKeyLen-1)
	streams := [][2]string{{"ns", "a"}, {"ns", "b"}, {"ns2", "a"}, {"ns", long + "1"}, {"ns", long + "2"}}
	rapid.Check(t, func(rt *rapid.T) {
		st := h.store(t, newTenant())
		var all []store.NewRecord
		for range rapid.IntRange(1, 4).Draw(rt, "appends") {
			var batch []store.NewRecord
			for range rapid.IntRange(1, 30).Draw(rt, "records") {
				s := streams[rapid.IntRange(0, len(streams)-1).Draw(rt, "stream")]
				batch = append(batch, streamRec(s[0], s[1], "x"))
			}
			if _, err := st.Append(ctx, &store.AppendParams{Partition: 0, Records: batch}); err != nil {
				rt.Fatalf("Append: %v", err)
			}
			all = append(all, batch...)
		}
		for range 5 {
			s := streams[rapid.IntRange(0, len(streams)-1).Draw(rt, "read stream")]
			after := rapid.Int64Range(0, int64(len(all))+1).Draw(rt, "after")
			max := rapid.IntRange(1, 20).Draw(rt, "max")
			var want []int64
			for i, r := range all {
				if pos := int64(i + 1); pos > after && len(want) < max && r.Namespace == s[0] && r.Key == s[1] {
					want = append(want, pos)
				}
			}
			rs, err := st.Read(ctx, &store.ReadParams{Partition: 0, Namespace: s[0], Key: s[1], After: after, Max: max})
			if err != nil {
				rt.Fatalf("Read: %v", err)
			}
			if got := positions(rs); !slices.Equal(got, want) && len(got)+len(want) > 0 {
				rt.Fatalf("Read(stream %s/%.8s, after %d, max %d) = %v, want %v", s[0], s[1], after, max, got, want)
			}
		}
	})
}

// testReadStreamWhileTrimming races a stream's reads against trims that
// pass them: each read either fails with ErrTrimmed or returns exactly the
// stream's records after its position, never a later one in place of one
// a trim deleted meanwhile.
func testReadStreamWhileTrimming(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	const total, every, step = 2000, 4, 8
	var in []store.NewRecord
	var stream []int64 // positions of ns/k
	for i := 1; i <= total; i++ {
		key := fmt.Sprintf("k%d", i%every)
		if i%every == 0 {
			key = "k"
			stream = append(stream, int64(i))
		}
		in = append(in, streamRec("ns", key, fmt.Sprint(i)))
	}
	for i := 0; i < total; i += 500 {
		appendRecs(t, st, 0, in[i:i+500]...)
	}
	consume(t, st, 0, total)
	done := make(chan error, 1)
	go func() {
		for {
			n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 0, Max: step})
			if err != nil || n == 0 {
				done <- err
				return
			}
		}
	}()
	var reads, trimmed int
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("TrimConsumed: %v", err)
			}
			finished = true
		default:
		}
		// After a position at or just ahead of the trimmed one, so that
		// the next trims pass it while the read runs.
		after := info(t, st, 0).Trimmed + int64(reads%step)
		rs, err := st.Read(ctx, &store.ReadParams{Partition: 0, Namespace: "ns", Key: "k", After: after, Max: 3})
		reads++
		if errors.Is(err, sluicetype.ErrTrimmed) {
			trimmed++
			continue
		}
		if err != nil {
			t.Fatalf("Read of stream ns/k after %d: %v", after, err)
		}
		i, _ := slices.BinarySearch(stream, after+1)
		want := stream[i:min(i+3, len(stream))]
		if got := positions(rs); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("Read of stream ns/k after %d = %v, want %v or ErrTrimmed: it skipped records a trim deleted during the read", after, got, want)
		}
	}
	t.Logf("%d reads, %d of them refused with ErrTrimmed", reads, trimmed)
	wantInfo(t, st, 0, store.PartitionInfo{Head: total, Trimmed: total})
	wantSeqs(t, "stream ns/k after the trimmed head", positions(readStream(t, st, 0, "ns", "k", total, 10)), nil)
}
