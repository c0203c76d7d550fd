package mysql

import (
	"database/sql"
	"io/fs"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/store/internal/engine"
)

// namedQueries reads the embedded queries by name, as the engine does.
func namedQueries(t *testing.T) map[string]string {
	t.Helper()
	sub, err := fs.Sub(queries, "queries")
	if err != nil {
		t.Fatal(err)
	}
	q, err := engine.ParseQueries(sub)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestLocksStayInBounds checks that the statements that lock rows lock
// only the rows they take: a row of another queue, or a row of the same
// queue that the statement does not name, stays free for a leaser that
// skips locked rows. (A locking range scan in index order holds the first
// row past its range until commit, and a list matched by scanning the
// queue holds every row of the queue.)
func TestLocksStayInBounds(t *testing.T) {
	dsn := freshDatabase(t)
	openBackend(t, dsn).Close()
	db := rawDB(t, dsn)
	ctx := t.Context()
	// Queue a: one leased row due at 100, one scheduled at 300, one ready
	// row that expired at 50 (the first three of session 1), and a row of
	// session 2 leased until 900. Queue b, next in every index: ready rows
	// without a session.
	if _, err := db.ExecContext(ctx, `INSERT INTO sluice_messages
		(service, provider, queue, seq, state, visible_at, expires_at, lock_token, delivery_count, enqueued_at, session_id, payload) VALUES
		('s', 'p', 'a', 1, 1, 100, NULL, 7, 1, 1, '1', 'x'),
		('s', 'p', 'a', 2, 2, 300, NULL, NULL, 0, 1, '1', 'x'),
		('s', 'p', 'a', 3, 0, NULL, 50, NULL, 0, 1, '1', 'x'),
		('s', 'p', 'a', 4, 1, 900, NULL, 8, 1, 1, '2', 'x'),
		('s', 'p', 'b', 1, 0, NULL, NULL, NULL, 0, 1, NULL, 'x'),
		('s', 'p', 'b', 2, 0, NULL, NULL, NULL, 0, 1, NULL, 'x')`); err != nil {
		t.Fatal(err)
	}
	// Sessions of queue a: 1 free, 2 locked until 900, 3 inactive. Queue
	// b, next in every index: a free session.
	if _, err := db.ExecContext(ctx, `INSERT INTO sluice_sessions
		(service, provider, queue, session_id, active, lock_token, lock_until) VALUES
		('s', 'p', 'a', '1', 1, NULL, 0),
		('s', 'p', 'a', '2', 1, 8, 900),
		('s', 'p', 'a', '3', 0, NULL, 0),
		('s', 'p', 'b', '1', 1, NULL, 0)`); err != nil {
		t.Fatal(err)
	}
	// Dead letters of queue a: 1 due for removal at 100, 2 and 4 received
	// (locked until 900), 3 free. Queue b, next in every index: a free one.
	if _, err := db.ExecContext(ctx, `INSERT INTO sluice_dead_letters
		(service, provider, queue, seq, delivery_count, enqueued_at, payload, reason, description, dead_at, remove_at, lock_token, locked_until) VALUES
		('s', 'p', 'a', 1, 1, 1, 'x', 'r', 'd', 1, 100, NULL, 0),
		('s', 'p', 'a', 2, 1, 1, 'x', 'r', 'd', 1, NULL, 8, 900),
		('s', 'p', 'a', 3, 1, 1, 'x', 'r', 'd', 1, NULL, NULL, 0),
		('s', 'p', 'a', 4, 1, 1, 'x', 'r', 'd', 1, NULL, 8, 900),
		('s', 'p', 'b', 1, 1, 1, 'x', 'r', 'd', 1, NULL, NULL, 0)`); err != nil {
		t.Fatal(err)
	}
	q := namedQueries(t)
	free := func(tx *sql.Tx, table, queue string) []int64 {
		t.Helper()
		key := "seq"
		if table == "sluice_sessions" {
			key = "session_id" // numbers in this test
		}
		rows, err := tx.QueryContext(ctx, "SELECT "+key+" FROM "+table+
			" WHERE service = 's' AND provider = 'p' AND queue = ? ORDER BY "+key+" FOR UPDATE SKIP LOCKED", queue)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var s int64
			rows.Scan(&s)
			out = append(out, s)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		args  []any
		table string
		queue string
		want  []int64 // free rows of queue in table while the statement's transaction is open
	}{
		{"SelectDue", []any{"s", "p", "a", 200, 10}, "sluice_messages", "b", []int64{1, 2}},
		{"SelectDue", []any{"s", "p", "a", 200, 10}, "sluice_messages", "a", []int64{2, 3, 4}},
		{"SelectExpired", []any{"s", "p", "a", 200, 200, 10}, "sluice_messages", "b", []int64{1, 2}},
		{"SelectRemovableDeadLetters", []any{"s", "p", "a", 200, 10}, "sluice_dead_letters", "b", []int64{1}},
		{"SelectReady", []any{"s", "p", "a", 200, 10}, "sluice_messages", "b", []int64{1, 2}},
		{"SelectHeld", []any{"s", "p", "a", 200, "[4]"}, "sluice_messages", "a", []int64{1, 2, 3}},
		{"MakeReady", []any{"s", "p", "a", "[1]"}, "sluice_messages", "a", []int64{2, 3, 4}},
		{"LeaseMessages", []any{"s", "p", "a", `[{"s":3,"t":9,"u":500}]`}, "sluice_messages", "a", []int64{1, 2, 4}},
		{"DeleteMessages", []any{"s", "p", "a", "[2]"}, "sluice_messages", "a", []int64{1, 3, 4}},
		{"LockDeadLetters", []any{"s", "p", "b", "[1]"}, "sluice_dead_letters", "a", []int64{1, 2, 3, 4}},
		// Receiving dead letters. The held dead letters the lease passes
		// over (2, and 4, where the walk ends) stay free, and so does the
		// next queue's first.
		{"SelectDeadLetterReady", []any{"s", "p", "a", 200, 10}, "sluice_dead_letters", "a", []int64{2, 4}},
		{"SelectDeadLetterReady", []any{"s", "p", "a", 200, 10}, "sluice_dead_letters", "b", []int64{1}},
		{"SelectDeadLetterReady", []any{"s", "p", "a", 200, 1}, "sluice_dead_letters", "a", []int64{2, 3, 4}},
		{"SelectDeadLetterReady", []any{"s", "p", "a", 1000, 10}, "sluice_dead_letters", "b", []int64{1}},
		{"LockDeadLetterRows", []any{9, 2000, "s", "p", "a", "[3]"}, "sluice_dead_letters", "a", []int64{1, 2, 4}},
		// Dead letter 1, named but not held, is refused and unlocked.
		// (MariaDB keeps the last named row the filter refuses locked until
		// commit, as in SelectHeld: a row the statement names.)
		{"SelectHeldDeadLetters", []any{"s", "p", "a", 200, "[1,2]"}, "sluice_dead_letters", "a", []int64{1, 3, 4}},
		{"SelectHeldDeadLetters", []any{"s", "p", "a", 1000, "[2,3]"}, "sluice_dead_letters", "b", []int64{1}},
		{"UnlockDeadLetters", []any{"s", "p", "a", "[2]"}, "sluice_dead_letters", "a", []int64{1, 3, 4}},
		{"ExtendDeadLetters", []any{2000, "s", "p", "a", "[2]"}, "sluice_dead_letters", "a", []int64{1, 3, 4}},
		{"ExtendDeadLetters", []any{2000, "s", "p", "b", "[1]"}, "sluice_dead_letters", "a", []int64{1, 2, 3, 4}},
		// Sessions.
		{"SelectSessionCandidates", []any{"s", "p", "a", 200, 10}, "sluice_sessions", "a", []int64{2, 3}},
		{"SelectSessionCandidates", []any{"s", "p", "a", 1000, 10}, "sluice_sessions", "b", []int64{1}},
		{"HasReadySessionMessage", []any{"s", "p", "a", "1", 20}, "sluice_messages", "a", []int64{1, 2, 3, 4}},
		{"SelectSessionReady", []any{"s", "p", "a", "1", 20, 10}, "sluice_messages", "a", []int64{1, 2, 4}},
		// Row 3, the session's ready row that expired, is read through the
		// session index and refused by the expiry filter; MariaDB keeps such
		// a row locked until commit (as SelectReady does), though not a row
		// of another session or queue.
		{"SelectSessionReady", []any{"s", "p", "a", "1", 200, 10}, "sluice_messages", "a", []int64{1, 2, 4}},
		{"SelectSessionReady", []any{"s", "p", "a", "3", 20, 10}, "sluice_messages", "a", []int64{1, 2, 3, 4}},
		{"SelectSessionReady", []any{"s", "p", "a", "9", 20, 10}, "sluice_messages", "b", []int64{1, 2}},
		{"ExtendSessionMessages", []any{500, "s", "p", "a", "1", 7}, "sluice_messages", "a", []int64{2, 3, 4}},
		{"ExtendSessionMessages", []any{500, "s", "p", "a", "2", 8}, "sluice_messages", "b", []int64{1, 2}},
		{"ReleaseSessionMessages", []any{"s", "p", "a", "2", 8}, "sluice_messages", "a", []int64{1, 2, 3}},
		{"ReleaseSessionMessages", []any{"s", "p", "a", "2", 8}, "sluice_messages", "b", []int64{1, 2}},
		{"ActivateSessions", []any{"s", "p", "a", "[3]"}, "sluice_sessions", "a", []int64{2, 3}},
		{"ActivateSessions", []any{"s", "p", "a", "[3]"}, "sluice_sessions", "b", []int64{1}},
		{"EnsureSession", []any{"s", "p", "a", "4"}, "sluice_sessions", "a", []int64{1, 2, 3}},
		{"SelectSessionLock", []any{"s", "p", "a", "2"}, "sluice_sessions", "a", []int64{1, 3}},
		{"LockSession", []any{9, 2000, "s", "p", "a", "1", 200}, "sluice_sessions", "a", []int64{2, 3}},
		{"LockSession", []any{9, 2000, "s", "p", "a", "2", 200}, "sluice_sessions", "a", []int64{1, 2, 3}},
		{"DeactivateSession", []any{"s", "p", "a", "1"}, "sluice_sessions", "a", []int64{2, 3}},
		{"ReleaseSession", []any{"s", "p", "a", "2", 8}, "sluice_sessions", "b", []int64{1}},
	} {
		holder, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.ExecContext(ctx, q[tc.name], tc.args...); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		probe, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := free(probe, tc.table, tc.queue); !slices.Equal(got, tc.want) {
			t.Errorf("while %s holds its rows, free rows of queue %s in %s: %v, want %v", tc.name, tc.queue, tc.table, got, tc.want)
		}
		probe.Rollback()
		holder.Rollback()
	}
}
