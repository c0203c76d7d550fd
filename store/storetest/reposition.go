package storetest

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// A subscription moves to a position, the oldest retained record or the
// head, under the retention lock: never below what retention trimmed,
// never past the head, recorded on the subscription, its fault cleared;
// a save computed before the move writes nothing of it.
func testReposition(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	appendRecs(t, st, 1, recs("r", 10)...)
	sub := newStreamSub(t, st, "ns", "key", 1, 0)
	o := acquire(t, st, "n", 1)
	save := func(pos, repositions int64) {
		t.Helper()
		p := store.ProgressParams{Partition: 1, Epoch: o.Epoch, Checkpoint: pos, Positions: map[string]int64{sub: pos}, Trim: 100}
		if repositions > 0 {
			p.Repositions = map[string]int64{sub: repositions}
		}
		if err := saveProgress(st, p); err != nil {
			t.Fatal(err)
		}
	}
	save(5, 0)
	wantInfo(t, st, 1, store.PartitionInfo{Head: 10, Trimmed: 5})
	if err := st.FaultSubscription(ctx, &store.FaultParams{ID: sub, Reason: "retention trimmed"}); err != nil {
		t.Fatal(err)
	}
	reposition := func(p store.RepositionParams) (store.Reposition, error) {
		p.ID = sub
		return st.RepositionSubscription(ctx, &p)
	}
	_, err := reposition(store.RepositionParams{Kind: store.RepositionToPosition, Partition: 1, Position: 5})
	wantErr(t, "Reposition below the trimmed position", err, sluicetype.ErrTrimmed)
	_, err = reposition(store.RepositionParams{Kind: store.RepositionToPosition, Partition: 1, Position: 12})
	wantErr(t, "Reposition past the head", err, sluicetype.ErrInvalidArgument)
	_, err = reposition(store.RepositionParams{Kind: store.RepositionToPosition, Partition: 2, Position: 1})
	wantErr(t, "Reposition on a partition the subscription does not read", err, sluicetype.ErrInvalidArgument)
	for _, bad := range []store.RepositionParams{{}, {Kind: store.RepositionToPosition, Partition: 1},
		{Kind: store.RepositionToHead, By: strings.Repeat("x", store.MaxRepositionByLen+1)}, {Kind: 9}} {
		_, err = reposition(bad)
		wantErr(t, "Reposition of "+bad.Kind.String(), err, sluicetype.ErrInvalidArgument)
	}
	_, err = st.RepositionSubscription(ctx, &store.RepositionParams{ID: "missing", Kind: store.RepositionToHead})
	wantErr(t, "Reposition of a missing subscription", err, sluicetype.ErrSubscriptionNotFound)
	wantProgress(t, st, 1, 5, map[string]int64{sub: 5}) // the refusals wrote nothing

	r, err := reposition(store.RepositionParams{Kind: store.RepositionToPosition, Partition: 1, Position: 6, By: "ops"})
	if err != nil {
		t.Fatalf("Reposition to the oldest record kept: %v", err)
	}
	if r.Kind != store.RepositionToPosition || r.By != "ops" || !reflect.DeepEqual(r.From, map[int32]int64{1: 5}) ||
		!reflect.DeepEqual(r.To, map[int32]int64{1: 5}) || time.Since(r.At).Abs() > clockSkew {
		t.Fatalf("Reposition = %+v", r)
	}
	r, err = reposition(store.RepositionParams{Kind: store.RepositionToHead, By: "ops"})
	if err != nil || !reflect.DeepEqual(r.From, map[int32]int64{1: 5}) || !reflect.DeepEqual(r.To, map[int32]int64{1: 10}) {
		t.Fatalf("Reposition to the head = %+v, %v", r, err)
	}
	subs, err := st.Subscriptions(ctx, &store.SubscriptionFilter{ID: sub})
	if err != nil || len(subs) != 1 {
		t.Fatalf("Subscriptions = %+v, %v", subs, err)
	}
	if s := subs[0]; s.Fault != "" || !s.FaultedAt.IsZero() || s.Repositions != 2 || s.LastReposition == nil ||
		s.LastReposition.Kind != store.RepositionToHead || s.LastReposition.By != "ops" ||
		!reflect.DeepEqual(s.LastReposition.To, map[int32]int64{1: 10}) || !s.LastReposition.At.Equal(r.At) {
		t.Fatalf("repositioned subscription = %+v (last %+v)", s, s.LastReposition)
	}
	wantProgress(t, st, 1, 5, map[string]int64{sub: 10})
	wantRepositions(t, st, 1, map[string]int64{sub: 2})
	// A save its owner computed before the repositions (it knows of
	// none) does not move the subscription back; one that knows does.
	save(7, 0)
	wantProgress(t, st, 1, 7, map[string]int64{sub: 10})
	save(10, 2)
	wantProgress(t, st, 1, 10, map[string]int64{sub: 10})
	wantInfo(t, st, 1, store.PartitionInfo{Head: 10, Trimmed: 10})
	// Back to the oldest kept record: the checkpoint comes back with it.
	appendRecs(t, st, 1, recs("r", 5)...)
	if r, err = reposition(store.RepositionParams{Kind: store.RepositionToOldest}); err != nil || r.To[1] != 10 {
		t.Fatalf("Reposition to the oldest = %+v, %v", r, err)
	}
	if r, err = reposition(store.RepositionParams{Kind: store.RepositionToHead}); err != nil || r.To[1] != 15 {
		t.Fatalf("Reposition to the head = %+v, %v", r, err)
	}
	if r, err = reposition(store.RepositionParams{Kind: store.RepositionToPosition, Partition: 1, Position: 12}); err != nil || r.To[1] != 11 {
		t.Fatalf("Reposition to position 12 = %+v, %v", r, err)
	}
	wantProgress(t, st, 1, 10, map[string]int64{sub: 11})

	// A namespace subscription moves on every partition it reads, or on
	// the one named.
	appendRecs(t, st, 2, recs("r", 4)...)
	ns := "s" + randHex(6)
	if err := st.CreateSubscription(ctx, &store.NewSubscription{ID: ns, Consumer: "c", Namespace: "ns", Partition: store.NoPartition,
		Start: map[int32]int64{0: 0, 1: 10, 2: 0, 3: 0}}); err != nil {
		t.Fatal(err)
	}
	if r, err = st.RepositionSubscription(ctx, &store.RepositionParams{ID: ns, Kind: store.RepositionToHead}); err != nil ||
		!reflect.DeepEqual(r.To, map[int32]int64{0: 0, 1: 15, 2: 4, 3: 0}) {
		t.Fatalf("Reposition of a namespace subscription to the head = %+v, %v", r, err)
	}
	if r, err = st.RepositionSubscription(ctx, &store.RepositionParams{ID: ns, Kind: store.RepositionToPosition, Partition: 2, Position: 2}); err != nil ||
		!reflect.DeepEqual(r.To, map[int32]int64{2: 1}) || !reflect.DeepEqual(r.From, map[int32]int64{2: 4}) {
		t.Fatalf("Reposition of a namespace subscription on partition 2 = %+v, %v", r, err)
	}
	if pp, err := st.Progress(ctx, 1); err != nil || pp.Positions[ns] != 15 {
		t.Fatalf("partition 1 after moving partition 2 only: %+v, %v", pp, err)
	}
	// The count is the subscription's, on every partition it reads.
	wantRepositions(t, st, 1, map[string]int64{sub: 5, ns: 2})
	wantRepositions(t, st, 2, map[string]int64{ns: 2})
}

// wantRepositions checks the counts of repositions Progress returns with
// the positions of a partition's subscriptions.
func wantRepositions(t *testing.T, st store.Store, partition int32, want map[string]int64) {
	t.Helper()
	pp, err := st.Progress(t.Context(), partition)
	if err != nil {
		t.Fatalf("Progress(%d): %v", partition, err)
	}
	if !reflect.DeepEqual(pp.Repositions, want) {
		t.Fatalf("Progress(%d) = repositions %v (positions %v); want %v", partition, pp.Repositions, pp.Positions, want)
	}
}

// Progress reads each subscription's position and its count of
// repositions as of one moment, while repositions commit: the position
// it returns is the one the last reposition it counts stored. An owner
// that took a reposition's position with the count before it would save
// nothing under that count, and apply the reposition again once it
// learnt of it (delivering again what followed it).
func testRepositionReadConsistent(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	const moves = 30
	appendRecs(t, st, 1, recs("r", moves)...)
	sub := newStreamSub(t, st, "ns", "key", 1, 0)
	done := make(chan error, 1)
	go func() {
		// The k-th reposition stores position k: the subscription is done
		// with the records through k.
		for k := int64(1); k <= moves; k++ {
			if _, err := st.RepositionSubscription(ctx, &store.RepositionParams{ID: sub, Kind: store.RepositionToPosition,
				Partition: 1, Position: k + 1}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for reads := 0; ; reads++ {
		pp, err := st.Progress(ctx, 1)
		if err != nil {
			t.Fatalf("Progress: %v", err)
		}
		if pos, n := pp.Positions[sub], pp.Repositions[sub]; pos != n {
			t.Fatalf("read %d: position %d with %d repositions counted; the last of them stored %d", reads, pos, n, n)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Reposition: %v", err)
			}
			wantProgress(t, st, 1, 0, map[string]int64{sub: moves})
			wantRepositions(t, st, 1, map[string]int64{sub: moves})
			return
		default:
		}
	}
}
