package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var settleTests = []suiteTest{
	{"Complete", testComplete},
	{"Abandon", testAbandon},
	{"AbandonDelay", testAbandonDelay},
	{"AbandonDelayLastDelivery", testAbandonDelayLastDelivery},
	{"ReleaseNotDelivery", testReleaseNotDelivery},
	{"DeadLetter", testDeadLetter},
	{"Extend", testExtend},
	{"StaleAfterExpiry", testStaleAfterExpiry},
	{"StaleAfterRelease", testStaleAfterRelease},
	{"StaleAfterSettle", testStaleAfterSettle},
	{"StaleWrongToken", testStaleWrongToken},
	{"Mixed", testSettleMixed},
	{"CompleteMixed", testCompleteMixed},
	{"CompleteRace", testCompleteRace},
}

func testComplete(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("1", "2", "3")...)
	ls := lease(t, ctx, st, q, 2, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls...)
	wantSeqs(t, "Peek after completing 1 and 2", messageSeqs(peekAll(t, ctx, st, q)), []int64{3})
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1})
	if d := deadAll(t, ctx, st, q); len(d) != 0 {
		t.Fatalf("Complete made dead letters: %v", deadSeqs(d))
	}
}

func testAbandon(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("1", "2")...)
	ls := lease(t, ctx, st, q, 2, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, ls[1])
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, InFlight: 1})
	again := lease(t, ctx, st, q, 10, long)
	wantSeqs(t, "Lease after abandoning seq 2", leasedSeqs(again), []int64{2})
	if again[0].DeliveryCount != 2 || string(again[0].Payload) != "2" {
		t.Fatalf("abandoned message leased again with DeliveryCount %d payload %q, want 2 and \"2\"", again[0].DeliveryCount, again[0].Payload)
	}
}

func testAbandonDelay(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	ls := lease(t, ctx, st, q, 1, long)
	delay := 800 * time.Millisecond
	start := time.Now()
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon, Delay: delay}, ls...)
	m := peekAll(t, ctx, st, q)
	if len(m) != 1 || m[0].State != sluicetype.StateScheduled {
		t.Fatalf("peek after abandon with delay: %+v, want one scheduled message", m)
	}
	near(t, "VisibleAt after abandon with delay", m[0].VisibleAt, start.Add(delay), clockSkew)
	wantCounts(t, ctx, st, q, store.QueueStats{Scheduled: 1})
	eventually(t, "delayed message leased again", func() bool {
		got := lease(t, ctx, st, q, 1, long)
		if len(got) == 0 {
			return false
		}
		if e := time.Since(start); e < delay-100*time.Millisecond {
			t.Fatalf("message abandoned with delay %v leased again after %v", delay, e)
		}
		if got[0].DeliveryCount != 2 {
			t.Fatalf("DeliveryCount %d after abandon, want 2", got[0].DeliveryCount)
		}
		return true
	})
}

// testAbandonDelayLastDelivery checks that a delay does not postpone the
// dead-lettering of a message abandoned on its last allowed delivery.
func testAbandonDelayLastDelivery(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: 2})
	enqueue(t, ctx, st, q, msg("m"))
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, lease(t, ctx, st, q, 1, long)...)
	ls := lease(t, ctx, st, q, 1, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon, Delay: time.Hour}, ls...)
	d := deadAll(t, ctx, st, q)
	if len(d) != 1 || d[0].Reason != sluicetype.ReasonMaxDeliveryCountExceeded {
		t.Fatalf("after a delayed abandon on the last delivery, dead letters %+v, want one for MaxDeliveryCountExceeded", d)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{DeadLettered: 1})
}

func testDeadLetter(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	in := store.NewMessage{MessageID: "mid", ContentType: "text/plain", Properties: map[string]string{"k": "v"}, Payload: []byte("poison")}
	enqueue(t, ctx, st, q, in, msg("fine"))
	ls := lease(t, ctx, st, q, 1, long)
	start := time.Now()
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "Bad", Description: "it could not be parsed: ü"}, ls...)
	d := deadAll(t, ctx, st, q)
	wantSeqs(t, "dead letters", deadSeqs(d), []int64{1})
	sameContent(t, "dead letter", d[0].Message, in)
	if d[0].Reason != "Bad" || d[0].Description != "it could not be parsed: ü" {
		t.Fatalf("dead letter reason %q description %q", d[0].Reason, d[0].Description)
	}
	if d[0].DeliveryCount != 1 {
		t.Fatalf("dead letter DeliveryCount %d, want 1", d[0].DeliveryCount)
	}
	near(t, "DeadAt", d[0].DeadAt, start, clockSkew)
	if !d[0].RemoveAt.IsZero() {
		t.Fatalf("RemoveAt %v on a queue without retention", d[0].RemoveAt)
	}
	wantSeqs(t, "messages left", messageSeqs(peekAll(t, ctx, st, q)), []int64{2})
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, DeadLettered: 1})
	// A dead letter is never leased.
	wantSeqs(t, "Lease after dead-lettering", leasedSeqs(lease(t, ctx, st, q, 10, long)), []int64{2})
}

func testExtend(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	vis := 300 * time.Millisecond
	ls := lease(t, ctx, st, q, 1, vis)
	start := time.Now()
	res := settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Extend, Extension: time.Minute}, ls...)
	near(t, "LockedUntil after Extend", res[0].LockedUntil, start.Add(time.Minute), clockSkew)
	m := peekAll(t, ctx, st, q)
	if len(m) != 1 || m[0].State != sluicetype.StateLeased {
		t.Fatalf("peek after extend: %+v", m)
	}
	near(t, "peeked VisibleAt after Extend", m[0].VisibleAt, res[0].LockedUntil, 10*time.Millisecond)
	// Past the first visibility timeout the message stays hidden.
	sleepUntil(t, start.Add(vis+300*time.Millisecond))
	if got := lease(t, ctx, st, q, 1, long); len(got) != 0 {
		t.Fatalf("extended message leased again after its first visibility ran out: %+v", got)
	}
	// And the receipt still holds it.
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls...)
	wantEmpty(t, ctx, st, q)
}

// staleActions are the settles a stale receipt is tried with; each must
// fail with ErrLockLost and change nothing.
var staleActions = []store.SettleParams{
	{Action: store.Complete},
	{Action: store.Abandon},
	{Action: store.Abandon, Delay: time.Hour},
	{Action: store.DeadLetter, Reason: "stale"},
	{Action: store.Extend, Extension: time.Hour},
}

// tryStale settles with r under every action, requiring ErrLockLost, and
// checks that the queue's messages and dead letters did not change.
func tryStale(t *testing.T, st store.Store, q string, r sluicetype.Receipt) {
	t.Helper()
	ctx := t.Context()
	before, beforeDead := peekAll(t, ctx, st, q), deadAll(t, ctx, st, q)
	for _, p := range staleActions {
		p.Queue = q
		settleLost(t, ctx, st, p, r)
	}
	after, afterDead := peekAll(t, ctx, st, q), deadAll(t, ctx, st, q)
	if len(after) != len(before) || len(afterDead) != len(beforeDead) {
		t.Fatalf("settles with stale receipt %+v changed the queue: %d messages and %d dead letters before, %d and %d after",
			r, len(before), len(beforeDead), len(after), len(afterDead))
	}
	for i := range after {
		b, a := before[i], after[i]
		if a.Seq != b.Seq || a.State != b.State || a.DeliveryCount != b.DeliveryCount || !a.VisibleAt.Equal(b.VisibleAt) {
			t.Fatalf("settles with stale receipt %+v changed seq %d: state %v→%v, DeliveryCount %d→%d, VisibleAt %v→%v",
				r, b.Seq, b.State, a.State, b.DeliveryCount, a.DeliveryCount, b.VisibleAt, a.VisibleAt)
		}
	}
}

func testStaleAfterExpiry(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	ls := lease(t, ctx, st, q, 1, 200*time.Millisecond)
	sleepUntil(t, time.Now().Add(400*time.Millisecond))
	// Expired but not leased again: the receipt is stale all the same.
	tryStale(t, st, q, ls[0].Receipt)
	again := lease(t, ctx, st, q, 1, long)
	if len(again) != 1 || again[0].DeliveryCount != 2 {
		t.Fatalf("lease after expiry: %+v, want the message with DeliveryCount 2", again)
	}
}

func testStaleAfterRelease(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	old := lease(t, ctx, st, q, 1, 200*time.Millisecond)
	var cur []sluicetype.Leased
	eventually(t, "expired lease redelivered", func() bool {
		cur = lease(t, ctx, st, q, 1, long)
		return len(cur) == 1
	})
	if cur[0].Receipt == old[0].Receipt {
		t.Fatalf("redelivery reused receipt %+v", old[0].Receipt)
	}
	tryStale(t, st, q, old[0].Receipt)
	// The new lease still holds the message.
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, cur...)
	wantEmpty(t, ctx, st, q)
}

func testStaleAfterSettle(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("completed", "abandoned", "dead", "kept")...)
	ls := lease(t, ctx, st, q, 4, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[0])
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, ls[1])
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "r"}, ls[2])
	for _, l := range ls[:3] {
		tryStale(t, st, q, l.Receipt)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, InFlight: 1, DeadLettered: 1})
	d := deadAll(t, ctx, st, q)
	if len(d) != 1 || d[0].Reason != "r" {
		t.Fatalf("dead letters after stale settles: %+v", d)
	}
}

func testStaleWrongToken(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	ls := lease(t, ctx, st, q, 1, long)
	r := ls[0].Receipt
	for _, bad := range []sluicetype.Receipt{
		{Seq: r.Seq, Token: r.Token + 1},
		{Seq: r.Seq, Token: r.Token - 1},
		{Seq: r.Seq, Token: 0},
		{Seq: r.Seq + 1, Token: r.Token},
		{Seq: 999999, Token: r.Token},
		{Seq: 0, Token: 0},
	} {
		if bad == r {
			continue
		}
		tryStale(t, st, q, bad)
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls...)
}

func testSettleMixed(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("1", "2", "3", "4")...)
	ls := lease(t, ctx, st, q, 4, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[3])
	receipts := []sluicetype.Receipt{
		ls[0].Receipt,
		{Seq: ls[1].Seq, Token: ls[1].Receipt.Token + 7}, // wrong token
		ls[2].Receipt,
		ls[3].Receipt,           // already completed
		{Seq: 424242, Token: 1}, // no such message
	}
	res := settle(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "mixed", Receipts: receipts})
	for i, wantLost := range []bool{false, true, false, true, true} {
		if lost := res[i].Err != nil; lost != wantLost {
			t.Fatalf("mixed settle: result %d (receipt %+v) error %v, want lock lost %v", i, receipts[i], res[i].Err, wantLost)
		}
		if wantLost {
			wantErr(t, "mixed settle result", res[i].Err, sluicetype.ErrLockLost)
		}
	}
	wantSeqs(t, "dead letters after mixed settle", deadSeqs(deadAll(t, ctx, st, q)), []int64{1, 3})
	m := peekAll(t, ctx, st, q)
	if len(m) != 1 || m[0].Seq != 2 || m[0].State != sluicetype.StateLeased {
		t.Fatalf("messages after mixed settle: %+v, want seq 2 still leased", m)
	}
	// The valid receipt of seq 2 was not disturbed by the wrong one.
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[1])
}

// testCompleteMixed completes valid, wrong-token, repeated, settled and
// unknown receipts in one call: each valid receipt succeeds once, the
// rest are lock lost, and only the named messages go.
func testCompleteMixed(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("1", "2", "3", "4", "5")...)
	ls := lease(t, ctx, st, q, 5, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[3])
	receipts := []sluicetype.Receipt{
		ls[2].Receipt,
		{Seq: ls[1].Seq, Token: ls[1].Receipt.Token + 7}, // wrong token
		ls[0].Receipt,
		ls[2].Receipt,           // repeated: the first one completed it
		ls[3].Receipt,           // already completed
		{Seq: 424242, Token: 1}, // no such message
		{Seq: ls[0].Seq, Token: ls[0].Receipt.Token - 1}, // wrong token of a completed one
	}
	res := settle(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete, Receipts: receipts})
	for i, wantLost := range []bool{false, true, false, true, true, true, true} {
		if lost := res[i].Err != nil; lost != wantLost {
			t.Fatalf("mixed complete: result %d (receipt %+v) error %v, want lock lost %v", i, receipts[i], res[i].Err, wantLost)
		}
		if wantLost {
			wantErr(t, "mixed complete result", res[i].Err, sluicetype.ErrLockLost)
		}
	}
	m := peekAll(t, ctx, st, q)
	if len(m) != 2 || m[0].Seq != ls[1].Seq || m[1].Seq != ls[4].Seq {
		t.Fatalf("messages after mixed complete: %+v, want seqs %d and %d", m, ls[1].Seq, ls[4].Seq)
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[1], ls[4])
	wantEmpty(t, ctx, st, q)
}

// testCompleteRace completes every receipt from several goroutines at
// once, so that copies of one receipt meet in one group commit or race
// across transactions: each receipt succeeds exactly once.
func testCompleteRace(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	const n, racers = 64, 4
	var bodies []store.NewMessage
	for i := range n {
		bodies = append(bodies, msg(fmt.Sprint(i)))
	}
	enqueue(t, ctx, st, q, bodies...)
	ls := lease(t, ctx, st, q, n, long)
	if len(ls) != n {
		t.Fatalf("leased %d of %d", len(ls), n)
	}
	wins := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	for range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, l := range ls {
				res, err := st.Settle(ctx, &store.SettleParams{Queue: q, Action: store.Complete, Receipts: []sluicetype.Receipt{l.Receipt}})
				if err != nil {
					t.Errorf("Settle: %v", err)
					return
				}
				switch {
				case res[0].Err == nil:
					wins[i].Add(1)
				case !errors.Is(res[0].Err, sluicetype.ErrLockLost):
					t.Errorf("Settle %+v: %v, want success or ErrLockLost", l.Receipt, res[0].Err)
				}
			}
		}()
	}
	wg.Wait()
	for i := range wins {
		if w := wins[i].Load(); w != 1 {
			t.Errorf("receipt %+v completed %d times, want exactly once", ls[i].Receipt, w)
		}
	}
	wantEmpty(t, ctx, st, q)
}

// Release hands messages back without counting a delivery (a consumer
// shutting down): with MaxDeliveryCount 1 a message survives releases,
// a deferred one is deferred again, and an abandon still counts.
func testReleaseNotDelivery(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: 1})
	enqueue(t, ctx, st, q, msgs("m", "d")...)
	both := lease(t, ctx, st, q, 2, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, both[1])
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Release}, both[0])
	for round := 1; round <= 3; round++ {
		ls := lease(t, ctx, st, q, 1, long)
		if len(ls) != 1 || ls[0].Seq != 1 || ls[0].DeliveryCount != 1 {
			t.Fatalf("round %d: leased %v, want message 1 on its first delivery", round, ls)
		}
		settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Release}, ls...)
		// Deferred after one delivery; each receive by number is the second.
		d := leaseDeferred(t, st, q, long, 2)
		if d[0].DeliveryCount != 2 {
			t.Fatalf("round %d: deferred message on delivery %d, want 2", round, d[0].DeliveryCount)
		}
		settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Release}, d...)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, Deferred: 1})
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, lease(t, ctx, st, q, 1, long)...)
	if d := deadAll(t, ctx, st, q); len(d) != 1 || d[0].Seq != 1 || d[0].Reason != sluicetype.ReasonMaxDeliveryCountExceeded {
		t.Fatalf("an abandon after releases: dead letters %+v, want message 1 (abandon counts)", d)
	}
}
