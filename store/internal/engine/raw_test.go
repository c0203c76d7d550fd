package engine_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/mysql"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/sqlite"
)

// rawBackend is what the raw-insert benchmark finds on a backend.
type rawBackend interface {
	store.Backend
	RawSetup(ctx context.Context) error
	RawMethod(rows int) string
	RawInsert(ctx context.Context, payloads [][]byte) error
	RawInsertNaive(ctx context.Context, payloads [][]byte) error
	RawTeardown(ctx context.Context) error
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// openRaw opens a backend of a kind on a database of the test's own.
func openRaw(t *testing.T, kind string) rawBackend {
	t.Helper()
	ctx := t.Context()
	var (
		b   store.Backend
		err error
	)
	switch kind {
	case "sqlite":
		b, err = sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "raw.db"), Synchronous: "NORMAL"})
	case "postgres", "mysql":
		open := testdb.Postgres
		if kind == "mysql" {
			open = testdb.MySQL
		}
		dsn, drop, derr := open(ctx)
		testdb.Check(t, derr)
		t.Cleanup(func() {
			if err := drop(); err != nil {
				t.Errorf("drop %s test database: %v", kind, err)
			}
		})
		if kind == "mysql" {
			b, err = mysql.Open(ctx, mysql.Config{DSN: dsn})
		} else {
			b, err = postgres.Open(ctx, postgres.Config{DSN: dsn})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	raw, ok := b.(rawBackend)
	if !ok {
		t.Fatalf("the %s backend (%T) has no raw-insert methods", kind, b)
	}
	return raw
}

// TestRawInsertStoresEveryRow commits transactions of several sizes
// with RawInsert and RawInsertNaive on each backend and reads the table
// back: every row is there once, in order, with its payload intact. The
// sizes cross each way of committing (one statement, COPY or multi-row
// VALUES) and the chunk bounds of multi-row statements, by rows (500) and
// by bytes (2 MiB).
func TestRawInsertStoresEveryRow(t *testing.T) {
	t.Parallel()
	wantMethod := map[string]string{"sqlite": "values", "postgres": "copy", "mysql": "values"}
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			raw := openRaw(t, kind)
			if m := raw.RawMethod(1); m != "insert" {
				t.Errorf("RawMethod(1) = %q, want insert", m)
			}
			if m := raw.RawMethod(100); m != wantMethod[kind] {
				t.Errorf("RawMethod(100) = %q, want %q", m, wantMethod[kind])
			}
			if err := raw.RawSetup(ctx); err != nil {
				t.Fatal(err)
			}
			var want [][]byte
			insert := func(name string, f func(context.Context, [][]byte) error, rows, size int) {
				batch := make([][]byte, rows)
				for i := range batch {
					// Each payload names its row, so a lost, repeated or
					// reordered row shows.
					p := bytes.Repeat([]byte{byte(len(want) + i)}, size)
					binary.BigEndian.PutUint32(p, uint32(len(want)+i))
					batch[i] = p
				}
				if err := f(ctx, batch); err != nil {
					t.Fatalf("%s of %d rows of %d bytes: %v", name, rows, size, err)
				}
				want = append(want, batch...)
			}
			for _, c := range []struct{ rows, size int }{{1, 1024}, {2, 1024}, {100, 1024}, {1201, 16}, {24, 128 << 10}} {
				insert("RawInsert", raw.RawInsert, c.rows, c.size)
			}
			insert("RawInsertNaive", raw.RawInsertNaive, 1, 1024)
			insert("RawInsertNaive", raw.RawInsertNaive, 100, 1024)
			got := readRaw(t, raw)
			if len(got) != len(want) {
				t.Fatalf("the table holds %d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("row %d holds %d bytes starting %s, want %d bytes starting %s",
						i, len(got[i]), head(got[i]), len(want[i]), head(want[i]))
				}
			}
			if err := raw.RawTeardown(ctx); err != nil {
				t.Fatal(err)
			}
			// Setup after a teardown starts afresh (the multi-row
			// statements are prepared again on the new table).
			if err := raw.RawSetup(ctx); err != nil {
				t.Fatal(err)
			}
			want = nil
			insert("RawInsert", raw.RawInsert, 100, 1024)
			if got := readRaw(t, raw); len(got) != 100 {
				t.Fatalf("after a new setup the table holds %d rows, want 100", len(got))
			}
			if err := raw.RawTeardown(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// readRaw returns the raw table's payloads in insertion order.
func readRaw(t *testing.T, raw rawBackend) [][]byte {
	t.Helper()
	tx, err := raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(t.Context(), "SELECT payload FROM sluice_bench_raw ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func head(p []byte) string { return fmt.Sprintf("%x", p[:min(len(p), 8)]) }
