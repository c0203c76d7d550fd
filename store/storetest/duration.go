package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// The duration rule (store.Forever): a negative duration is refused with
// ErrInvalidArgument and writes nothing; one that reaches Forever
// saturates, and means never where never has a meaning; no stored time is
// ever negative or wrapped.
var durationTests = []suiteTest{
	{"QueueSettings", testDurationQueueSettings},
	{"MessageTTL", testDurationMessageTTL},
	{"Locks", testDurationLocks},
	{"Retention", testDurationRetention},
}

// farFuture is a time every saturated time must lie beyond: a wrapped
// expiry (the year 1734) or a negative one lies before it.
var farFuture = time.Now().Add(100 * 365 * 24 * time.Hour)

func testDurationQueueSettings(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	for _, bad := range []store.QueueSettings{
		{DefaultTTL: -1}, {DeadLetterRetention: -1}, {EvictionInterval: -1},
		{DuplicateDetectionWindow: -1}, {DuplicateDetectionWindow: store.Forever},
	} {
		bad.Name = "q-" + randHex(4)
		wantErr(t, "CreateQueue with a negative or oversized duration", st.CreateQueue(ctx, &bad), sluicetype.ErrInvalidArgument)
		_, err := st.GetQueue(ctx, bad.Name)
		wantErr(t, "GetQueue of a queue refused", err, sluicetype.ErrQueueNotFound)
	}
	// Forever means never: stored as the schema's never (0).
	q := createQueue(t, ctx, st, store.QueueSettings{DefaultTTL: store.Forever, DeadLetterRetention: store.Forever,
		EvictionInterval: store.Forever, DeadLetterOnExpiry: true, MaxDeliveryCount: 1})
	got, err := st.GetQueue(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if got.DefaultTTL != 0 || got.DeadLetterRetention != 0 || got.EvictionInterval != store.Forever {
		t.Fatalf("settings of Forever read back as TTL %v, retention %v, eviction %v; want 0 (never), 0 (never), Forever",
			got.DefaultTTL, got.DeadLetterRetention, got.EvictionInterval)
	}
	s := got
	s.DefaultTTL = -time.Second
	wantErr(t, "UpdateQueue with a negative TTL", st.UpdateQueue(ctx, &s), sluicetype.ErrInvalidArgument)
	// A duration just short of Forever saturates: far in the future, never
	// wrapped into the past.
	s.DefaultTTL, s.DeadLetterRetention = store.Forever-1, store.Forever-1
	if err := st.UpdateQueue(ctx, &s); err != nil {
		t.Fatal(err)
	}
	enqueue(t, ctx, st, q, msg("m"))
	ls := lease(t, ctx, st, q, 1, long)
	if len(ls) != 1 {
		t.Fatalf("a message under a default TTL near Forever was not leased: it expired at once")
	}
	if e := ls[0].ExpiresAt; !e.IsZero() && e.Before(farFuture) {
		t.Fatalf("ExpiresAt %v under a default TTL near Forever, want never or far in the future", e)
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "r"}, ls...)
	d := deadAll(t, ctx, st, q)
	if len(d) != 1 || !d[0].RemoveAt.IsZero() && d[0].RemoveAt.Before(farFuture) {
		t.Fatalf("dead letter under a retention near Forever: %+v", d)
	}
}

func testDurationMessageTTL(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DeadLetterOnExpiry: true})
	_, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: []store.NewMessage{msg("ok"), {Payload: []byte("bad"), TTL: -1}}})
	wantErr(t, "Enqueue with a negative TTL", err, sluicetype.ErrInvalidArgument)
	wantEmpty(t, ctx, st, q)
	before := time.Now()
	enqueue(t, ctx, st, q,
		store.NewMessage{Payload: []byte("forever"), TTL: store.Forever},
		store.NewMessage{Payload: []byte("almost"), TTL: store.Forever - 1},
		store.NewMessage{Payload: []byte("1ns"), TTL: time.Nanosecond},
		store.NewMessage{Payload: []byte("far"), VisibleAt: time.Unix(1<<50, 0)},
	)
	p := peekAll(t, ctx, st, q)
	if len(p) != 4 {
		t.Fatalf("peek: %d messages, want 4", len(p))
	}
	if !p[0].ExpiresAt.IsZero() {
		t.Fatalf("TTL Forever: ExpiresAt %v, want never", p[0].ExpiresAt)
	}
	if p[1].ExpiresAt.Before(farFuture) {
		t.Fatalf("TTL Forever-1ns: ExpiresAt %v, want far in the future", p[1].ExpiresAt)
	}
	if e := p[2].ExpiresAt; e.Before(before.Add(-clockSkew)) || e.After(time.Now().Add(clockSkew)) {
		t.Fatalf("TTL 1ns: ExpiresAt %v, want about now (a millisecond after the send)", e)
	}
	if v := p[3].VisibleAt; v.Year() != 9999 || p[3].State != sluicetype.StateScheduled {
		t.Fatalf("scheduled past the year 9999: VisibleAt %v state %v, want saturated at 9999", v, p[3].State)
	}
	// The never-expiring ones lease; nothing was dead-lettered for them.
	eventually(t, "the 1ns message expired", func() bool {
		if _, err := evict(ctx, st, q); err != nil {
			t.Fatal(err)
		}
		return len(deadAll(t, ctx, st, q)) == 1
	})
	wantSeqs(t, "lease of the long-lived messages", leasedSeqs(lease(t, ctx, st, q, 10, long)), []int64{1, 2})
}

func testDurationLocks(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("1", "2")...)
	_, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: 1, Visibility: -time.Second})
	wantErr(t, "Lease with a negative visibility", err, sluicetype.ErrInvalidArgument)
	ls := lease(t, ctx, st, q, 2, store.Forever)
	if len(ls) != 2 || ls[0].LockedUntil.Before(farFuture) {
		t.Fatalf("lease for Forever: %d messages locked until %v, want far in the future", len(ls), ls[0].LockedUntil)
	}
	_, err = st.Settle(ctx, &store.SettleParams{Queue: q, Action: store.Abandon, Delay: -1, Receipts: []sluicetype.Receipt{ls[0].Receipt}})
	wantErr(t, "abandon with a negative delay", err, sluicetype.ErrInvalidArgument)
	_, err = st.Settle(ctx, &store.SettleParams{Queue: q, Action: store.Extend, Extension: -1, Receipts: []sluicetype.Receipt{ls[0].Receipt}})
	wantErr(t, "extend by a negative duration", err, sluicetype.ErrInvalidArgument)
	res := settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Extend, Extension: store.Forever}, ls[0])
	if res[0].LockedUntil.Before(farFuture) {
		t.Fatalf("extend by Forever: locked until %v", res[0].LockedUntil)
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon, Delay: store.Forever}, ls[1])
	if p := peekAll(t, ctx, st, q); p[1].State != sluicetype.StateScheduled || p[1].VisibleAt.Before(farFuture) {
		t.Fatalf("abandoned with a delay of Forever: %v until %v", p[1].State, p[1].VisibleAt)
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[0])

	sq := createQueue(t, ctx, st, store.QueueSettings{RequiresSession: true})
	_, err = st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: sq, SessionID: "s", Duration: -time.Second})
	wantErr(t, "AcceptSession with a negative duration", err, sluicetype.ErrInvalidArgument)
	l := accept(t, st, sq, "s", store.Forever)
	if l.LockedUntil.Before(farFuture) {
		t.Fatalf("session accepted for Forever: locked until %v", l.LockedUntil)
	}
	p := sessionParams(sq, l)
	p.Duration = -1
	_, err = st.RenewSession(ctx, &p)
	wantErr(t, "RenewSession with a negative duration", err, sluicetype.ErrInvalidArgument)
}

func testDurationRetention(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	ns := "ns-" + randHex(4)
	err := st.SetRetention(ctx, ns, store.Retention{MaxAge: -time.Second})
	wantErr(t, "SetRetention with a negative age", err, sluicetype.ErrInvalidArgument)
	if err := st.SetRetention(ctx, ns, store.Retention{MaxAge: store.Forever}); err != nil {
		t.Fatal(err)
	}
	// Kept for ever: a trim leaves the namespace's consumed records.
	appendRecs(t, st, 0, store.NewRecord{Namespace: "other", Key: "k", Payload: []byte("x")},
		store.NewRecord{Namespace: ns, Key: "k", Payload: []byte("x")})
	o := acquire(t, st, "n", 0)
	if err := saveProgress(st, store.ProgressParams{Partition: 0, Epoch: o.Epoch, Checkpoint: 2}); err != nil {
		t.Fatal(err)
	}
	if n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 0, Max: 100}); err != nil || n != 1 {
		t.Fatalf("TrimConsumed with a retention of Forever = %d, %v; want 1 (the other namespace's)", n, err)
	}
}
