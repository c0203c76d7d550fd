package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// trimUntil trims partition p until a trim deletes something, or fails
// the test after within; it returns how many records that trim deleted.
func trimUntil(t *testing.T, st store.Store, p int32, within time.Duration) int64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, err := trimNow(t.Context(), st, &store.TrimConsumedParams{Partition: p, Max: 100})
		if err != nil {
			t.Fatalf("TrimConsumed(%d): %v", p, err)
		}
		if n > 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("TrimConsumed(%d) trimmed nothing within %v", p, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An expiry is a hard ceiling: records older than it go although a
// subscription of their namespace has not read them (it was faulted, or
// no node serves it), and that subscription no longer holds back the
// records of other namespaces after it. It reads back as set, and one
// shorter than the max age, or negative, is refused.
func testRetentionExpiry(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	for _, bad := range []store.Retention{{Expiry: -1}, {Parked: -time.Second}, {MaxAge: time.Hour, Expiry: time.Minute}, {MaxAge: store.Forever, Expiry: time.Hour}} {
		wantErr(t, fmt.Sprintf("SetRetention(%+v)", bad), st.SetRetention(ctx, "exp", bad), sluicetype.ErrInvalidArgument)
	}
	for _, r := range []store.Retention{
		{MaxAge: time.Second, MaxBytes: 7, Expiry: time.Hour, Parked: 2 * time.Hour},
		{Expiry: store.Forever, Parked: store.Forever},
	} {
		if err := st.SetRetention(ctx, "exp", r); err != nil {
			t.Fatalf("SetRetention(%+v): %v", r, err)
		}
	}

	// Partition 0: records of "exp" and of "other", which no subscription
	// reads; a subscription of "exp" stays at 0 for ever.
	var rs []store.NewRecord
	for i := range 6 {
		ns := "exp"
		if i%2 == 1 {
			ns = "other"
		}
		rs = append(rs, store.NewRecord{Namespace: ns, Key: "k", Payload: []byte("x")})
	}
	appendRecs(t, st, 0, rs...)
	stuck := newStreamSub(t, st, "exp", "k", 0, 0)
	o := acquire(t, st, "n", 0)
	if err := saveProgress(st, store.ProgressParams{Partition: 0, Epoch: o.Epoch, Checkpoint: 6}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRetention(ctx, "exp", store.Retention{Expiry: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 0, Max: 100}); err != nil || n != 0 {
		t.Fatalf("TrimConsumed with a subscription at 0 and records younger than the expiry = %d, %v; want 0", n, err)
	}
	if err := st.SetRetention(ctx, "exp", store.Retention{Expiry: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if n := trimUntil(t, st, 0, 30*time.Second); n != 6 {
		t.Fatalf("TrimConsumed past the expiry deleted %d records; want all 6: the stuck subscription holds nothing that old", n)
	}
	wantInfo(t, st, 0, store.PartitionInfo{Head: 6, Trimmed: 6})
	_, err := st.Read(ctx, &store.ReadParams{Partition: 0, After: 0, Max: 10})
	wantErr(t, "Read after the stuck subscription's position", err, sluicetype.ErrTrimmed)
	// Its stored position is untouched: what it resumes from, to meet the gap.
	wantProgress(t, st, 0, 0, map[string]int64{stuck: 0})

	// A save's trim says that retention trims with time alone.
	appendRecs(t, st, 0, store.NewRecord{Namespace: "other", Key: "k", Payload: []byte("x")})
	res, err := st.SaveProgress(ctx, []store.ProgressParams{{Partition: 0, Epoch: o.Epoch, Checkpoint: 0, Trim: 100}})
	if err != nil || res[0].Err != nil || !res[0].Timed {
		t.Fatalf("SaveProgress with a trim = %+v, %v; want Timed (an expiry is set)", res, err)
	}
	if err := st.SetRetention(ctx, "exp", store.Retention{}); err != nil {
		t.Fatal(err)
	}
	res, err = st.SaveProgress(ctx, []store.ProgressParams{{Partition: 0, Epoch: o.Epoch, Checkpoint: 0, Trim: 100}})
	if err != nil || res[0].Err != nil || res[0].Timed {
		t.Fatalf("SaveProgress with a trim = %+v, %v; want not Timed (no retention is set)", res, err)
	}
}

// Trims remove a partition's oldest records first, and a subscription of
// a namespace without an expiry holds back every record of its partition
// after its position, as without expiries: records that expired after it
// stay until it has passed them.
func testRetentionExpiryMixed(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	rs := []store.NewRecord{
		{Namespace: "exp", Key: "k", Payload: []byte("1")},
		{Namespace: "exp", Key: "k", Payload: []byte("2")},
		{Namespace: "keep", Key: "k", Payload: []byte("3")},
		{Namespace: "exp", Key: "k", Payload: []byte("4")},
		{Namespace: "exp", Key: "k", Payload: []byte("5")},
	}
	appendRecs(t, st, 1, rs...)
	newStreamSub(t, st, "exp", "k", 1, 0)
	keep := newStreamSub(t, st, "keep", "k", 1, 0)
	o := acquire(t, st, "n", 1)
	if err := st.SetRetention(ctx, "exp", store.Retention{Expiry: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := saveProgress(st, store.ProgressParams{Partition: 1, Epoch: o.Epoch, Checkpoint: 0, Positions: map[string]int64{keep: 3}}); err != nil {
		t.Fatal(err)
	}
	if n := trimUntil(t, st, 1, 30*time.Second); n != 3 {
		t.Fatalf("TrimConsumed deleted %d records; want 3, through the keep subscription's position", n)
	}
	if n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 1, Max: 100}); err != nil || n != 0 {
		t.Fatalf("TrimConsumed of expired records after the keep subscription's position = %d, %v; want 0", n, err)
	}
	wantInfo(t, st, 1, store.PartitionInfo{Head: 5, Trimmed: 3})
	if err := saveProgress(st, store.ProgressParams{Partition: 1, Epoch: o.Epoch, Checkpoint: 0, Positions: map[string]int64{keep: 5}}); err != nil {
		t.Fatal(err)
	}
	if n := trimUntil(t, st, 1, 30*time.Second); n != 2 {
		t.Fatalf("TrimConsumed once keep passed them deleted %d records; want 2", n)
	}
	wantInfo(t, st, 1, store.PartitionInfo{Head: 5, Trimmed: 5})
}

// A namespace's parked retention deletes its parked events once parked
// that long, at a trim of their partition; other namespaces' stay.
func testParkedRetention(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	appendRecs(t, st, 2, recs("r", 3)...)
	a := newStreamSub(t, st, "pa", "k", 2, 0)
	b := newStreamSub(t, st, "pb", "k", 2, 0)
	park := func(sub, ns string) {
		t.Helper()
		ev := store.ParkedEvent{Partition: 2, Record: sluicetype.Record{Position: 1, Namespace: ns, Key: "k", Payload: []byte("x"),
			AppendedAt: time.Now()}, Error: "boom", Attempts: 1}
		if err := st.Park(ctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{ev}}); err != nil {
			t.Fatal(err)
		}
	}
	parked := func(sub string) int {
		t.Helper()
		evs, err := st.Parked(ctx, &store.ParkedParams{Subscription: sub, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	park(a, "pa")
	park(b, "pb")
	if err := st.SetRetention(ctx, "pa", store.Retention{Parked: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 2, Max: 100}); err != nil {
		t.Fatal(err)
	}
	if parked(a) != 1 {
		t.Fatal("a parked event younger than its retention was deleted")
	}
	if err := st.SetRetention(ctx, "pa", store.Retention{Parked: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for parked(a) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a parked event past its retention was not deleted within 30 s of trims")
		}
		if _, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 2, Max: 100}); err != nil && !errors.Is(err, sluicetype.ErrContention) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if parked(b) != 1 {
		t.Fatal("the parked event of a namespace without a parked retention was deleted")
	}
}
