package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Eviction deletes the rows of sessions that hold nothing: a queue that
// uses a new session id per unit of work does not grow without bound.
func TestSessionRowsTrimmed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	b := open(t, path)
	st, err := b.Store(store.Tenant{Service: "s", Provider: "p"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: "q", RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		id := "unit-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: "q", Messages: []store.NewMessage{{SessionID: id, Payload: []byte("x")}}}); err != nil {
			t.Fatal(err)
		}
		l, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: "q", Duration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		p := store.SessionParams{Queue: "q", SessionID: l.SessionID, Token: l.Token}
		ls, err := st.LeaseSession(ctx, &store.LeaseSessionParams{SessionParams: p, Max: 1})
		if err != nil || len(ls) != 1 {
			t.Fatalf("lease: %v, %v", ls, err)
		}
		if _, err := st.Settle(ctx, &store.SettleParams{Queue: "q", Action: store.Complete, Receipts: []sluicetype.Receipt{ls[0].Receipt}}); err != nil {
			t.Fatal(err)
		}
		if err := st.ReleaseSession(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	// An accept finds them all empty and clears their flags; eviction
	// then deletes them.
	if _, err := st.AcceptSession(ctx, &store.AcceptSessionParams{Queue: "q", Duration: time.Minute}); err == nil {
		t.Fatal("accepted a session with nothing left")
	}
	rows := func() int {
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var c int
		if err := db.QueryRow("SELECT COUNT(*) FROM sluice_sessions").Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if got := rows(); got != n {
		t.Fatalf("%d session rows before eviction, want %d", got, n)
	}
	if _, err := st.(store.Evicter).Evict(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != 0 {
		t.Fatalf("%d session rows after eviction, want 0", got)
	}
}
