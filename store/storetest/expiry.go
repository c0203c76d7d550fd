package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var expiryTests = []suiteTest{
	{"LeaseExpiry", testLeaseExpiry},
	{"MaxDeliveryByExpiry", testMaxDeliveryByExpiry},
	{"MaxDeliveryByAbandon", testMaxDeliveryByAbandon},
	{"TTLDropped", testTTLDropped},
	{"TTLDeadLettered", testTTLDeadLettered},
	{"DefaultTTLCapExpiry", testDefaultTTLCapExpiry},
	{"EvictCounts", testEvictCounts},
	{"DeadLetterReasonsLong", testDeadLetterReasonsLong},
	{"EvictBatchBound", testEvictBatchBound},
	{"LeaseRunsEviction", testLeaseRunsEviction},
	{"DeadLetterRetention", testDeadLetterRetention},
}

var deadLetterTests = []suiteTest{
	{"PeekRange", testPeekDeadLettersRange},
	{"Resubmit", testResubmit},
	{"ResubmitUnknown", testResubmitUnknown},
	{"Purge", testPurge},
	{"DeleteDeadLetters", testDeleteDeadLetters},
}

func testLeaseExpiry(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	vis := 200 * time.Millisecond
	start := time.Now()
	first := lease(t, ctx, st, q, 1, vis)
	near(t, "LockedUntil", first[0].LockedUntil, start.Add(vis), clockSkew)
	var again []sluicetype.Leased
	eventually(t, "expired lease redelivered", func() bool {
		again = lease(t, ctx, st, q, 1, long)
		if len(again) > 0 && time.Since(start) < vis-100*time.Millisecond {
			t.Fatalf("message leased again %v after a lease of %v", time.Since(start), vis)
		}
		return len(again) > 0
	})
	if again[0].Seq != 1 || again[0].DeliveryCount != 2 || string(again[0].Payload) != "m" {
		t.Fatalf("redelivered seq %d DeliveryCount %d payload %q, want seq 1, 2, \"m\"", again[0].Seq, again[0].DeliveryCount, again[0].Payload)
	}
}

func testMaxDeliveryByExpiry(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: 2})
	enqueue(t, ctx, st, q, msg("poison"), msg("fine"))
	first := lease(t, ctx, st, q, 1, 200*time.Millisecond)
	if first[0].Seq != 1 {
		t.Fatalf("leased seq %d, want 1", first[0].Seq)
	}
	// Hold seq 2 so that the leases below only ever see seq 1.
	hold := lease(t, ctx, st, q, 1, long)
	wantSeqs(t, "lease of the other message", leasedSeqs(hold), []int64{2})
	eventually(t, "second delivery", func() bool {
		ls := lease(t, ctx, st, q, 1, 200*time.Millisecond)
		if len(ls) == 0 {
			return false
		}
		if ls[0].Seq != 1 || ls[0].DeliveryCount != 2 {
			t.Fatalf("second delivery: seq %d DeliveryCount %d, want seq 1 DeliveryCount 2", ls[0].Seq, ls[0].DeliveryCount)
		}
		return true
	})
	eventually(t, "message dead-lettered after its last delivery expired", func() bool {
		if ls := lease(t, ctx, st, q, 1, long); len(ls) != 0 {
			t.Fatalf("message leased a third time with MaxDeliveryCount 2: seq %d DeliveryCount %d", ls[0].Seq, ls[0].DeliveryCount)
		}
		if _, err := evict(ctx, st, q); err != nil {
			t.Fatalf("Evict: %v", err)
		}
		return len(deadAll(t, ctx, st, q)) > 0
	})
	d := deadAll(t, ctx, st, q)
	if len(d) != 1 || d[0].Seq != 1 || d[0].Reason != sluicetype.ReasonMaxDeliveryCountExceeded || d[0].DeliveryCount != 2 || string(d[0].Payload) != "poison" {
		t.Fatalf("dead letters: %+v, want seq 1 with reason %s and DeliveryCount 2", d, sluicetype.ReasonMaxDeliveryCountExceeded)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 1, DeadLettered: 1})
}

func testMaxDeliveryByAbandon(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	for _, max := range []int{1, 2, 3} {
		q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: max})
		enqueue(t, ctx, st, q, msg("m"))
		for n := 1; n <= max; n++ {
			ls := lease(t, ctx, st, q, 1, long)
			if len(ls) != 1 || ls[0].DeliveryCount != n {
				t.Fatalf("MaxDeliveryCount %d, delivery %d: leased %+v", max, n, ls)
			}
			// The last abandon dead-letters at once, delay or not.
			var delay time.Duration
			if n == max && max%2 == 1 {
				delay = time.Hour
			}
			settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon, Delay: delay}, ls...)
		}
		d := deadAll(t, ctx, st, q)
		if len(d) != 1 || d[0].Reason != sluicetype.ReasonMaxDeliveryCountExceeded || d[0].DeliveryCount != max {
			t.Fatalf("MaxDeliveryCount %d: dead letters after abandoning the last delivery: %+v", max, d)
		}
		if m := peekAll(t, ctx, st, q); len(m) != 0 {
			t.Fatalf("MaxDeliveryCount %d: message still in the queue after its last abandon: %+v", max, m)
		}
		wantCounts(t, ctx, st, q, store.QueueStats{DeadLettered: 1})
	}
}

// expireSetup enqueues two messages with a short TTL and one without, and
// waits until the short TTL has run out.
func expireSetup(t *testing.T, st store.Store, q string) {
	t.Helper()
	ctx := t.Context()
	ttl := 300 * time.Millisecond
	start := time.Now()
	enqueue(t, ctx, st, q,
		store.NewMessage{Payload: []byte("short-1"), TTL: ttl, Properties: map[string]string{"k": "v"}},
		store.NewMessage{Payload: []byte("keep"), TTL: time.Hour},
		store.NewMessage{Payload: []byte("short-2"), TTL: ttl})
	sleepUntil(t, start.Add(ttl+300*time.Millisecond))
}

func testTTLDropped(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	expireSetup(t, st, q)
	// Expired but not yet removed: counted and peeked as expired.
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, Expired: 2})
	for _, m := range peekAll(t, ctx, st, q) {
		if want := map[int64]sluicetype.MessageState{1: sluicetype.StateExpired, 2: sluicetype.StateReady,
			3: sluicetype.StateExpired}[m.Seq]; m.State != want {
			t.Fatalf("peek: seq %d is %v, want %v", m.Seq, m.State, want)
		}
	}
	ls := lease(t, ctx, st, q, 10, long)
	wantSeqs(t, "lease after TTL ran out", leasedSeqs(ls), []int64{2})
	if _, err := evict(ctx, st, q); err != nil {
		t.Fatalf("Evict: %v", err)
	}
	wantSeqs(t, "messages after Evict", messageSeqs(peekAll(t, ctx, st, q)), []int64{2})
	if d := deadAll(t, ctx, st, q); len(d) != 0 {
		t.Fatalf("expired messages dead-lettered on a queue without DeadLetterOnExpiry: %v", deadSeqs(d))
	}
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 1})
}

func testTTLDeadLettered(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DeadLetterOnExpiry: true})
	expireSetup(t, st, q)
	ls := lease(t, ctx, st, q, 10, long)
	wantSeqs(t, "lease after TTL ran out", leasedSeqs(ls), []int64{2})
	if _, err := evict(ctx, st, q); err != nil {
		t.Fatalf("Evict: %v", err)
	}
	d := deadAll(t, ctx, st, q)
	wantSeqs(t, "dead letters after Evict", deadSeqs(d), []int64{1, 3})
	for _, dl := range d {
		if dl.Reason != sluicetype.ReasonTTLExpired {
			t.Fatalf("expired seq %d dead-lettered with reason %q, want %q", dl.Seq, dl.Reason, sluicetype.ReasonTTLExpired)
		}
		if dl.DeliveryCount != 0 {
			t.Fatalf("expired seq %d: DeliveryCount %d, want 0", dl.Seq, dl.DeliveryCount)
		}
	}
	if string(d[0].Payload) != "short-1" || d[0].Properties["k"] != "v" {
		t.Fatalf("expired dead letter lost its content: %+v", d[0])
	}
	wantSeqs(t, "messages after Evict", messageSeqs(peekAll(t, ctx, st, q)), []int64{2})
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 1, DeadLettered: 2})
}

func testDefaultTTLCapExpiry(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DefaultTTL: 300 * time.Millisecond, DeadLetterOnExpiry: true})
	start := time.Now()
	enqueue(t, ctx, st, q, store.NewMessage{Payload: []byte("m"), TTL: time.Hour}, msg("n"))
	sleepUntil(t, start.Add(600*time.Millisecond))
	if ls := lease(t, ctx, st, q, 10, long); len(ls) != 0 {
		t.Fatalf("messages past the queue's DefaultTTL leased: %v", leasedSeqs(ls))
	}
	if _, err := evict(ctx, st, q); err != nil {
		t.Fatalf("Evict: %v", err)
	}
	wantSeqs(t, "dead letters", deadSeqs(deadAll(t, ctx, st, q)), []int64{1, 2})
}

func testEvictCounts(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	// An eviction interval of an hour keeps leases from evicting on their
	// own once they have done it the first time.
	q := createQueue(t, ctx, st, store.QueueSettings{
		MaxDeliveryCount: 1, DeadLetterOnExpiry: true, DeadLetterRetention: 300 * time.Millisecond,
		EvictionInterval: time.Hour,
	})
	start := time.Now()
	enqueue(t, ctx, st, q, msgs("dead", "exhausted-1", "exhausted-2")...)
	for i := range 3 {
		enqueue(t, ctx, st, q, store.NewMessage{Payload: fmt.Appendf(nil, "expired-%d", i), TTL: 300 * time.Millisecond})
	}
	enqueue(t, ctx, st, q, msg("kept"))
	dead := lease(t, ctx, st, q, 1, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "app"}, dead...)
	d := deadAll(t, ctx, st, q)
	near(t, "RemoveAt", d[0].RemoveAt, d[0].DeadAt.Add(300*time.Millisecond), durationSlack)
	exhausted := lease(t, ctx, st, q, 2, 300*time.Millisecond)
	wantSeqs(t, "leased", leasedSeqs(exhausted), []int64{2, 3})
	sleepUntil(t, start.Add(800*time.Millisecond))

	res, err := evict(ctx, st, q)
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	if want := (store.EvictResult{Expired: 3, Exhausted: 2, Removed: 1}); res != want {
		t.Fatalf("Evict = %+v, want %+v", res, want)
	}
	if res, err := evict(ctx, st, q); err != nil || res != (store.EvictResult{}) {
		t.Fatalf("second Evict = %+v, %v; want nothing left to do", res, err)
	}
	reasons := map[int64]string{}
	for _, dl := range deadAll(t, ctx, st, q) {
		reasons[dl.Seq] = dl.Reason
	}
	want := map[int64]string{
		2: sluicetype.ReasonMaxDeliveryCountExceeded, 3: sluicetype.ReasonMaxDeliveryCountExceeded,
		4: sluicetype.ReasonTTLExpired, 5: sluicetype.ReasonTTLExpired, 6: sluicetype.ReasonTTLExpired,
	}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("dead letters after Evict (seq: reason) %v, want %v", reasons, want)
	}
	wantSeqs(t, "messages after Evict", messageSeqs(peekAll(t, ctx, st, q)), []int64{7})
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, DeadLettered: 5})
	byReason, err := st.DeadLetterReasons(ctx, q)
	if wantBy := map[string]int64{sluicetype.ReasonMaxDeliveryCountExceeded: 2, sluicetype.ReasonTTLExpired: 3}; err != nil ||
		fmt.Sprint(byReason) != fmt.Sprint(wantBy) {
		t.Fatalf("DeadLetterReasons = %v, %v; want %v", byReason, err, wantBy)
	}
	if _, err := st.DeadLetterReasons(ctx, "missing-queue"); !errors.Is(err, sluicetype.ErrEntityNotFound) {
		t.Fatalf("DeadLetterReasons of a missing queue: %v, want ErrEntityNotFound", err)
	}
}

func testEvictBatchBound(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{EvictionBatch: 2, EvictionInterval: time.Hour})
	start := time.Now()
	var in []store.NewMessage
	for range 5 {
		in = append(in, store.NewMessage{Payload: []byte("x"), TTL: 200 * time.Millisecond})
	}
	enqueue(t, ctx, st, q, in...)
	sleepUntil(t, start.Add(500*time.Millisecond))
	var total int64
	for i := 0; ; i++ {
		res, err := evict(ctx, st, q)
		if err != nil {
			t.Fatalf("Evict: %v", err)
		}
		if res.Expired > 2 || res.Exhausted != 0 || res.Removed != 0 {
			t.Fatalf("Evict with EvictionBatch 2 = %+v, want at most 2 expired", res)
		}
		if res.Expired == 0 {
			break
		}
		total += res.Expired
		if i > 10 {
			t.Fatal("Evict kept reporting work")
		}
	}
	if total != 5 {
		t.Fatalf("Evict batches expired %d messages in all, want 5", total)
	}
	wantEmpty(t, ctx, st, q)
}

func testLeaseRunsEviction(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{EvictionInterval: 100 * time.Millisecond, DeadLetterOnExpiry: true})
	start := time.Now()
	enqueue(t, ctx, st, q, store.NewMessage{Payload: []byte("m"), TTL: 200 * time.Millisecond})
	sleepUntil(t, start.Add(400*time.Millisecond))
	// Only leases run, never Evict: they must evict on their own.
	eventually(t, "a lease evicted the expired message", func() bool {
		if ls := lease(t, ctx, st, q, 1, long); len(ls) != 0 {
			t.Fatalf("expired message leased: %+v", ls[0])
		}
		d := deadAll(t, ctx, st, q)
		return len(d) == 1 && d[0].Reason == sluicetype.ReasonTTLExpired
	})
}

func testDeadLetterRetention(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	retention := 300 * time.Millisecond
	q := createQueue(t, ctx, st, store.QueueSettings{DeadLetterRetention: retention, EvictionInterval: 100 * time.Millisecond})
	enqueue(t, ctx, st, q, msgs("a", "b", "c")...)
	ls := lease(t, ctx, st, q, 2, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "r"}, ls...)
	d := deadAll(t, ctx, st, q)
	if len(d) != 2 {
		t.Fatalf("dead letters: %v", deadSeqs(d))
	}
	for _, dl := range d {
		near(t, "RemoveAt", dl.RemoveAt, dl.DeadAt.Add(retention), durationSlack)
	}
	// Only leases run, never Evict: they must apply retention on their own.
	eventually(t, "a lease removed dead letters past retention", func() bool {
		lease(t, ctx, st, q, 1, long)
		return len(deadAll(t, ctx, st, q)) == 0
	})
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 1})
}

// deadLetterAll enqueues the messages, leases them and dead-letters them
// with reason "r".
func deadLetterAll(t *testing.T, st store.Store, q string, ms ...store.NewMessage) []int64 {
	t.Helper()
	ctx := t.Context()
	seqs := enqueue(t, ctx, st, q, ms...)
	var ls []sluicetype.Leased
	for len(ls) < len(ms) {
		got := lease(t, ctx, st, q, store.DefaultMaxBatch, long)
		if len(got) == 0 {
			t.Fatalf("leased %d of %d messages", len(ls), len(ms))
		}
		ls = append(ls, got...)
	}
	for i := 0; i < len(ls); i += store.DefaultMaxBatch {
		settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "r"}, ls[i:min(i+store.DefaultMaxBatch, len(ls))]...)
	}
	return seqs
}

func testPeekDeadLettersRange(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	deadLetterAll(t, st, q, msgs("1", "2", "3", "4", "5")...)
	for _, c := range []struct {
		from int64
		max  int
		want []int64
	}{
		{0, 1, []int64{1}},
		{3, 2, []int64{3, 4}},
		{4, 10, []int64{4, 5}},
		{6, 10, nil},
	} {
		got, err := st.PeekDeadLetters(ctx, &store.PeekParams{Queue: q, FromSeq: c.from, Max: c.max})
		if err != nil {
			t.Fatalf("PeekDeadLetters: %v", err)
		}
		wantSeqs(t, fmt.Sprintf("PeekDeadLetters from %d max %d", c.from, c.max), deadSeqs(got), c.want)
		for _, d := range got {
			if string(d.Payload) != fmt.Sprint(d.Seq) {
				t.Fatalf("dead letter %d holds %q", d.Seq, d.Payload)
			}
		}
	}
}

func testResubmit(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	var in []store.NewMessage
	for i := range 5 {
		in = append(in, store.NewMessage{
			MessageID: fmt.Sprintf("id-%d", i+1), SessionID: "s", PartitionKey: "pk", ContentType: "text/plain",
			Properties: map[string]string{"n": fmt.Sprint(i + 1)}, Payload: fmt.Appendf(nil, "payload-%d\x00", i+1),
		})
	}
	deadLetterAll(t, st, q, in...)
	seqs, err := st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: q, Seqs: []int64{4, 2}})
	if err != nil {
		t.Fatalf("ResubmitDeadLetters: %v", err)
	}
	wantSeqs(t, "resubmitted as", seqs, []int64{6, 7})
	wantSeqs(t, "dead letters left", deadSeqs(deadAll(t, ctx, st, q)), []int64{1, 3, 5})
	m := peekAll(t, ctx, st, q)
	wantSeqs(t, "messages", messageSeqs(m), []int64{6, 7})
	sameContent(t, "resubmitted dead letter 4", m[0], in[3])
	sameContent(t, "resubmitted dead letter 2", m[1], in[1])
	for _, x := range m {
		if x.DeliveryCount != 0 || x.State != sluicetype.StateReady {
			t.Fatalf("resubmitted seq %d: DeliveryCount %d, state %v; want 0, ready", x.Seq, x.DeliveryCount, x.State)
		}
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 2, DeadLettered: 3})
	ls := lease(t, ctx, st, q, 10, long)
	wantSeqs(t, "leased after resubmit", leasedSeqs(ls), []int64{6, 7})
	for _, l := range ls {
		if l.DeliveryCount != 1 {
			t.Fatalf("resubmitted seq %d leased with DeliveryCount %d, want 1", l.Seq, l.DeliveryCount)
		}
	}
	// A resubmitted dead letter is gone: resubmitting it again fails.
	_, err = st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: q, Seqs: []int64{2}})
	wantErr(t, "resubmitting a dead letter twice", err, sluicetype.ErrMessageNotFound)
}

func testResubmitUnknown(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	deadLetterAll(t, st, q, msgs("1", "2", "3")...)
	enqueue(t, ctx, st, q, msg("live")) // seq 4, a message, not a dead letter
	for _, c := range []struct {
		seqs []int64
		want error
	}{
		{[]int64{1, 999}, sluicetype.ErrMessageNotFound}, {[]int64{999}, sluicetype.ErrMessageNotFound},
		{[]int64{2, 4}, sluicetype.ErrMessageNotFound}, {[]int64{4}, sluicetype.ErrMessageNotFound},
		{[]int64{3, 0}, sluicetype.ErrInvalidArgument}, // numbers start at 1
	} {
		_, err := st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: q, Seqs: c.seqs})
		wantErr(t, fmt.Sprintf("ResubmitDeadLetters(%v)", c.seqs), err, c.want)
		wantSeqs(t, "dead letters after a refused resubmit", deadSeqs(deadAll(t, ctx, st, q)), []int64{1, 2, 3})
		wantSeqs(t, "messages after a refused resubmit", messageSeqs(peekAll(t, ctx, st, q)), []int64{4})
	}
	// Nothing consumed a sequence number.
	wantSeqs(t, "next enqueue", enqueue(t, ctx, st, q, msg("next")), []int64{5})
}

func testPurge(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	var in []store.NewMessage
	for i := range 600 {
		in = append(in, store.NewMessage{Payload: fmt.Appendf(nil, "%d", i)})
	}
	deadLetterAll(t, st, q, in...)
	enqueue(t, ctx, st, q, msg("live"))
	n, err := st.PurgeDeadLetters(ctx, q)
	if err != nil || n != 600 {
		t.Fatalf("PurgeDeadLetters = %d, %v; want 600", n, err)
	}
	if d := deadAll(t, ctx, st, q); len(d) != 0 {
		t.Fatalf("%d dead letters left after purge", len(d))
	}
	m := peekAll(t, ctx, st, q)
	if len(m) != 1 || !bytes.Equal(m[0].Payload, []byte("live")) {
		t.Fatalf("purge touched the messages: %+v", m)
	}
	if n, err := st.PurgeDeadLetters(ctx, q); err != nil || n != 0 {
		t.Fatalf("second PurgeDeadLetters = %d, %v; want 0", n, err)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1})
}

// DeleteDeadLetters deletes the dead letters named, those alone, and
// refuses bad lists whole.
func testDeleteDeadLetters(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	deadLetterAll(t, st, q, msgs("1", "2", "3", "4")...)
	enqueue(t, ctx, st, q, msg("live"))
	for _, bad := range [][]int64{nil, {2, 0}, {-1}, make([]int64, store.DefaultMaxBatch+1)} {
		_, err := st.DeleteDeadLetters(ctx, q, bad)
		wantErr(t, fmt.Sprintf("DeleteDeadLetters of %d numbers", len(bad)), err, sluicetype.ErrInvalidArgument)
	}
	_, err := st.DeleteDeadLetters(ctx, "missing", []int64{1})
	wantErr(t, "DeleteDeadLetters of a missing queue", err, sluicetype.ErrEntityNotFound)
	wantSeqs(t, "dead letters after refused deletes", deadSeqs(deadAll(t, ctx, st, q)), []int64{1, 2, 3, 4})
	// 5 is the live message, 9 nothing: neither is deleted.
	if n, err := st.DeleteDeadLetters(ctx, q, []int64{3, 1, 3, 5, 9}); err != nil || n != 2 {
		t.Fatalf("DeleteDeadLetters(3, 1, 3, 5, 9) = %d, %v; want 2", n, err)
	}
	wantSeqs(t, "dead letters after the delete", deadSeqs(deadAll(t, ctx, st, q)), []int64{2, 4})
	wantSeqs(t, "messages after the delete", messageSeqs(peekAll(t, ctx, st, q)), []int64{5})
}

// Reasons as long as allowed, alike but for their last byte, are counted
// apart (MySQL and MariaDB compare only a prefix of TEXT values in some
// sorts: max_sort_length, 1,024 bytes by default).
func testDeadLetterReasonsLong(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: 10})
	enqueue(t, ctx, st, q, msgs("a", "b", "c")...)
	prefix := strings.Repeat("r", store.MaxReasonLen-1)
	ls := lease(t, ctx, st, q, 3, long)
	for i, end := range []string{"x", "y", "y"} {
		settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: prefix + end}, ls[i])
	}
	got, err := st.DeadLetterReasons(ctx, q)
	if err != nil || len(got) != 2 || got[prefix+"x"] != 1 || got[prefix+"y"] != 2 {
		counts := map[string]int64{}
		for r, n := range got {
			counts["..."+r[max(0, len(r)-3):]] = n
		}
		t.Fatalf("DeadLetterReasons = %v (by each reason's end), %v; want ...rrx 1 and ...rry 2", counts, err)
	}
}
