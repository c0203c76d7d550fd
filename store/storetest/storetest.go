package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Run runs the conformance suite against the backend that open returns.
//
// open must return a Backend on one shared database, opened with the
// default store.Limits, and register its Close with t.Cleanup. Run calls it
// once for the whole suite, with the top-level t, and again from the tests
// that need a Backend of their own on the same database (one that they
// close, or one that stands for another process); Close must therefore
// tolerate a second call. The tests run in parallel, each in a fresh
// tenant, so the database need not be empty.
//
// A failure is reported by the test that found it, named after the seam's
// semantics (Settle/StaleAfterExpiry, Concurrency/GapSafeRead, ...), so
// that -run can select it. The model test takes rapid's flags
// (-rapid.checks, -rapid.steps, -rapid.seed) and, when it fails, writes a
// fail file under the backend package's testdata/rapid.
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	b := open(t)
	if b == nil {
		t.Fatal("storetest: open returned a nil Backend")
	}
	h := &harness{backend: b, features: b.Features(), open: open}
	t.Logf("storetest: running the conformance suite on backend %q (features %+v)", h.features.Name, h.features)

	groups := []struct {
		name  string
		tests []suiteTest
	}{
		{"Queue", queueTests},
		{"Settle", settleTests},
		{"SettleTx", settleTxTests},
		{"HandledTx", handledTxTests},
		{"Expiry", expiryTests},
		{"Entity", entityTests},
		{"Dedup", dedupTests},
		{"Session", sessionTests},
		{"DeadLetters", deadLetterTests},
		{"Browse", browseTests},
		{"Bodies", bodyTests},
		{"Log", logTests},
		{"Stream", streamTests},
		{"Cluster", clusterTests},
		{"Concurrency", concurrencyTests},
		{"Isolation", isolationTests},
		{"Validation", validationTests},
		{"Duration", durationTests},
		{"Model", modelTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, h)
				})
			}
		})
	}
}

// suiteTest is one test of the suite.
type suiteTest struct {
	name string
	fn   func(t *testing.T, h *harness)
}

// harness is what every test of the suite shares: the backend under test.
type harness struct {
	backend  store.Backend
	features store.Features
	open     func(t *testing.T) store.Backend
	// begin opens caller transactions (RunTx); nil: the backend's BeginTx.
	begin beginFunc
}

// setup returns the test's context and a Store of a fresh tenant, so that
// the test sees nothing of any other test.
func (h *harness) setup(t *testing.T) (context.Context, store.Store) {
	t.Helper()
	return t.Context(), h.store(t, newTenant())
}

// store returns the Store of tenant tn on the suite's backend.
func (h *harness) store(t *testing.T, tn store.Tenant) store.Store {
	t.Helper()
	st, err := h.backend.Store(tn)
	if err != nil {
		t.Fatalf("Store(%+v): %v", tn, err)
	}
	return st
}

// newTenant returns a tenant no other test uses.
func newTenant() store.Tenant {
	return store.Tenant{Service: "t" + randHex(8), Provider: "p"}
}

// randHex returns n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Tolerances of time comparisons. The database clock stamps the times that
// backends return; clockSkew allows for it differing from the test's clock
// and for slow test machines. durationSlack allows for rounding when a time
// is derived from another by a duration (ExpiresAt from EnqueuedAt).
const (
	clockSkew     = 3 * time.Second
	durationSlack = time.Second
	// long is a visibility timeout that never runs out during a test.
	long = 10 * time.Minute
	// waitFor bounds every poll for something that must happen.
	waitFor = 10 * time.Second
)

// createQueue creates a queue with settings s (a random name when s.Name is
// empty) and returns its name.
func createQueue(t *testing.T, ctx context.Context, st store.Store, s store.QueueSettings) string {
	t.Helper()
	if s.Name == "" {
		s.Name = "q-" + randHex(4)
	}
	if err := st.CreateQueue(ctx, &s); err != nil {
		t.Fatalf("CreateQueue(%+v): %v", s, err)
	}
	return s.Name
}

// msg returns a message with the given payload.
func msg(payload string) store.NewMessage {
	return store.NewMessage{Payload: []byte(payload)}
}

// msgs returns messages with the given payloads.
func msgs(payloads ...string) []store.NewMessage {
	m := make([]store.NewMessage, len(payloads))
	for i, p := range payloads {
		m[i] = msg(p)
	}
	return m
}

// enqueue enqueues ms into q and returns their sequence numbers.
func enqueue(t *testing.T, ctx context.Context, st store.Store, q string, ms ...store.NewMessage) []int64 {
	t.Helper()
	seqs, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: ms})
	if err != nil {
		t.Fatalf("Enqueue(%s, %d messages): %v", q, len(ms), err)
	}
	if len(seqs) != len(ms) {
		t.Fatalf("Enqueue(%s, %d messages) returned %d sequence numbers", q, len(ms), len(seqs))
	}
	return seqs
}

// lease leases up to max messages of q for vis.
func lease(t *testing.T, ctx context.Context, st store.Store, q string, max int, vis time.Duration) []sluicetype.Leased {
	t.Helper()
	l, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: max, Visibility: vis})
	if err != nil {
		t.Fatalf("Lease(%s, max %d, visibility %v): %v", q, max, vis, err)
	}
	if len(l) > max {
		t.Fatalf("Lease(%s, max %d) returned %d messages", q, max, len(l))
	}
	return l
}

// settle settles and returns the per-message results.
func settle(t *testing.T, ctx context.Context, st store.Store, p store.SettleParams) []store.SettleResult {
	t.Helper()
	res, err := st.Settle(ctx, &p)
	if err != nil {
		t.Fatalf("Settle(%s %s, %d receipts): %v", p.Queue, p.Action, len(p.Receipts), err)
	}
	if len(res) != len(p.Receipts) {
		t.Fatalf("Settle(%s %s) returned %d results for %d receipts", p.Queue, p.Action, len(res), len(p.Receipts))
	}
	return res
}

// settleOK settles the leased messages and requires every one to succeed.
func settleOK(t *testing.T, ctx context.Context, st store.Store, p store.SettleParams, ls ...sluicetype.Leased) []store.SettleResult {
	t.Helper()
	for _, l := range ls {
		p.Receipts = append(p.Receipts, l.Receipt)
	}
	res := settle(t, ctx, st, p)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("Settle(%s %s): receipt %+v: %v", p.Queue, p.Action, p.Receipts[i], r.Err)
		}
	}
	return res
}

// settleLost settles with receipts that must all be stale.
func settleLost(t *testing.T, ctx context.Context, st store.Store, p store.SettleParams, rs ...sluicetype.Receipt) {
	t.Helper()
	p.Receipts = rs
	for i, r := range settle(t, ctx, st, p) {
		if !errors.Is(r.Err, sluicetype.ErrLockLost) {
			t.Fatalf("Settle(%s %s) with stale receipt %+v: got %v, want ErrLockLost", p.Queue, p.Action, rs[i], r.Err)
		}
	}
}

// peek returns up to max messages of q from seq from.
func peek(t *testing.T, ctx context.Context, st store.Store, q string, from int64, max int) []sluicetype.Message {
	t.Helper()
	m, err := st.Peek(ctx, &store.PeekParams{Queue: q, FromSeq: from, Max: max})
	if err != nil {
		t.Fatalf("Peek(%s, from %d, max %d): %v", q, from, max, err)
	}
	if len(m) > max {
		t.Fatalf("Peek(%s, max %d) returned %d messages", q, max, len(m))
	}
	return m
}

// peekAll returns all messages of q, checking that pages come in strictly
// increasing sequence order.
func peekAll(t *testing.T, ctx context.Context, st store.Store, q string) []sluicetype.Message {
	t.Helper()
	var all []sluicetype.Message
	from := int64(0)
	for {
		page := peek(t, ctx, st, q, from, store.DefaultMaxBatch)
		for _, m := range page {
			if len(all) > 0 && m.Seq <= all[len(all)-1].Seq || m.Seq < from {
				t.Fatalf("Peek(%s, from %d): sequence number %d out of order", q, from, m.Seq)
			}
			all = append(all, m)
		}
		if len(page) == 0 {
			return all
		}
		from = page[len(page)-1].Seq + 1
	}
}

// deadAll returns all dead letters of q, checking their order.
func deadAll(t *testing.T, ctx context.Context, st store.Store, q string) []sluicetype.DeadLetter {
	t.Helper()
	var all []sluicetype.DeadLetter
	from := int64(0)
	for {
		page, err := st.PeekDeadLetters(ctx, &store.PeekParams{Queue: q, FromSeq: from, Max: store.DefaultMaxBatch})
		if err != nil {
			t.Fatalf("PeekDeadLetters(%s, from %d): %v", q, from, err)
		}
		for _, d := range page {
			if len(all) > 0 && d.Seq <= all[len(all)-1].Seq || d.Seq < from {
				t.Fatalf("PeekDeadLetters(%s, from %d): sequence number %d out of order", q, from, d.Seq)
			}
			all = append(all, d)
		}
		if len(page) == 0 {
			return all
		}
		from = page[len(page)-1].Seq + 1
	}
}

// stats returns q's stats.
func stats(t *testing.T, ctx context.Context, st store.Store, q string) store.QueueStats {
	t.Helper()
	s, err := st.QueueStats(ctx, q)
	if err != nil {
		t.Fatalf("QueueStats(%s): %v", q, err)
	}
	return s
}

// wantCounts checks q's stats counts (OldestAge aside).
func wantCounts(t *testing.T, ctx context.Context, st store.Store, q string, want store.QueueStats) {
	t.Helper()
	got := stats(t, ctx, st, q)
	got.OldestAge, want.OldestAge, got.OldestDeferredAge, want.OldestDeferredAge = 0, 0, 0, 0
	if got != want {
		t.Fatalf("QueueStats(%s) = %+v, want %+v", q, got, want)
	}
}

// wantEmpty checks that q holds no message and no dead letter.
func wantEmpty(t *testing.T, ctx context.Context, st store.Store, q string) {
	t.Helper()
	if m := peekAll(t, ctx, st, q); len(m) != 0 {
		t.Fatalf("queue %s holds %d messages (first seq %d), want none", q, len(m), m[0].Seq)
	}
	if d := deadAll(t, ctx, st, q); len(d) != 0 {
		t.Fatalf("queue %s holds %d dead letters (first seq %d), want none", q, len(d), d[0].Seq)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{})
}

// drain leases and completes every available message of q and returns
// them in the order leased.
func drain(t *testing.T, ctx context.Context, st store.Store, q string) []sluicetype.Leased {
	t.Helper()
	var all []sluicetype.Leased
	for {
		ls := lease(t, ctx, st, q, 100, long)
		if len(ls) == 0 {
			return all
		}
		settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls...)
		all = append(all, ls...)
	}
}

// leasedSeqs returns the sequence numbers of leased messages.
func leasedSeqs(ls []sluicetype.Leased) []int64 {
	s := make([]int64, len(ls))
	for i, l := range ls {
		s[i] = l.Seq
	}
	return s
}

// messageSeqs returns the sequence numbers of messages.
func messageSeqs(ms []sluicetype.Message) []int64 {
	s := make([]int64, len(ms))
	for i, m := range ms {
		s[i] = m.Seq
	}
	return s
}

// deadSeqs returns the sequence numbers of dead letters.
func deadSeqs(ds []sluicetype.DeadLetter) []int64 {
	s := make([]int64, len(ds))
	for i, d := range ds {
		s[i] = d.Seq
	}
	return s
}

// span returns the sequence numbers from through to.
func span(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// wantSeqs checks a list of sequence numbers or positions.
func wantSeqs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// wantErr checks that err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %q", what, err, target)
	}
}

// near checks that got is within tol of want.
func near(t *testing.T, what string, got, want time.Time, tol time.Duration) {
	t.Helper()
	if d := got.Sub(want); d < -tol || d > tol || got.IsZero() {
		t.Fatalf("%s = %v, want %v ± %v (off by %v)", what, got, want, tol, d)
	}
}

// eventually polls cond until it holds, failing the test after waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: did not happen within %v", what, waitFor)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sleepUntil waits until local time passes at. Tests use it only where they
// must check that something does not happen before a time, or must let a
// time pass without touching the store.
func sleepUntil(t *testing.T, at time.Time) {
	t.Helper()
	select {
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	case <-time.After(time.Until(at)):
	}
}

// sameContent checks that a stored message carries what was enqueued.
func sameContent(t *testing.T, what string, got sluicetype.Message, want store.NewMessage) {
	t.Helper()
	if got.MessageID != want.MessageID || got.SessionID != want.SessionID ||
		got.PartitionKey != want.PartitionKey || got.ContentType != want.ContentType {
		t.Fatalf("%s: ids %q/%q/%q/%q, want %q/%q/%q/%q", what,
			got.MessageID, got.SessionID, got.PartitionKey, got.ContentType,
			want.MessageID, want.SessionID, want.PartitionKey, want.ContentType)
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		t.Fatalf("%s: payload %s, want %s", what, short(got.Payload), short(want.Payload))
	}
	sameProps(t, what, got.Properties, want.Properties)
}

// sameProps compares properties, treating nil and empty alike.
func sameProps(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) || !maps.Equal(got, want) {
		t.Fatalf("%s: properties %v, want %v", what, got, want)
	}
}

// short renders a payload for a failure message.
func short(p []byte) string {
	if len(p) > 32 {
		return fmt.Sprintf("%q... (%d bytes)", p[:32], len(p))
	}
	return fmt.Sprintf("%q", p)
}

// evict runs one eviction batch of q now, through the store's
// store.Evicter.
func evict(ctx context.Context, st store.Store, q string) (store.EvictResult, error) {
	e, ok := st.(store.Evicter)
	if !ok {
		return store.EvictResult{}, fmt.Errorf("%T does not implement store.Evicter", st)
	}
	return e.Evict(ctx, q)
}

// trimNow runs one TrimConsumed now, through the store's
// store.Trimmer.
func trimNow(ctx context.Context, st store.Store, p *store.TrimConsumedParams) (int64, error) {
	tr, ok := st.(store.Trimmer)
	if !ok {
		return 0, fmt.Errorf("%T does not implement store.Trimmer", st)
	}
	return tr.TrimConsumed(ctx, p)
}
