package mysql

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// TestSessionIDsByteExact checks that session ids that differ only in
// trailing spaces name different sessions: the messages' session_id
// column is utf8mb4_bin, which compares 'a' and 'a ' equal (PAD SPACE).
func TestSessionIDsByteExact(t *testing.T) {
	b := openBackend(t, freshDatabase(t))
	ctx := t.Context()
	st, err := b.Store(store.Tenant{Service: "svc", Provider: "pad"})
	if err != nil {
		t.Fatal(err)
	}
	const q = "q"
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: q, RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	msg := func(id, payload string) store.NewMessage {
		return store.NewMessage{SessionID: id, Payload: []byte(payload)}
	}
	if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: []store.NewMessage{
		msg("a", "1"), msg("a ", "2"), msg("a", "3"), msg("a  ", "4"),
	}}); err != nil {
		t.Fatal(err)
	}
	accept := func(id string) store.SessionLock {
		t.Helper()
		l, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, SessionID: id, Duration: time.Minute})
		if err != nil {
			t.Fatalf("AcceptSession(%q): %v", id, err)
		}
		return l
	}
	lease := func(l store.SessionLock) []sluicetype.Leased {
		t.Helper()
		ls, err := st.LeaseSession(ctx, &store.LeaseSessionParams{
			SessionParams: store.SessionParams{Queue: q, SessionID: l.SessionID, Token: l.Token}, Max: 10})
		if err != nil {
			t.Fatalf("LeaseSession(%q): %v", l.SessionID, err)
		}
		return ls
	}
	got := func(ls []sluicetype.Leased) string {
		var out []string
		for _, l := range ls {
			out = append(out, fmt.Sprintf("%q:%s", l.SessionID, l.Payload))
		}
		return strings.Join(out, " ")
	}
	held := accept("a ")
	if ls := lease(held); got(ls) != `"a ":2` {
		t.Fatalf("session %q leased %s", "a ", got(ls))
	}
	a := accept("a")
	ls := lease(a)
	if got(ls) != `"a":1 "a":3` {
		t.Fatalf("session %q leased %s", "a", got(ls))
	}
	var rs []sluicetype.Receipt
	for _, l := range ls {
		rs = append(rs, l.Receipt)
	}
	if _, err := st.Settle(ctx, &store.SettleParams{Queue: q, Action: store.Complete, Receipts: rs}); err != nil {
		t.Fatal(err)
	}
	// Renewing and releasing a must leave the message of "a " leased.
	p := store.SessionParams{Queue: q, SessionID: "a", Token: a.Token, Duration: time.Minute}
	if _, err := st.RenewSession(ctx, &p); err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseSession(ctx, &p); err != nil {
		t.Fatal(err)
	}
	// "a" is active and free but has nothing; "a " is held: the next
	// session is "a  ", and then there is none.
	if l := accept(""); l.SessionID != "a  " {
		t.Fatalf("AcceptSession(next) = %q, want %q", l.SessionID, "a  ")
	}
	if l, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, Duration: time.Minute}); !errors.Is(err, sluicetype.ErrNoSessionAvailable) {
		t.Fatalf("AcceptSession(next) = %q, %v; want %v", l.SessionID, err, sluicetype.ErrNoSessionAvailable)
	}
	stats, err := st.QueueStats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if stats.InFlight != 1 {
		t.Fatalf("stats %+v, want the message of %q still in flight", stats, "a ")
	}
}

// TestSessionCost checks that accepting the next session reads the free
// sessions, not the locked ones, and that a session's lease reads its
// ready messages, not its leased ones or other sessions': with 490 of 500
// sessions locked, and a session with 1,000 messages leased ahead of 1,000
// ready ones. Rows read are counted as in TestLeaseCost.
func TestSessionCost(t *testing.T) {
	dsn := freshDatabase(t)
	b := openBackend(t, dsn)
	ctx := t.Context()
	tenant := store.Tenant{Service: "svc", Provider: "cost"}
	st, err := b.Store(tenant)
	if err != nil {
		t.Fatal(err)
	}
	const q, sessions, locked, big = "sq", 500, 490, 1000
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: q, RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("s%03d", i) }
	var ms []store.NewMessage
	for i := range sessions {
		ms = append(ms, store.NewMessage{SessionID: name(i), Payload: []byte("x")})
	}
	if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: ms}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ms = ms[:0]
		for range big {
			ms = append(ms, store.NewMessage{SessionID: "big", Payload: []byte("x")})
		}
		if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: ms}); err != nil {
			t.Fatal(err)
		}
	}
	for i := sessions - locked; i < sessions; i++ {
		if _, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, SessionID: name(i), Duration: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, SessionID: "big", Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.LeaseSession(ctx, &store.LeaseSessionParams{
		SessionParams: store.SessionParams{Queue: q, SessionID: "big", Token: l.Token}, Max: big}); err != nil || len(got) != big {
		t.Fatalf("LeaseSession: %d, %v", len(got), err)
	}

	db := analyzedMariaDB(t, dsn, "sluice_messages, sluice_sessions")
	qs := namedQueries(t)
	now := time.Now().UnixMilli()
	const free, limit = sessions - locked, 16
	for _, c := range []struct {
		name   string
		args   []any
		tables []string
		max    int
	}{
		// The free sessions, each read from the index and then locked.
		{"SelectSessionCandidates", []any{tenant.Service, tenant.Provider, q, now, limit}, []string{"sluice_sessions", "s"}, 2*free + 2},
		{"HasReadySessionMessage", []any{tenant.Service, tenant.Provider, q, "big", now}, []string{"sluice_messages"}, 2},
		{"SelectSessionReady", []any{tenant.Service, tenant.Provider, q, "big", now, limit}, []string{"sluice_messages"}, limit + 2},
		// Nothing is due: the due index's range is empty, the session's
		// leased messages are not read; nor is anything of the session
		// scheduled: its range for state 2 is empty too.
		{"FirstSessionDue", []any{tenant.Service, tenant.Provider, q, "big", now, tenant.Service, tenant.Provider, q, "big", now},
			[]string{"sluice_messages"}, 2},
		{"SelectSessionReady", []any{tenant.Service, tenant.Provider, q, name(0), now, limit}, []string{"sluice_messages"}, 2},
	} {
		read := rowsReadOf(t, db, qs[c.name], c.args, c.tables...)
		t.Logf("%s read %d rows", c.name, read)
		if read > c.max {
			t.Errorf("%s read %d rows of %s with %d of %d sessions locked and %d messages of a session leased; want at most %d",
				c.name, read, c.tables[0], locked, sessions, big, c.max)
		}
	}
}
