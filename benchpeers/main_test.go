package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// smokeArgs run every case but the 8-producer and 8-consumer repeats of
// queue sends and consumes (the code of the 1-producer and 1-consumer
// ones) in a fraction of a second a system.
var smokeArgs = []string{"--runs", "1", "--duration", "150ms", "--backlog", "300", "--locked", "300", "--samples", "3", "--rate", "200",
	"--cases", "send-1,send-batch-100,consume-1,consume-processor-1,send-to-handler,receive-locked,publish-1,publish-100,stream-consume-1,stream-consume-8,publish-to-handler"}

// TestEmbeddedSystems runs every case against the systems that need no
// server: sluice and goqite on SQLite, the raw SQLite table, and JetStream
// with and without fsync.
func TestEmbeddedSystems(t *testing.T) {
	t.Parallel()
	testSystems(t, "", []string{"sluice-sqlite", "goqite", "raw-sqlite", "jetstream-fsync", "jetstream"})
}

// TestPostgresSystems runs every case against sluice, River, Watermill
// and the raw table on PostgreSQL ($SLUICE_TEST_POSTGRES).
func TestPostgresSystems(t *testing.T) {
	t.Parallel()
	pg := os.Getenv("SLUICE_TEST_POSTGRES")
	if pg == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SLUICE_TEST_POSTGRES is unset on CI")
		}
		t.Skip("SLUICE_TEST_POSTGRES is unset: set it to a PostgreSQL DSN to run River, Watermill and sluice on PostgreSQL")
	}
	testSystems(t, pg, []string{"sluice", "river", "watermill", "raw-postgres"})
}

// testSystems runs every case for syss and checks that each row of the
// output is a positive figure, or "-" where a system has no counterpart
// of the case, and that every system has figures.
func testSystems(t *testing.T, pg string, syss []string) {
	var out, log bytes.Buffer
	args := append(slices.Clone(smokeArgs), "--pg", pg, "--systems", strings.Join(syss, ","))
	if rc := run(context.Background(), args, &out, &log); rc != 0 {
		t.Fatalf("benchpeers %v: exit %d\n%s\n%s", args, rc, out.String(), log.String())
	}
	// The systems without a counterpart of a case.
	skips := map[string]bool{"goqite receive-locked": true, "sluice-sqlite stream-consume-8": true}
	figures := map[string]int{}
	var kase string
	for _, line := range strings.Split(out.String(), "\n") {
		if title, ok := strings.CutPrefix(line, "### "); ok {
			kase = title[strings.LastIndex(title, "(")+1 : len(title)-1]
		}
		cols := strings.Split(line, "|")
		if len(cols) < 4 || !slices.Contains(syss, strings.TrimSpace(cols[1])) {
			continue
		}
		name, value := strings.TrimSpace(cols[1]), strings.TrimSpace(cols[3])
		if skips[name+" "+kase] {
			if value != "-" {
				t.Errorf("%s in %s: %q, want - (no counterpart)", name, kase, value)
			}
			continue
		}
		first, _, _ := strings.Cut(value, " ")
		if v, err := strconv.ParseFloat(strings.ReplaceAll(first, ",", ""), 64); err != nil || v <= 0 {
			t.Errorf("row %q: want a positive figure", line)
		}
		figures[name]++
	}
	for _, s := range syss {
		if figures[s] < 4 {
			t.Errorf("%s has figures in %d tables, want 4 or more:\n%s", s, figures[s], out.String())
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Log(out.String())
	}
}
