package engine

import (
	"strings"
	"testing"
	"testing/fstest"
)

func allQueries(extra string) fstest.MapFS {
	var b strings.Builder
	for _, n := range queryNames {
		b.WriteString("-- name: " + n + "\n-- a comment\nSELECT 1;\n\n")
	}
	b.WriteString("-- name: InsertMessages\nSELECT 1;\n\n")
	b.WriteString("-- name: InsertRecords\nSELECT 1;\n\n")
	b.WriteString(extra)
	return fstest.MapFS{"q.sql": {Data: []byte(b.String())}}
}

func TestParseQueries(t *testing.T) {
	q, err := ParseQueries(allQueries("-- name: Notify\nSELECT\n  2;\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := q["Notify"]; got != "SELECT\n  2" {
		t.Errorf("Notify = %q, want the body without comments or ';'", got)
	}
	for _, bad := range []struct{ name, extra, want string }{
		{"unknown", "-- name: Frobnicate\nSELECT 1;\n", "unknown"},
		{"twice", "-- name: Now\nSELECT 1;\n", "twice"},
		{"empty", "-- name: Notify\n-- only a comment\n", "empty"},
	} {
		if _, err := ParseQueries(allQueries(bad.extra)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", bad.name, err, bad.want)
		}
	}
	if _, err := ParseQueries(fstest.MapFS{"q.sql": {Data: []byte("-- name: Now\nSELECT 1;\n")}}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing queries: err = %v", err)
	}
}

func TestParseMigrations(t *testing.T) {
	m, err := parseMigrations(fstest.MapFS{
		"0002_more.sql": {Data: []byte("-- c\nCREATE INDEX i ON t (a);\n")},
		"0001_init.sql": {Data: []byte("CREATE TABLE t (\n  a INT\n);\n\n-- x\nCREATE TABLE u (b INT);\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m[0].version != 1 || m[1].version != 2 || len(m[0].statements) != 2 {
		t.Fatalf("migrations = %+v", m)
	}
	for name, data := range map[string]string{
		"x_init.sql": "SELECT 1;\n",
		"0001_a.sql": "SELECT 1\n",
	} {
		if _, err := parseMigrations(fstest.MapFS{name: {Data: []byte(data)}}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := parseMigrations(fstest.MapFS{"0001_a.sql": {Data: []byte("SELECT 1;\n")}, "0001_b.sql": {Data: []byte("SELECT 1;\n")}}); err == nil {
		t.Error("duplicate versions: no error")
	}
}

func TestChunks(t *testing.T) {
	sizes := []int{maxChunkBytes / 2, maxChunkBytes / 2, 1, maxChunkBytes * 3, 5}
	got := chunks(len(sizes), func(i int) int { return sizes[i] })
	want := [][2]int{{0, 2}, {2, 3}, {3, 4}, {4, 5}}
	if len(got) != len(want) {
		t.Fatalf("chunks = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("chunks = %v, want %v", got, want)
		}
	}
	if got := chunks(maxChunkRows+1, func(int) int { return 1 }); len(got) != 2 || got[0] != [2]int{0, maxChunkRows} {
		t.Errorf("row bound: %v", got)
	}
}
