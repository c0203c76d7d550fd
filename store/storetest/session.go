package storetest

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var sessionTests = []suiteTest{
	{"Required", testSessionRequired},
	{"AcceptNamed", testSessionAcceptNamed},
	{"AcceptNext", testSessionAcceptNext},
	{"LockCoversLater", testSessionLockCoversLater},
	{"FIFOAfterAbandon", testSessionFIFOAfterAbandon},
	{"FIFOAfterDelayedAbandon", testSessionFIFOAfterDelayedAbandon},
	{"Renew", testSessionRenew},
	{"LockExpires", testSessionLockExpires},
	{"Release", testSessionRelease},
	{"State", testSessionState},
	{"ScheduledBecomesAvailable", testSessionScheduled},
	{"NextSkipsLocked", testSessionNextSkipsLocked},
	{"NextBehindEmpty", testSessionNextBehindEmpty},
	{"ReleaseNotDelivery", testSessionReleaseNotDelivery},
	{"Deferred", testSessionDeferred},
	{"Trim", testSessionTrim},
}

func inSession(id, payload string) store.NewMessage {
	return store.NewMessage{Payload: []byte(payload), SessionID: id}
}

func accept(t *testing.T, st store.Store, q, id string, d time.Duration) store.SessionLock {
	t.Helper()
	l, err := st.AcceptSession(t.Context(), &store.AcceptSessionParams{Queue: q, SessionID: id, Duration: d})
	if err != nil {
		t.Fatalf("AcceptSession(%q): %v", id, err)
	}
	if id != "" && l.SessionID != id {
		t.Fatalf("AcceptSession(%q) locked %q", id, l.SessionID)
	}
	return l
}

func sessionParams(q string, l store.SessionLock) store.SessionParams {
	return store.SessionParams{Queue: q, SessionID: l.SessionID, Token: l.Token}
}

func leaseIn(t *testing.T, st store.Store, q string, l store.SessionLock, max int) []sluicetype.Leased {
	t.Helper()
	ls, err := st.LeaseSession(t.Context(), &store.LeaseSessionParams{SessionParams: sessionParams(q, l), Max: max})
	if err != nil {
		t.Fatalf("LeaseSession(%q): %v", l.SessionID, err)
	}
	for _, m := range ls {
		if m.SessionID != l.SessionID {
			t.Fatalf("LeaseSession(%q) returned a message of session %q", l.SessionID, m.SessionID)
		}
	}
	return ls
}

func payloads(ls []sluicetype.Leased) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = string(l.Payload)
	}
	return out
}

func sessionQueue(t *testing.T, h *harness) (*testing.T, store.Store, string) {
	ctx, st := h.setup(t)
	return t, st, createQueue(t, ctx, st, store.QueueSettings{RequiresSession: true})
}

func testSessionRequired(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	_, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: []store.NewMessage{inSession("s", "ok"), msg("none")}})
	wantErr(t, "Enqueue of a message without session id", err, sluicetype.ErrSessionRequired)
	wantCounts(t, ctx, st, q, store.QueueStats{})
	enqueue(t, ctx, st, q, inSession("s", "ok"))
	_, err = st.Lease(ctx, &store.LeaseParams{Queue: q, Max: 1, Visibility: long})
	wantErr(t, "Lease without a session", err, sluicetype.ErrSessionRequired)
	if got, _ := st.GetQueue(ctx, q); !got.RequiresSession {
		t.Fatal("GetQueue lost RequiresSession")
	}
	plain := createQueue(t, ctx, st, store.QueueSettings{})
	_, err = st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: plain, SessionID: "s", Duration: long})
	wantErr(t, "AcceptSession on a queue without sessions", err, sluicetype.ErrInvalidArgument)
}

func testSessionAcceptNamed(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	enqueue(t, ctx, st, q, inSession("s1", "a"), inSession("s2", "c"), inSession("s1", "b"))
	l1 := accept(t, st, q, "s1", long)
	if got := payloads(leaseIn(t, st, q, l1, 10)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("session s1 leased %v, want [a b]", got)
	}
	_, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, SessionID: "s1", Duration: long})
	wantErr(t, "a second accept of a held session", err, sluicetype.ErrSessionCannotBeLocked)
	l2 := accept(t, st, q, "s2", long)
	if got := payloads(leaseIn(t, st, q, l2, 10)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("session s2 leased %v", got)
	}
	// A session never seen can be accepted; it has nothing yet.
	l3 := accept(t, st, q, "new", long)
	if got := leaseIn(t, st, q, l3, 10); len(got) != 0 {
		t.Fatalf("new session leased %v", payloads(got))
	}
}

func testSessionAcceptNext(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	enqueue(t, ctx, st, q, inSession("s1", "a"), inSession("s2", "b"))
	accept(t, st, q, "empty", long) // held, and without messages
	got := map[string]bool{}
	for range 2 {
		l := accept(t, st, q, "", long)
		if got[l.SessionID] || (l.SessionID != "s1" && l.SessionID != "s2") {
			t.Fatalf("AcceptSession(next) locked %q after %v", l.SessionID, got)
		}
		got[l.SessionID] = true
	}
	_, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, Duration: long})
	wantErr(t, "AcceptSession(next) with every session held", err, sluicetype.ErrNoSessionAvailable)
}

func testSessionLockCoversLater(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	enqueue(t, ctx, st, q, inSession("s", "1"))
	l := accept(t, st, q, "", long)
	leaseIn(t, st, q, l, 10)
	enqueue(t, ctx, st, q, inSession("s", "2"))
	_, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, Duration: long})
	wantErr(t, "AcceptSession(next) while the only session with messages is held", err, sluicetype.ErrNoSessionAvailable)
	if got := payloads(leaseIn(t, st, q, l, 10)); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("holder leased %v after a later send, want [2]", got)
	}
}

func testSessionFIFOAfterAbandon(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	enqueue(t, ctx, st, q, inSession("s", "1"), inSession("s", "2"), inSession("s", "3"))
	l := accept(t, st, q, "s", long)
	ls := leaseIn(t, st, q, l, 2)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, ls[0])
	again := leaseIn(t, st, q, l, 10)
	if got := payloads(again); !slices.Equal(got, []string{"1", "3"}) || again[0].DeliveryCount != 2 {
		t.Fatalf("after abandoning 1, leased %v (delivery %d), want [1 3] with 1 on delivery 2", got, again[0].DeliveryCount)
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, append(again, ls[1])...)
	wantCounts(t, ctx, st, q, store.QueueStats{})
}

// testSessionFIFOAfterDelayedAbandon checks that a message of a session
// abandoned with a delay holds the session's later messages back until it
// comes again, first; a deferred one abandoned so holds nothing back.
func testSessionFIFOAfterDelayedAbandon(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	enqueue(t, ctx, st, q, inSession("s", "1"), inSession("s", "2"), inSession("s", "3"))
	l := accept(t, st, q, "s", long)
	first := leaseIn(t, st, q, l, 1)
	const delay = 1500 * time.Millisecond
	start := time.Now()
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon, Delay: delay}, first...)
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 2, Scheduled: 1})
	eventually(t, "the delayed message leased again, ahead of the rest", func() bool {
		got := leaseIn(t, st, q, l, 10)
		if len(got) == 0 {
			return false
		}
		if e := time.Since(start); e < delay-100*time.Millisecond {
			t.Fatalf("after abandoning 1 with delay %v, leased %v after %v", delay, payloads(got), e)
		}
		if p := payloads(got); !slices.Equal(p, []string{"1", "2", "3"}) || got[0].DeliveryCount != 2 {
			t.Fatalf("after the delay, leased %v (delivery %d), want [1 2 3] with 1 on delivery 2", p, got[0].DeliveryCount)
		}
		settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, got[0])
		settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, got[1:]...)
		return true
	})

	// A deferred message comes back deferred: its delay holds the
	// session's later messages back no longer than it does outside one.
	enqueue(t, ctx, st, q, inSession("s", "4"))
	sp := sessionParams(q, l)
	d, err := st.LeaseDeferred(ctx, &store.LeaseDeferredParams{Queue: q, Seqs: []int64{first[0].Seq}, Visibility: long, Session: &sp})
	if err != nil || len(d) != 1 {
		t.Fatalf("LeaseDeferred of the deferred session message: %d messages, %v", len(d), err)
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon, Delay: long}, d...)
	if got := payloads(leaseIn(t, st, q, l, 10)); !slices.Equal(got, []string{"4"}) {
		t.Fatalf("with a deferred message abandoned with a delay, leased %v, want [4]", got)
	}
}

func testSessionRenew(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	enqueue(t, ctx, st, q, inSession("s", "m"))
	l := accept(t, st, q, "s", 400*time.Millisecond)
	ls := leaseIn(t, st, q, l, 1)
	time.Sleep(200 * time.Millisecond)
	p := sessionParams(q, l)
	p.Duration = 3 * time.Second
	until, err := st.RenewSession(ctx, &p)
	if err != nil || !until.After(ls[0].LockedUntil) {
		t.Fatalf("RenewSession = %v, %v; want an end after %v", until, err, ls[0].LockedUntil)
	}
	time.Sleep(400 * time.Millisecond) // past the first lock's end
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls...)
}

func testSessionLockExpires(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	enqueue(t, ctx, st, q, inSession("s", "m"))
	l := accept(t, st, q, "s", 200*time.Millisecond)
	ls := leaseIn(t, st, q, l, 1)
	time.Sleep(300 * time.Millisecond)
	settleLost(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[0].Receipt)
	p := sessionParams(q, l)
	_, err := st.LeaseSession(ctx, &store.LeaseSessionParams{SessionParams: p, Max: 1})
	wantErr(t, "LeaseSession after the lock ended", err, sluicetype.ErrSessionLockLost)
	p.Duration = time.Second
	_, err = st.RenewSession(ctx, &p)
	wantErr(t, "RenewSession after the lock ended", err, sluicetype.ErrSessionLockLost)
	_, err = st.SessionState(ctx, &p)
	wantErr(t, "SessionState after the lock ended", err, sluicetype.ErrSessionLockLost)
	if held, err := st.SessionHeld(ctx, &p); held || err != nil {
		t.Fatalf("SessionHeld after the lock ended = %v, %v", held, err)
	}
	next := accept(t, st, q, "", long)
	again := leaseIn(t, st, q, next, 1)
	if next.SessionID != "s" || len(again) != 1 || again[0].DeliveryCount != 2 {
		t.Fatalf("after the lock ended: accepted %q, leased %d (delivery %d)", next.SessionID, len(again), again[0].DeliveryCount)
	}
}

func testSessionRelease(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	enqueue(t, ctx, st, q, inSession("s", "1"), inSession("s", "2"))
	l := accept(t, st, q, "", long)
	ls := leaseIn(t, st, q, l, 10)
	p := sessionParams(q, l)
	if err := st.ReleaseSession(ctx, &p); err != nil {
		t.Fatalf("ReleaseSession: %v", err)
	}
	settleLost(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[0].Receipt)
	wantErr(t, "a second release", st.ReleaseSession(ctx, &p), sluicetype.ErrSessionLockLost)
	again := leaseIn(t, st, q, accept(t, st, q, "", long), 10)
	// The release gave their deliveries back.
	if got := payloads(again); !slices.Equal(got, []string{"1", "2"}) || again[0].DeliveryCount != 1 {
		t.Fatalf("after release, leased %v", got)
	}
}

func testSessionState(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	l := accept(t, st, q, "s", long)
	p := sessionParams(q, l)
	if got, err := st.SessionState(ctx, &p); err != nil || got != nil {
		t.Fatalf("state of a new session = %q, %v; want nil", got, err)
	}
	want := []byte("step 3\x00\xff")
	if err := st.SetSessionState(ctx, &store.SessionStateParams{SessionParams: p, State: want}); err != nil {
		t.Fatalf("SetSessionState: %v", err)
	}
	if err := st.ReleaseSession(ctx, &p); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SetSessionState after release", st.SetSessionState(ctx, &store.SessionStateParams{SessionParams: p, State: []byte("x")}), sluicetype.ErrSessionLockLost)
	p = sessionParams(q, accept(t, st, q, "s", long))
	if got, err := st.SessionState(ctx, &p); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("state after release and accept = %q, %v; want %q", got, err, want)
	}
	if err := st.SetSessionState(ctx, &store.SessionStateParams{SessionParams: p}); err != nil {
		t.Fatalf("SetSessionState(nil): %v", err)
	}
	if got, err := st.SessionState(ctx, &p); err != nil || got != nil {
		t.Fatalf("state after clearing = %q, %v", got, err)
	}
	err := st.SetSessionState(ctx, &store.SessionStateParams{SessionParams: p, State: make([]byte, store.MaxSessionStateLen+1)})
	if !errors.Is(err, sluicetype.ErrMessageTooLarge) {
		t.Fatalf("oversized state: %v", err)
	}
}

func testSessionScheduled(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	m := inSession("s", "later")
	m.VisibleAt = time.Now().Add(300 * time.Millisecond)
	enqueue(t, ctx, st, q, m)
	_, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, Duration: long})
	wantErr(t, "AcceptSession(next) with only a scheduled message", err, sluicetype.ErrNoSessionAvailable)
	time.Sleep(400 * time.Millisecond)
	l := accept(t, st, q, "", long)
	ls := leaseIn(t, st, q, l, 10)
	if got := payloads(ls); !slices.Equal(got, []string{"later"}) || ls[0].Seq != 2 {
		t.Fatalf("after the schedule, leased %v (seq %d, want 2: a new number)", got, ls[0].Seq)
	}
}

func testSessionNextSkipsLocked(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	const n, free = 60, 3
	var all []store.NewMessage
	for i := range n {
		all = append(all, inSession(sessionName(i), "m"))
	}
	enqueue(t, ctx, st, q, all...)
	for i := free; i < n; i++ {
		accept(t, st, q, sessionName(i), long)
	}
	seen := map[string]bool{}
	for range free {
		l := accept(t, st, q, "", long)
		if seen[l.SessionID] || !slices.Contains([]string{sessionName(0), sessionName(1), sessionName(2)}, l.SessionID) {
			t.Fatalf("AcceptSession(next) locked %q, want one of the %d free sessions not seen yet (%v)", l.SessionID, free, seen)
		}
		seen[l.SessionID] = true
	}
	_, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, Duration: long})
	wantErr(t, "AcceptSession(next) with all held", err, sluicetype.ErrNoSessionAvailable)
}

func sessionName(i int) string {
	return "s-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
}

// Sessions closed empty sort first among the free ones; an accept clears
// their flags for good, so a session with messages behind them is found.
func testSessionNextBehindEmpty(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	for i := range 50 {
		l := accept(t, st, q, sessionName(i), long)
		p := sessionParams(q, l)
		if err := st.ReleaseSession(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(t, ctx, st, q, inSession("late", "m"))
	for try := 1; ; try++ {
		l, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, Duration: long})
		if err == nil {
			if l.SessionID != "late" {
				t.Fatalf("accepted %q, want the only session with a message", l.SessionID)
			}
			return
		}
		if !errors.Is(err, sluicetype.ErrNoSessionAvailable) || try == 3 {
			t.Fatalf("AcceptSession(next), try %d: %v", try, err)
		}
	}
}

// Releasing a session is not a delivery (Service Bus: closing a session
// does not increment the delivery count; a session lock that expires
// does). With MaxDeliveryCount 1, a message survives any number of
// releases, and the end of a lock then dead-letters it.
func testSessionReleaseNotDelivery(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{RequiresSession: true, MaxDeliveryCount: 1})
	enqueue(t, ctx, st, q, inSession("s", "m"))
	for release := 1; release <= 3; release++ {
		l := accept(t, st, q, "s", long)
		if got := leaseIn(t, st, q, l, 1); len(got) != 1 || got[0].DeliveryCount != 1 {
			t.Fatalf("lease after %d releases: %d messages, delivery count %v", release-1, len(got), got)
		}
		p := sessionParams(q, l)
		if err := st.ReleaseSession(ctx, &p); err != nil {
			t.Fatal(err)
		}
		if d := deadAll(t, ctx, st, q); len(d) != 0 {
			t.Fatalf("dead letters after release %d: %+v", release, d)
		}
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1})
	l := accept(t, st, q, "s", 200*time.Millisecond)
	if got := leaseIn(t, st, q, l, 1); len(got) != 1 || got[0].DeliveryCount != 1 {
		t.Fatalf("lease before the lock ends: %v", got)
	}
	eventually(t, "the session lock's end dead-letters the message", func() bool {
		if _, err := evict(ctx, st, q); err != nil {
			t.Fatal(err)
		}
		d := deadAll(t, ctx, st, q)
		if len(d) == 1 && d[0].Reason != sluicetype.ReasonMaxDeliveryCountExceeded {
			t.Fatalf("dead letter with reason %q", d[0].Reason)
		}
		return len(d) == 1
	})
	wantCounts(t, ctx, st, q, store.QueueStats{DeadLettered: 1})
}

// Deferred messages of a session are received only under its lock.
func testSessionDeferred(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	seqs := enqueue(t, ctx, st, q, inSession("s", "a"), inSession("other", "c"))
	l := accept(t, st, q, "s", long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, leaseIn(t, st, q, l, 1)...)
	_, err := st.LeaseDeferred(ctx, &store.LeaseDeferredParams{Queue: q, Seqs: seqs[:1], Visibility: long})
	wantErr(t, "LeaseDeferred without the session", err, sluicetype.ErrSessionRequired)
	p := sessionParams(q, l)
	got, err := st.LeaseDeferred(ctx, &store.LeaseDeferredParams{Queue: q, Seqs: seqs[:1], Session: &p})
	if err != nil || len(got) != 1 || got[0].Receipt.Token != l.Token || !got[0].LockedUntil.Equal(l.LockedUntil) {
		t.Fatalf("LeaseDeferred under the session = %+v, %v; want it under the session's lock", got, err)
	}
	_, err = st.LeaseDeferred(ctx, &store.LeaseDeferredParams{Queue: q, Seqs: seqs[1:], Session: &p})
	wantErr(t, "LeaseDeferred of another session's message", err, sluicetype.ErrMessageNotFound)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, got...)
}

// Eviction deletes the rows of sessions that hold nothing, and a session
// seen again works as new.
func testSessionTrim(t *testing.T, h *harness) {
	t, st, q := sessionQueue(t, h)
	ctx := t.Context()
	enqueue(t, ctx, st, q, inSession("done", "m"), inSession("kept", "k"))
	l := accept(t, st, q, "done", long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, leaseIn(t, st, q, l, 10)...)
	p := sessionParams(q, l)
	if err := st.ReleaseSession(ctx, &p); err != nil {
		t.Fatal(err)
	}
	withState := accept(t, st, q, "stateful", long)
	sp := sessionParams(q, withState)
	if err := st.SetSessionState(ctx, &store.SessionStateParams{SessionParams: sp, State: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseSession(ctx, &sp); err != nil {
		t.Fatal(err)
	}
	// Accepts find "done" and "stateful" empty (clearing their flags) and
	// take "kept".
	kept := accept(t, st, q, "", long)
	if kept.SessionID != "kept" {
		t.Fatalf("accepted %q, want kept", kept.SessionID)
	}
	if _, err := evict(ctx, st, q); err != nil {
		t.Fatalf("Evict: %v", err)
	}
	// "stateful" keeps its state; "kept" its message and lock.
	sp = sessionParams(q, accept(t, st, q, "stateful", long))
	if got, err := st.SessionState(ctx, &sp); err != nil || string(got) != "x" {
		t.Fatalf("state after eviction = %q, %v", got, err)
	}
	if got := leaseIn(t, st, q, kept, 10); len(got) != 1 {
		t.Fatalf("kept leased %d after eviction", len(got))
	}
	// "done" was deleted: a new message makes it a session again.
	enqueue(t, ctx, st, q, inSession("done", "again"))
	again := accept(t, st, q, "", long)
	if again.SessionID != "done" {
		t.Fatalf("accepted %q, want done again", again.SessionID)
	}
	if got := payloads(leaseIn(t, st, q, again, 10)); len(got) != 1 || got[0] != "again" {
		t.Fatalf("done leased %v", got)
	}
}
