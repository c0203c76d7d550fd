package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var queueTests = []suiteTest{
	{"CreateDefaults", testCreateDefaults},
	{"CreateSettingsRoundTrip", testCreateSettingsRoundTrip},
	{"CreateExists", testCreateExists},
	{"CreateInvalidSettings", testCreateInvalidSettings},
	{"Delete", testDelete},
	{"MissingQueue", testMissingQueue},
	{"EnqueueSeqs", testEnqueueSeqs},
	{"EnqueueRoundTrip", testEnqueueRoundTrip},
	{"EnqueueRoundTripLarge", testEnqueueRoundTripLarge},
	{"EnqueueDefaultTTL", testEnqueueDefaultTTL},
	{"Scheduled", testScheduled},
	{"ScheduledActivation", testScheduledActivation},
	{"ScheduledActivationOrder", testScheduledActivationOrder},
	{"LeaseOrderAndMax", testLeaseOrderAndMax},
	{"LeaseDeliveryCount", testLeaseDeliveryCount},
	{"Peek", testPeek},
	{"Stats", testStats},
	{"PeekStateNow", testPeekStateNow},
	{"WatchQueue", testWatchQueue},
	{"WatchQueueCrossBackend", testWatchQueueCrossBackend},
	{"Closed", testClosed},
}

func testCreateDefaults(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	got, err := st.GetQueue(ctx, q)
	if err != nil {
		t.Fatalf("GetQueue: %v", err)
	}
	if want := (store.QueueSettings{Name: q}).WithDefaults(); !reflect.DeepEqual(got, want) {
		t.Fatalf("GetQueue of a queue created with zero settings = %+v, want the defaults %+v", got, want)
	}
}

func testCreateSettingsRoundTrip(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	want := store.QueueSettings{
		Name:                "orders/eu.west_1-" + randHex(2),
		MaxDeliveryCount:    3,
		DefaultTTL:          90 * time.Minute,
		DeadLetterOnExpiry:  true,
		DeadLetterRetention: 48 * time.Hour,
		EvictionInterval:    1500 * time.Millisecond,
		EvictionBatch:       77,
		Attributes:          []byte(`{"lockDuration":"30s"}`),
	}
	createQueue(t, ctx, st, want)
	got, err := st.GetQueue(ctx, want.Name)
	if err != nil {
		t.Fatalf("GetQueue: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetQueue = %+v, want %+v", got, want)
	}
}

func testCreateExists(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: 3})
	enqueue(t, ctx, st, q, msg("kept"))
	err := st.CreateQueue(ctx, &store.QueueSettings{Name: q, MaxDeliveryCount: 5})
	wantErr(t, "CreateQueue of a taken name", err, sluicetype.ErrQueueExists)
	got, err := st.GetQueue(ctx, q)
	if err != nil {
		t.Fatalf("GetQueue: %v", err)
	}
	if got.MaxDeliveryCount != 3 {
		t.Fatalf("a refused CreateQueue changed the settings: MaxDeliveryCount %d, want 3", got.MaxDeliveryCount)
	}
	if m := peekAll(t, ctx, st, q); len(m) != 1 {
		t.Fatalf("a refused CreateQueue changed the messages: %d, want 1", len(m))
	}
}

func testCreateInvalidSettings(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	for _, s := range []store.QueueSettings{
		{MaxDeliveryCount: -1},
		{DefaultTTL: -time.Second},
		{DeadLetterRetention: -time.Second},
		{EvictionInterval: -time.Second},
		{EvictionInterval: time.Microsecond},
		{EvictionBatch: -1},
		{EvictionBatch: 10001},
	} {
		s.Name = "bad-" + randHex(4)
		err := st.CreateQueue(ctx, &s)
		wantErr(t, "CreateQueue with invalid settings", err, sluicetype.ErrInvalidArgument)
		_, err = st.GetQueue(ctx, s.Name)
		wantErr(t, "GetQueue after a refused CreateQueue", err, sluicetype.ErrQueueNotFound)
	}
}

func testDelete(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	other := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("a", "b", "c")...)
	enqueue(t, ctx, st, other, msgs("x")...)
	l := lease(t, ctx, st, q, 2, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "r"}, l[0])

	if err := st.DeleteQueue(ctx, q); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	_, err := st.GetQueue(ctx, q)
	wantErr(t, "GetQueue after DeleteQueue", err, sluicetype.ErrQueueNotFound)
	wantErr(t, "DeleteQueue twice", st.DeleteQueue(ctx, q), sluicetype.ErrQueueNotFound)
	_, err = st.Peek(ctx, &store.PeekParams{Queue: q, Max: 10})
	wantErr(t, "Peek after DeleteQueue", err, sluicetype.ErrQueueNotFound)

	// The name is free again, and the new queue starts empty.
	createQueue(t, ctx, st, store.QueueSettings{Name: q})
	wantEmpty(t, ctx, st, q)
	if ls := lease(t, ctx, st, q, 10, long); len(ls) != 0 {
		t.Fatalf("a re-created queue leased %d old messages", len(ls))
	}
	// Settling the old lease touches nothing in the new queue.
	settleLost(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, l[1].Receipt)

	// The other queue is untouched.
	if m := peekAll(t, ctx, st, other); len(m) != 1 || string(m[0].Payload) != "x" {
		t.Fatalf("DeleteQueue of %s changed queue %s: %+v", q, other, m)
	}
}

func testMissingQueue(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	// A queue never created, and one created then deleted.
	gone := createQueue(t, ctx, st, store.QueueSettings{})
	if err := st.DeleteQueue(ctx, gone); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	for _, q := range []string{"never-" + randHex(4), gone} {
		check := func(op string, err error) {
			t.Helper()
			wantErr(t, op+" on missing queue "+q, err, sluicetype.ErrQueueNotFound)
		}
		_, err := st.GetQueue(ctx, q)
		check("GetQueue", err)
		check("DeleteQueue", st.DeleteQueue(ctx, q))
		_, err = st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: msgs("a")})
		check("Enqueue", err)
		_, err = st.Lease(ctx, &store.LeaseParams{Queue: q, Max: 1, Visibility: time.Second})
		check("Lease", err)
		_, err = st.Settle(ctx, &store.SettleParams{Queue: q, Action: store.Complete, Receipts: []sluicetype.Receipt{{Seq: 1, Token: 1}}})
		check("Settle", err)
		_, err = st.Peek(ctx, &store.PeekParams{Queue: q, Max: 1})
		check("Peek", err)
		_, err = st.PeekDeadLetters(ctx, &store.PeekParams{Queue: q, Max: 1})
		check("PeekDeadLetters", err)
		_, err = st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: q, Seqs: []int64{1}})
		check("ResubmitDeadLetters", err)
		_, err = st.PurgeDeadLetters(ctx, q)
		check("PurgeDeadLetters", err)
		_, err = evict(ctx, st, q)
		check("Evict", err)
		_, err = st.QueueStats(ctx, q)
		check("QueueStats", err)
		// None of it created the queue.
		_, err = st.GetQueue(ctx, q)
		check("GetQueue after the failed calls", err)
	}
}

func testEnqueueSeqs(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	wantSeqs(t, "first batch", enqueue(t, ctx, st, q, msgs("1", "2", "3")...), span(1, 3))
	wantSeqs(t, "second batch", enqueue(t, ctx, st, q, msgs("4")...), span(4, 4))
	wantSeqs(t, "third batch", enqueue(t, ctx, st, q, msgs("5", "6", "7", "8", "9")...), span(5, 9))
	all := peekAll(t, ctx, st, q)
	wantSeqs(t, "peeked", messageSeqs(all), span(1, 9))
	for i, m := range all {
		if want := string(rune('1' + i)); string(m.Payload) != want {
			t.Fatalf("seq %d holds %q, want %q: a batch was not stored in the order given", m.Seq, m.Payload, want)
		}
	}
	// Completing the head does not make the queue reuse its numbers.
	drain(t, ctx, st, q)
	wantSeqs(t, "after draining", enqueue(t, ctx, st, q, msgs("10")...), span(10, 10))
}

func testEnqueueRoundTrip(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	binary := make([]byte, 512)
	for i := range binary {
		binary[i] = byte(i)
	}
	scheduled := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	in := []store.NewMessage{
		{
			MessageID: "id-1", SessionID: "session-ü", PartitionKey: "pk/1", ContentType: "application/octet-stream",
			Properties: map[string]string{"a": "1", "ünï": "cödé", "empty": "", "quote'\"": "line\nbreak"},
			Payload:    binary,
		},
		{Payload: nil},
		{Payload: []byte{}, Properties: map[string]string{}},
		{Payload: []byte("with ttl"), TTL: time.Hour},
		{Payload: []byte("scheduled"), VisibleAt: scheduled},
		{Payload: []byte("visible in the past"), VisibleAt: time.Now().Add(-time.Hour)},
		{Payload: []byte{0, 0, 0}, MessageID: strings.Repeat("m", store.MaxNameLen)},
	}
	before := time.Now()
	seqs := enqueue(t, ctx, st, q, in...)
	wantSeqs(t, "Enqueue", seqs, span(1, int64(len(in))))

	check := func(what string, m sluicetype.Message, i int) {
		t.Helper()
		sameContent(t, what, m, in[i])
		near(t, what+" EnqueuedAt", m.EnqueuedAt, before, clockSkew)
		switch i {
		case 3:
			near(t, what+" ExpiresAt", m.ExpiresAt, m.EnqueuedAt.Add(time.Hour), durationSlack)
		default:
			if !m.ExpiresAt.IsZero() {
				t.Fatalf("%s: ExpiresAt %v for a message without TTL", what, m.ExpiresAt)
			}
		}
	}
	peeked := peekAll(t, ctx, st, q)
	wantSeqs(t, "peeked", messageSeqs(peeked), seqs)
	for i, m := range peeked {
		what := "peeked message " + string(in[i].Payload)
		check(what, m, i)
		if m.DeliveryCount != 0 {
			t.Fatalf("%s: DeliveryCount %d before any lease", what, m.DeliveryCount)
		}
		switch i {
		case 4:
			if m.State != sluicetype.StateScheduled {
				t.Fatalf("%s: state %v, want scheduled", what, m.State)
			}
			near(t, what+" VisibleAt", m.VisibleAt, scheduled, time.Millisecond)
		case 5:
			if m.State != sluicetype.StateReady {
				t.Fatalf("%s: state %v, want ready", what, m.State)
			}
		default:
			if m.State != sluicetype.StateReady {
				t.Fatalf("%s: state %v, want ready", what, m.State)
			}
			if !m.VisibleAt.IsZero() {
				t.Fatalf("%s: VisibleAt %v, want zero for a message available now", what, m.VisibleAt)
			}
		}
	}

	leased := lease(t, ctx, st, q, 100, long)
	wantSeqs(t, "leased (all but the scheduled one)", leasedSeqs(leased), []int64{1, 2, 3, 4, 6, 7})
	for _, l := range leased {
		i := int(l.Seq - 1)
		what := "leased message " + string(in[i].Payload)
		check(what, l.Message, i)
		if l.DeliveryCount != 1 {
			t.Fatalf("%s: DeliveryCount %d, want 1", what, l.DeliveryCount)
		}
	}
}

// A large batch, which a backend may load another way (COPY on
// PostgreSQL), keeps every field of every message as a small one does.
func testEnqueueRoundTripLarge(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	scheduled := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	kinds := []store.NewMessage{
		{MessageID: "id", SessionID: "session-ü", PartitionKey: "pk/1", ContentType: "application/json",
			Properties: map[string]string{"a": "1", "quote'\"": "line\nbreak"}, Payload: []byte(`{"n":1}`)},
		{Payload: nil},
		{Payload: []byte{0, 1, 2, 255}, Properties: map[string]string{}},
		{Payload: []byte("with ttl"), TTL: time.Hour},
		{Payload: []byte("scheduled"), VisibleAt: scheduled},
	}
	in := make([]store.NewMessage, 0, 600)
	for i := 0; len(in) < cap(in); i++ {
		m := kinds[i%len(kinds)]
		if m.MessageID != "" {
			m.MessageID = fmt.Sprintf("id-%d", i)
		}
		in = append(in, m)
	}
	before := time.Now()
	seqs := enqueue(t, ctx, st, q, in...)
	wantSeqs(t, "Enqueue", seqs, span(1, int64(len(in))))
	peeked := peekAll(t, ctx, st, q)
	wantSeqs(t, "peeked", messageSeqs(peeked), seqs)
	for i, m := range peeked {
		what := fmt.Sprintf("peeked message %d", i+1)
		sameContent(t, what, m, in[i])
		near(t, what+" EnqueuedAt", m.EnqueuedAt, before, clockSkew)
		switch i % len(kinds) {
		case 3:
			near(t, what+" ExpiresAt", m.ExpiresAt, m.EnqueuedAt.Add(time.Hour), durationSlack)
		case 4:
			if m.State != sluicetype.StateScheduled {
				t.Fatalf("%s: state %v, want scheduled", what, m.State)
			}
			near(t, what+" VisibleAt", m.VisibleAt, scheduled, time.Millisecond)
		default:
			if m.State != sluicetype.StateReady || !m.ExpiresAt.IsZero() || !m.VisibleAt.IsZero() {
				t.Fatalf("%s: state %v, expires %v, visible %v; want ready, no expiry", what, m.State, m.ExpiresAt, m.VisibleAt)
			}
		}
	}
}

func testEnqueueDefaultTTL(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DefaultTTL: time.Hour})
	ttls := []time.Duration{0, 2 * time.Hour, 10 * time.Minute, time.Hour}
	want := []time.Duration{time.Hour, time.Hour, 10 * time.Minute, time.Hour}
	var in []store.NewMessage
	for _, ttl := range ttls {
		in = append(in, store.NewMessage{Payload: []byte("m"), TTL: ttl})
	}
	enqueue(t, ctx, st, q, in...)
	for i, m := range peekAll(t, ctx, st, q) {
		near(t, "ExpiresAt of a message with TTL "+ttls[i].String()+" on a queue with DefaultTTL 1h",
			m.ExpiresAt, m.EnqueuedAt.Add(want[i]), durationSlack)
	}
}

func testScheduled(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	at := time.Now().Add(700 * time.Millisecond)
	enqueue(t, ctx, st, q,
		store.NewMessage{Payload: []byte("later"), VisibleAt: at},
		msg("now"))
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, Scheduled: 1})

	ls := lease(t, ctx, st, q, 10, long)
	wantSeqs(t, "lease with a scheduled head", leasedSeqs(ls), []int64{2})
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls...)

	var got []sluicetype.Leased
	eventually(t, "scheduled message leased", func() bool {
		got = lease(t, ctx, st, q, 10, long)
		if len(got) > 0 && time.Now().Before(at.Add(-100*time.Millisecond)) {
			t.Fatalf("scheduled message leased at %v, before its VisibleAt %v", time.Now(), at)
		}
		return len(got) > 0
	})
	// Activated, it was appended as if enqueued then: a new number.
	wantSeqs(t, "scheduled lease", leasedSeqs(got), []int64{3})
}

// A scheduled message is appended when its time comes, as Service Bus
// does: it takes a new number, counts as enqueued then, and its
// time-to-live counts from then, so a TTL shorter than the delay does not
// expire it unseen. Its scheduled number names it (peek, cancel) only
// until then; its id, under duplicate detection, names the new number.
func testScheduledActivation(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DeadLetterOnExpiry: true, DuplicateDetectionWindow: time.Minute})
	// The TTL is shorter than the delay; the lease that activates the
	// message must come within the TTL after its time: 1.5 s of margin.
	delay, ttl := 2*time.Second, 1500*time.Millisecond
	at := time.Now().Add(delay)
	seqs := enqueue(t, ctx, st, q,
		store.NewMessage{Payload: []byte("later"), MessageID: "a", VisibleAt: at, TTL: ttl},
		msg("now"))
	wantSeqs(t, "enqueue", seqs, []int64{1, 2})
	if p := peekAll(t, ctx, st, q); len(p) != 2 || p[0].Seq != 1 || p[0].State != sluicetype.StateScheduled {
		t.Fatalf("peek before the schedule: %+v", p)
	}
	hold := lease(t, ctx, st, q, 10, long)
	wantSeqs(t, "lease before the schedule", leasedSeqs(hold), []int64{2})
	var got []sluicetype.Leased
	eventually(t, "scheduled message leased", func() bool {
		got = lease(t, ctx, st, q, 10, long)
		return len(got) > 0
	})
	m := got[0]
	if len(got) != 1 || m.Seq != 3 || string(m.Payload) != "later" || m.DeliveryCount != 1 {
		t.Fatalf("activated: %d messages, first seq %d %q delivery %d; want seq 3 \"later\" on its first delivery", len(got), m.Seq, m.Payload, m.DeliveryCount)
	}
	if m.EnqueuedAt.Before(at.Add(-clockSkew)) {
		t.Fatalf("EnqueuedAt %v, before the scheduled time %v", m.EnqueuedAt, at)
	}
	near(t, "ExpiresAt", m.ExpiresAt, at.Add(ttl), clockSkew)
	if p := peekAll(t, ctx, st, q); len(p) != 2 || p[0].Seq != 2 || p[1].Seq != 3 {
		t.Fatalf("peek after activation: seqs %v, want [2 3]", messageSeqs(p))
	}
	err := st.CancelScheduled(ctx, &store.CancelParams{Queue: q, Seqs: []int64{1}})
	wantErr(t, "CancelScheduled of the scheduled number after activation", err, sluicetype.ErrMessageNotFound)
	again := enqueue(t, ctx, st, q, store.NewMessage{Payload: []byte("dup"), MessageID: "a"})
	wantSeqs(t, "duplicate of the activated message", again, []int64{3})
	if d := deadAll(t, ctx, st, q); len(d) != 0 {
		t.Fatalf("dead letters: %+v", d)
	}
}

// Scheduled messages take their new numbers in the order of their times,
// after what was enqueued before they came due.
func testScheduledActivationOrder(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	now := time.Now()
	enqueue(t, ctx, st, q,
		store.NewMessage{Payload: []byte("x"), VisibleAt: now.Add(600 * time.Millisecond)},
		store.NewMessage{Payload: []byte("y"), VisibleAt: now.Add(300 * time.Millisecond)},
		store.NewMessage{Payload: []byte("y2"), VisibleAt: now.Add(300 * time.Millisecond)},
		msg("z"))
	sleepUntil(t, now.Add(700*time.Millisecond))
	got := lease(t, ctx, st, q, 10, long)
	wantSeqs(t, "lease after both schedules", leasedSeqs(got), []int64{4, 5, 6, 7})
	var order []string
	for _, l := range got {
		order = append(order, string(l.Payload))
	}
	if !slices.Equal(order, []string{"z", "y", "y2", "x"}) {
		t.Fatalf("leased %v, want [z y y2 x]", order)
	}
}

func testLeaseOrderAndMax(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	if ls := lease(t, ctx, st, q, 10, long); len(ls) != 0 {
		t.Fatalf("Lease of an empty queue returned %d messages", len(ls))
	}
	enqueue(t, ctx, st, q, msgs("1", "2", "3", "4", "5")...)
	vis := 30 * time.Second
	before := time.Now()
	first := lease(t, ctx, st, q, 2, vis)
	wantSeqs(t, "Lease max 2", leasedSeqs(first), []int64{1, 2})
	rest := lease(t, ctx, st, q, 10, vis)
	wantSeqs(t, "Lease max 10", leasedSeqs(rest), []int64{3, 4, 5})
	if ls := lease(t, ctx, st, q, 10, vis); len(ls) != 0 {
		t.Fatalf("Lease with everything leased returned %v", leasedSeqs(ls))
	}
	tokens := map[sluicetype.Receipt]bool{}
	for _, l := range append(first, rest...) {
		what := "leased seq " + string(l.Payload)
		if l.DeliveryCount != 1 {
			t.Fatalf("%s: DeliveryCount %d, want 1", what, l.DeliveryCount)
		}
		if l.State != sluicetype.StateLeased {
			t.Fatalf("%s: state %v, want leased", what, l.State)
		}
		if l.Receipt.Seq != l.Seq {
			t.Fatalf("%s: receipt %+v names another message", what, l.Receipt)
		}
		if tokens[l.Receipt] {
			t.Fatalf("%s: receipt %+v given twice", what, l.Receipt)
		}
		tokens[l.Receipt] = true
		near(t, what+" LockedUntil", l.LockedUntil, before.Add(vis), clockSkew)
	}
	for _, m := range peekAll(t, ctx, st, q) {
		if m.State != sluicetype.StateLeased || m.DeliveryCount != 1 {
			t.Fatalf("peek of leased seq %d: state %v, DeliveryCount %d", m.Seq, m.State, m.DeliveryCount)
		}
		near(t, "peeked VisibleAt of a leased message", m.VisibleAt, before.Add(vis), clockSkew)
	}
}

func testLeaseDeliveryCount(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	seen := map[sluicetype.Receipt]bool{}
	for want := 1; want <= 4; want++ {
		ls := lease(t, ctx, st, q, 1, long)
		if len(ls) != 1 || ls[0].DeliveryCount != want {
			t.Fatalf("lease %d: got %+v, want one message with DeliveryCount %d", want, ls, want)
		}
		if seen[ls[0].Receipt] {
			t.Fatalf("lease %d reused receipt %+v", want, ls[0].Receipt)
		}
		seen[ls[0].Receipt] = true
		settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, ls...)
		if m := peekAll(t, ctx, st, q); len(m) != 1 || m[0].DeliveryCount != want || m[0].State != sluicetype.StateReady {
			t.Fatalf("peek after abandon %d: %+v", want, m)
		}
	}
}

func testPeek(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("1", "2", "3", "4", "5", "6")...)
	enqueue(t, ctx, st, q, store.NewMessage{Payload: []byte("7"), VisibleAt: time.Now().Add(time.Hour)})
	ls := lease(t, ctx, st, q, 2, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[0])

	wantSeqs(t, "Peek from 0 max 3", messageSeqs(peek(t, ctx, st, q, 0, 3)), []int64{2, 3, 4})
	wantSeqs(t, "Peek from 4 max 2", messageSeqs(peek(t, ctx, st, q, 4, 2)), []int64{4, 5})
	wantSeqs(t, "Peek from 6 max 10", messageSeqs(peek(t, ctx, st, q, 6, 10)), []int64{6, 7})
	wantSeqs(t, "Peek from 8", messageSeqs(peek(t, ctx, st, q, 8, 10)), nil)
	states := map[int64]sluicetype.MessageState{2: sluicetype.StateLeased, 3: sluicetype.StateReady, 7: sluicetype.StateScheduled}
	for _, m := range peekAll(t, ctx, st, q) {
		if want, ok := states[m.Seq]; ok && m.State != want {
			t.Fatalf("Peek: seq %d in state %v, want %v", m.Seq, m.State, want)
		}
		if want := string(rune('0' + m.Seq)); string(m.Payload) != want {
			t.Fatalf("Peek: seq %d holds %q, want %q", m.Seq, m.Payload, want)
		}
	}
	// Peeking took no lease and counted no delivery.
	got := lease(t, ctx, st, q, 10, long)
	wantSeqs(t, "Lease after peeks", leasedSeqs(got), []int64{3, 4, 5, 6})
	for _, l := range got {
		if l.DeliveryCount != 1 {
			t.Fatalf("seq %d: DeliveryCount %d after peeks and one lease", l.Seq, l.DeliveryCount)
		}
	}
}

func testStats(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	s := stats(t, ctx, st, q)
	if s != (store.QueueStats{}) {
		t.Fatalf("QueueStats of an empty queue = %+v, want zero", s)
	}
	enqueue(t, ctx, st, q, msgs("1", "2", "3", "4", "5")...)
	enqueue(t, ctx, st, q, store.NewMessage{Payload: []byte("6"), VisibleAt: time.Now().Add(time.Hour)})
	ls := lease(t, ctx, st, q, 3, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "r"}, ls[0])
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[1])
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 2, Scheduled: 1, InFlight: 1, DeadLettered: 1})
	eventually(t, "OldestAge > 0", func() bool {
		s = stats(t, ctx, st, q)
		if s.OldestAge < 0 || s.OldestAge > time.Minute {
			t.Fatalf("OldestAge %v of a queue a moment old", s.OldestAge)
		}
		return s.OldestAge > 0
	})
	if s.OldestDeferredAge != 0 {
		t.Fatalf("OldestDeferredAge %v without a deferred message", s.OldestDeferredAge)
	}

	// Deferred messages have an age of their own: a queue of deferred
	// messages alone has no oldest active one.
	only := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, only, msgs("d")...)
	settleOK(t, ctx, st, store.SettleParams{Queue: only, Action: store.Defer}, lease(t, ctx, st, only, 1, long)[0])
	wantCounts(t, ctx, st, only, store.QueueStats{Deferred: 1})
	eventually(t, "OldestDeferredAge > 0", func() bool {
		s = stats(t, ctx, st, only)
		if s.OldestAge != 0 || s.OldestDeferredAge < 0 || s.OldestDeferredAge > time.Minute {
			t.Fatalf("a queue of one deferred message: OldestAge %v, OldestDeferredAge %v", s.OldestAge, s.OldestDeferredAge)
		}
		return s.OldestDeferredAge > 0
	})
}

// Peek tells where each message stands now, as stats count it: a lease
// that ended leaves its message active (a deferred one deferred), and an
// active message past its time-to-live is expired, however its row
// still reads.
func testPeekStateNow(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: 10})
	// The held message is leased first, so that a short lease that ends
	// before the calls after it (a loaded machine) cannot let the long
	// lease take another message; short leaves the calls a second.
	const short = time.Second
	enqueue(t, ctx, st, q, store.NewMessage{Payload: []byte("held")})
	lease(t, ctx, st, q, 1, long) // 1 stays held
	enqueue(t, ctx, st, q, store.NewMessage{Payload: []byte("lease ends")}, store.NewMessage{Payload: []byte("deferred")},
		store.NewMessage{Payload: []byte("lease ends, then life"), TTL: 2 * short})
	ls := lease(t, ctx, st, q, 3, short)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, ls[1])
	leaseDeferred(t, st, q, short, 3)
	// Every short lease, and the time-to-live counted from the enqueue,
	// ended by then, however slowly the calls above ran.
	sleepUntil(t, time.Now().Add(2*short+50*time.Millisecond))
	want := map[int64]sluicetype.MessageState{1: sluicetype.StateLeased, 2: sluicetype.StateReady, 3: sluicetype.StateDeferred,
		4: sluicetype.StateExpired}
	for _, m := range peekAll(t, ctx, st, q) {
		if m.State != want[m.Seq] {
			t.Errorf("peek: seq %d is %v, want %v", m.Seq, m.State, want[m.Seq])
		}
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, Expired: 1, Deferred: 1, InFlight: 1})
}

// waitWoken waits on ch until try (called after each wake-up) succeeds,
// failing if that takes longer than 2 s.
func waitWoken(t *testing.T, ch <-chan struct{}, try func() bool) {
	t.Helper()
	timeout := time.After(2 * time.Second)
	for {
		select {
		case <-ch:
			if try() {
				return
			}
		case <-timeout:
			t.Fatal("the watcher was not woken within 2s")
		}
	}
}

func testWatchQueue(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	ch, stop := st.WatchQueue(q)
	defer stop()
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		time.Sleep(50 * time.Millisecond)
		if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: msgs("wake")}); err != nil {
			t.Errorf("Enqueue: %v", err)
		}
	}()
	waitWoken(t, ch, func() bool { return len(lease(t, ctx, st, q, 1, long)) == 1 })
}

func testWatchQueueCrossBackend(t *testing.T, h *harness) {
	if !h.features.CrossProcessWake {
		t.Skipf("backend %q has no cross-process wake-ups (Features.CrossProcessWake is false): other processes find new messages by polling", h.features.Name)
	}
	ctx, tn := t.Context(), newTenant()
	st := h.store(t, tn)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	// The same tenant seen through another Backend, as another process
	// would see it.
	other, err := h.open(t).Store(tn)
	if err != nil {
		t.Fatalf("Store on the second backend: %v", err)
	}
	ch, stop := other.WatchQueue(q)
	defer stop()
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond)
		if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: msgs("wake")}); err != nil {
			t.Errorf("Enqueue: %v", err)
		}
	}()
	waitWoken(t, ch, func() bool { return len(lease(t, ctx, other, q, 1, long)) == 1 })
}

func testClosed(t *testing.T, h *harness) {
	ctx, tn := t.Context(), newTenant()
	q := createQueue(t, ctx, h.store(t, tn), store.QueueSettings{})
	// A Backend of its own, so that closing it leaves the suite's alone.
	b := h.open(t)
	st, err := b.Store(tn)
	if err != nil {
		t.Fatalf("Store: %v", err)
	}
	enqueue(t, ctx, st, q, msg("m"))
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Every operation fails with ErrClosed; all are tried, and all that do
	// not are reported.
	r := []sluicetype.Receipt{{Seq: 1, Token: 1}}
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"CreateQueue", func() error { return st.CreateQueue(ctx, &store.QueueSettings{Name: "late"}) }},
		{"GetQueue", func() error { _, err := st.GetQueue(ctx, q); return err }},
		{"DeleteQueue", func() error { return st.DeleteQueue(ctx, q) }},
		{"Enqueue", func() error {
			_, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: msgs("late")})
			return err
		}},
		{"Lease", func() error {
			_, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: 1, Visibility: time.Second})
			return err
		}},
		{"Settle", func() error {
			_, err := st.Settle(ctx, &store.SettleParams{Queue: q, Action: store.Complete, Receipts: r})
			return err
		}},
		{"Peek", func() error { _, err := st.Peek(ctx, &store.PeekParams{Queue: q, Max: 1}); return err }},
		{"PeekDeadLetters", func() error { _, err := st.PeekDeadLetters(ctx, &store.PeekParams{Queue: q, Max: 1}); return err }},
		{"ResubmitDeadLetters", func() error {
			_, err := st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: q, Seqs: []int64{1}})
			return err
		}},
		{"PurgeDeadLetters", func() error { _, err := st.PurgeDeadLetters(ctx, q); return err }},
		{"Evict", func() error { _, err := evict(ctx, st, q); return err }},
		{"QueueStats", func() error { _, err := st.QueueStats(ctx, q); return err }},
		{"Append", func() error { _, err := st.Append(ctx, &store.AppendParams{Records: recs("late", 1)}); return err }},
		{"Read", func() error { _, err := st.Read(ctx, &store.ReadParams{Max: 1}); return err }},
		{"PartitionInfo", func() error { _, err := st.PartitionInfo(ctx, 0); return err }},
		{"TrimConsumed", func() error { _, err := trimNow(ctx, st, &store.TrimConsumedParams{Max: 1}); return err }},
	} {
		if err := op.call(); !errors.Is(err, sluicetype.ErrClosed) {
			t.Errorf("%s after Close: got error %v, want one wrapping %q", op.name, err, sluicetype.ErrClosed)
		}
	}
	// What the closed backend wrote is there for the others.
	m := peekAll(t, ctx, h.store(t, tn), q)
	if len(m) != 1 || string(m[0].Payload) != "m" {
		t.Fatalf("messages after the other backend closed: %+v", m)
	}
}
