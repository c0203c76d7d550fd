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

var browseTests = []suiteTest{
	{"Match", testBrowseMatch},
	{"Bounds", testBrowseBounds},
	{"DeadLetters", testBrowseDeadLetters},
	{"Invalid", testBrowseInvalid},
	{"DeleteNamed", testDeleteNamed},
	{"DeleteOldest", testDeleteOldest},
	{"DeleteInvalid", testDeleteInvalid},
	{"DeleteRacesLease", testDeleteRacesLease},
}

// browse runs a Browse that must succeed.
func browse(t *testing.T, st store.Store, p store.BrowseParams) store.BrowseResult {
	t.Helper()
	res, err := st.Browse(t.Context(), &p)
	if err != nil {
		t.Fatalf("Browse(%+v): %v", p, err)
	}
	return res
}

// A browse examines rows without their bodies, returns those that match
// with their bodies and their state as Peek reports it, and says where
// it stopped.
func testBrowseMatch(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q,
		store.NewMessage{Payload: []byte("locked"), MessageID: "a"},
		store.NewMessage{Payload: []byte("deferred"), MessageID: "b"},
		store.NewMessage{Payload: []byte("red"), MessageID: "c", Properties: map[string]string{"colour": "red"}},
		store.NewMessage{Payload: []byte("later"), MessageID: "d", VisibleAt: time.Now().Add(time.Hour)},
		store.NewMessage{Payload: []byte("blue"), MessageID: "e", Properties: map[string]string{"colour": "blue"}, Headers: map[string]string{"subject": "s"}},
	)
	ls := lease(t, ctx, st, q, 2, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, ls[1])

	var seen []string
	examined := map[int64]bool{}
	all := browse(t, st, store.BrowseParams{Queue: q, Max: 10, Scan: 10, Match: func(d *sluicetype.DeadLetter) bool {
		if !examined[d.Seq] && len(d.Payload) != 0 {
			t.Errorf("Match examined message %d with its body %q: a browse examines rows without them", d.Seq, d.Payload)
		}
		examined[d.Seq] = true
		seen = append(seen, fmt.Sprintf("%d:%s", d.Seq, d.State))
		return true
	}})
	if all.Next != 0 {
		t.Errorf("a browse that examined every message says Next %d, want 0", all.Next)
	}
	want := []string{"1:leased", "2:deferred", "3:ready", "4:scheduled", "5:ready"}
	// Match sees each row twice: examined, then read with its body.
	if !slices.Equal(seen[:5], want) {
		t.Errorf("Match saw %v first, want %v", seen, want)
	}
	var bodies []string
	for _, d := range all.Messages {
		bodies = append(bodies, string(d.Payload))
	}
	if !slices.Equal(bodies, []string{"locked", "deferred", "red", "later", "blue"}) {
		t.Errorf("Browse returned bodies %q", bodies)
	}
	if m := all.Messages[4]; m.Properties["colour"] != "blue" || m.Headers["subject"] != "s" || m.MessageID != "e" {
		t.Errorf("Browse returned message 5 as %+v", m.Message)
	}

	red := browse(t, st, store.BrowseParams{Queue: q, Max: 10, Scan: 10, Match: func(d *sluicetype.DeadLetter) bool {
		return d.Properties["colour"] == "red"
	}})
	wantSeqs(t, "messages whose colour is red", deadSeqs(red.Messages), []int64{3})
	states := browse(t, st, store.BrowseParams{Queue: q, Max: 10, Scan: 10, Match: func(d *sluicetype.DeadLetter) bool {
		return d.State == sluicetype.StateLeased || d.State == sluicetype.StateScheduled
	}})
	wantSeqs(t, "locked and scheduled messages", deadSeqs(states.Messages), []int64{1, 4})
	// A match that no longer holds when the body is read is left out.
	calls := map[int64]int{}
	fickle := browse(t, st, store.BrowseParams{Queue: q, Max: 10, Scan: 10, Match: func(d *sluicetype.DeadLetter) bool {
		calls[d.Seq]++
		return calls[d.Seq] == 1 || d.Seq != 2
	}})
	wantSeqs(t, "messages still matching when read", deadSeqs(fickle.Messages), []int64{1, 3, 4, 5})
}

// Max bounds the matches, Scan the rows examined; Next goes on from
// where the browse stopped, and 0 says it reached the end.
func testBrowseBounds(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	var ms []store.NewMessage
	for i := range 12 {
		ms = append(ms, store.NewMessage{Payload: fmt.Appendf(nil, "%d", i+1), Properties: map[string]string{"even": fmt.Sprint((i+1)%2 == 0)}})
	}
	enqueue(t, ctx, st, q, ms...)
	even := func(d *sluicetype.DeadLetter) bool { return d.Properties["even"] == "true" }

	// Two matches: it stops at the second, and goes on after it.
	res := browse(t, st, store.BrowseParams{Queue: q, Max: 2, Scan: 100, Match: even})
	wantSeqs(t, "the first two even", deadSeqs(res.Messages), []int64{2, 4})
	if res.Next != 5 {
		t.Errorf("Next after the second match = %d, want 5", res.Next)
	}
	// Five rows examined: two matches, and Next after the fifth row.
	res = browse(t, st, store.BrowseParams{Queue: q, Max: 10, Scan: 5, FromSeq: res.Next, Match: even})
	wantSeqs(t, "even of 5 to 9", deadSeqs(res.Messages), []int64{6, 8})
	if res.Next != 10 {
		t.Errorf("Next after examining 5 to 9 = %d, want 10", res.Next)
	}
	res = browse(t, st, store.BrowseParams{Queue: q, Max: 10, Scan: 100, FromSeq: res.Next, Match: even})
	wantSeqs(t, "even of 10 on", deadSeqs(res.Messages), []int64{10, 12})
	if res.Next != 0 {
		t.Errorf("Next at the end = %d, want 0", res.Next)
	}
	// The last match on the last row: the end is known.
	res = browse(t, st, store.BrowseParams{Queue: q, Max: 1, Scan: 100, FromSeq: 11, Match: even})
	if len(res.Messages) != 1 || res.Next != 0 {
		t.Errorf("Browse of the last row = %v, Next %d; want [12], 0", deadSeqs(res.Messages), res.Next)
	}
	// Past the end, and on an empty queue: nothing, and the end.
	res = browse(t, st, store.BrowseParams{Queue: q, Max: 10, Scan: 100, FromSeq: 1000})
	if len(res.Messages) != 0 || res.Next != 0 {
		t.Errorf("Browse past the end = %v, Next %d", deadSeqs(res.Messages), res.Next)
	}
	// Exactly the last row examined by a full scan: the end is not
	// proven, so Next says where to look.
	res = browse(t, st, store.BrowseParams{Queue: q, Max: 10, Scan: 12})
	if len(res.Messages) != 10 || res.Next != 11 {
		t.Errorf("Browse of 10 of 12 = %v, Next %d; want 1 to 10, Next 11", deadSeqs(res.Messages), res.Next)
	}
	// More rows than one statement examines.
	big := createQueue(t, ctx, st, store.QueueSettings{})
	for range 3 {
		batch := make([]store.NewMessage, 1000)
		for i := range batch {
			batch[i] = msg("x")
		}
		enqueue(t, ctx, st, big, batch...)
	}
	enqueue(t, ctx, st, big, store.NewMessage{Payload: []byte("needle"), MessageID: "needle"})
	res = browse(t, st, store.BrowseParams{Queue: big, Max: 1, Scan: store.MaxBrowseScan,
		Match: func(d *sluicetype.DeadLetter) bool { return d.MessageID == "needle" }})
	if len(res.Messages) != 1 || res.Messages[0].Seq != 3001 || string(res.Messages[0].Payload) != "needle" {
		t.Errorf("the needle after 3,000 messages: %v", deadSeqs(res.Messages))
	}
	res = browse(t, st, store.BrowseParams{Queue: big, Max: 1, Scan: 2500,
		Match: func(d *sluicetype.DeadLetter) bool { return d.MessageID == "needle" }})
	if len(res.Messages) != 0 || res.Next != 2501 {
		t.Errorf("a browse of 2,500 rows found %v, Next %d; want none, 2501", deadSeqs(res.Messages), res.Next)
	}
}

// Dead letters browse with their reasons.
func testBrowseDeadLetters(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("a", "b", "c", "live")...)
	ls := lease(t, ctx, st, q, 3, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "Bad"}, ls[0], ls[2])
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter}, ls[1])
	for reason, want := range map[string][]int64{"Bad": {1, 3}, "": {2}, "Other": nil} {
		res := browse(t, st, store.BrowseParams{Queue: q, DeadLetters: true, Max: 10, Scan: 10,
			Match: func(d *sluicetype.DeadLetter) bool { return d.Reason == reason }})
		wantSeqs(t, fmt.Sprintf("dead letters of reason %q", reason), deadSeqs(res.Messages), want)
		for _, d := range res.Messages {
			if d.Reason != reason || d.DeadAt.IsZero() || len(d.Payload) != 1 {
				t.Errorf("dead letter %d browsed as %+v", d.Seq, d)
			}
		}
	}
}

func testBrowseInvalid(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	for _, p := range []store.BrowseParams{
		{Queue: q, Max: 0, Scan: 1}, {Queue: q, Max: store.DefaultMaxBatch + 1, Scan: 1},
		{Queue: q, Max: 1, Scan: 0}, {Queue: q, Max: 1, Scan: store.MaxBrowseScan + 1},
		{Queue: q, Max: 1, Scan: 1, FromSeq: -1},
	} {
		_, err := st.Browse(ctx, &p)
		wantErr(t, fmt.Sprintf("Browse(%+v)", p), err, sluicetype.ErrInvalidArgument)
	}
	_, err := st.Browse(ctx, &store.BrowseParams{Queue: "", Max: 1, Scan: 1})
	wantErr(t, "Browse of no queue", err, sluicetype.ErrInvalidName)
	_, err = st.Browse(ctx, &store.BrowseParams{Queue: "missing", Max: 1, Scan: 1})
	wantErr(t, "Browse of a missing queue", err, sluicetype.ErrEntityNotFound)
}

// Named messages go whatever their state, unless a lock holds them.
func testDeleteNamed(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("locked", "deferred", "short lock", "active")...)
	enqueue(t, ctx, st, q, store.NewMessage{Payload: []byte("later"), VisibleAt: time.Now().Add(time.Hour)})
	ls := lease(t, ctx, st, q, 2, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, ls[1])
	short := lease(t, ctx, st, q, 1, 50*time.Millisecond)
	eventually(t, "the short lock ended", func() bool {
		ms := peekAll(t, ctx, st, q)
		return len(ms) == 5 && ms[2].State == sluicetype.StateReady
	})
	n, err := st.DeleteMessages(ctx, &store.DeleteParams{Queue: q, Seqs: []int64{5, 1, 2, 3, 4, 99}})
	if err != nil || n != 4 {
		t.Fatalf("DeleteMessages(5, 1, 2, 3, 4, 99) = %d, %v; want 4 (all but the locked one)", n, err)
	}
	wantSeqs(t, "messages after the delete", messageSeqs(peekAll(t, ctx, st, q)), []int64{1})
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[0])
	if res := settle(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete, Receipts: []sluicetype.Receipt{short[0].Receipt}}); res[0].Err == nil {
		t.Errorf("completing a deleted message succeeded")
	}
	wantCounts(t, ctx, st, q, store.QueueStats{})
}

// The oldest unlocked messages go, at most Max, and with Before only
// those enqueued before it.
func testDeleteOldest(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("1", "2", "3", "4")...)
	lease(t, ctx, st, q, 1, long) // 1 is locked
	n, err := st.DeleteMessages(ctx, &store.DeleteParams{Queue: q, Max: 2})
	if err != nil || n != 2 {
		t.Fatalf("DeleteMessages(oldest 2) = %d, %v", n, err)
	}
	wantSeqs(t, "messages after deleting the oldest 2", messageSeqs(peekAll(t, ctx, st, q)), []int64{1, 4})
	// Before the first message: nothing.
	if n, err := st.DeleteMessages(ctx, &store.DeleteParams{Queue: q, Max: 10, Before: time.Unix(1, 0)}); err != nil || n != 0 {
		t.Fatalf("DeleteMessages(before 1970) = %d, %v; want 0", n, err)
	}
	// Messages enqueued after a time stay: the database's clock names
	// their times, so the cut is taken from a message's own.
	ms := peekAll(t, ctx, st, q)
	cut := ms[1].EnqueuedAt.Add(time.Millisecond)
	eventually(t, "the database's clock passed the cut", func() bool {
		later := enqueue(t, ctx, st, q, msg("probe"))
		probe := peekAll(t, ctx, st, q)
		at := probe[len(probe)-1].EnqueuedAt
		if _, err := st.DeleteMessages(ctx, &store.DeleteParams{Queue: q, Seqs: later}); err != nil {
			t.Fatal(err)
		}
		return at.After(cut)
	})
	enqueue(t, ctx, st, q, msg("new"))
	if n, err := st.DeleteMessages(ctx, &store.DeleteParams{Queue: q, Max: 10, Before: cut}); err != nil || n != 1 {
		t.Fatalf("DeleteMessages(before %v) = %d, %v; want 1", cut, n, err)
	}
	left := peekAll(t, ctx, st, q)
	if len(left) != 2 || left[0].Seq != 1 || string(left[1].Payload) != "new" {
		t.Errorf("after deleting those before the cut: %v", messageSeqs(left))
	}
	if n, err := st.DeleteMessages(ctx, &store.DeleteParams{Queue: q, Max: 10}); err != nil || n != 1 {
		t.Fatalf("DeleteMessages(all) = %d, %v; want 1 (the locked one stays)", n, err)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 1})
}

func testDeleteInvalid(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("kept"))
	for _, p := range []store.DeleteParams{
		{Queue: q}, {Queue: q, Max: -1}, {Queue: q, Max: store.DefaultMaxBatch + 1},
		{Queue: q, Seqs: []int64{}}, {Queue: q, Seqs: []int64{0}}, {Queue: q, Seqs: []int64{1, 1}},
		{Queue: q, Seqs: []int64{1}, Max: 1}, {Queue: q, Seqs: []int64{1}, Before: time.Now()},
	} {
		_, err := st.DeleteMessages(ctx, &p)
		wantErr(t, fmt.Sprintf("DeleteMessages(%+v)", p), err, sluicetype.ErrInvalidArgument)
	}
	_, err := st.DeleteMessages(ctx, &store.DeleteParams{Queue: q, Seqs: make([]int64, store.DefaultMaxBatch+1)})
	wantErr(t, "DeleteMessages of too many", err, sluicetype.ErrBatchTooLarge)
	_, err = st.DeleteMessages(ctx, &store.DeleteParams{Queue: "", Max: 1})
	wantErr(t, "DeleteMessages of no queue", err, sluicetype.ErrInvalidName)
	_, err = st.DeleteMessages(ctx, &store.DeleteParams{Queue: "missing", Max: 1})
	wantErr(t, "DeleteMessages of a missing queue", err, sluicetype.ErrEntityNotFound)
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1})
}

// Deletes racing leases: every message is either leased (and its lock
// holds: it completes) or deleted, never both, never neither.
func testDeleteRacesLease(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	const total = 400
	batch := make([]store.NewMessage, total)
	for i := range batch {
		batch[i] = msg("m")
	}
	enqueue(t, ctx, st, q, batch...)
	var (
		mu      sync.Mutex
		leased  []sluicetype.Leased
		deleted int64
		wg      sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if w%2 == 0 {
					ls, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: 7, Visibility: long})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					leased = append(leased, ls...)
					mu.Unlock()
				} else {
					n, err := st.DeleteMessages(ctx, &store.DeleteParams{Queue: q, Max: 5})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					deleted += n
					mu.Unlock()
				}
				stats, err := st.QueueStats(ctx, q)
				if err != nil {
					t.Error(err)
					return
				}
				if stats.Active == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if int(deleted)+len(leased) != total {
		t.Fatalf("%d deleted and %d leased of %d", deleted, len(leased), total)
	}
	for i := 0; i < len(leased); i += store.DefaultMaxBatch {
		settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, leased[i:min(i+store.DefaultMaxBatch, len(leased))]...)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{})
}
