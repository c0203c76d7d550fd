package engine

import "testing"

// TestValuesRows checks how a single-row INSERT becomes a multi-row one:
// its VALUES row repeated, and refusals for what cannot be repeated
// safely (numbered or named placeholders, no VALUES, no rows).
func TestValuesRows(t *testing.T) {
	const insert = "INSERT INTO sluice_bench_raw (payload) VALUES (?)"
	for _, c := range []struct {
		insert string
		n      int
		want   string
	}{
		{insert, 1, "INSERT INTO sluice_bench_raw (payload) VALUES (?)"},
		{insert, 3, "INSERT INTO sluice_bench_raw (payload) VALUES (?), (?), (?)"},
		{"INSERT INTO t (a, b) values (?, ?)\n", 2, "INSERT INTO t (a, b) values (?, ?), (?, ?)"},
	} {
		got, err := valuesRows(c.insert, c.n)
		if err != nil || got != c.want {
			t.Errorf("valuesRows(%q, %d) = %q, %v; want %q", c.insert, c.n, got, err, c.want)
		}
	}
	for _, c := range []struct {
		insert string
		n      int
	}{
		{insert, 0},
		{insert, -1},
		{"INSERT INTO sluice_bench_raw (payload) VALUES (?1)", 2},
		{"INSERT INTO sluice_bench_raw (payload) VALUES ($1)", 2},
		{"INSERT INTO sluice_bench_raw (payload) VALUES (:p)", 2},
		{"INSERT INTO sluice_bench_raw (payload) SELECT ?", 2},
		{"INSERT INTO sluice_bench_raw (payload) VALUES (?) RETURNING id", 2},
	} {
		if got, err := valuesRows(c.insert, c.n); err == nil {
			t.Errorf("valuesRows(%q, %d) = %q, want an error", c.insert, c.n, got)
		}
	}
}
