package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
)

// TestMain runs the node processes the cluster scenario starts from this
// test binary.
// TestMain keeps the tests off the machine's own settings: contexts in a
// directory of their own, no SLUICE_* variable saying where commands
// work, and no server probed at sluice serve's default address (a test
// that wants one says so).
func TestMain(m *testing.M) {
	if os.Getenv(benchNodeEnv) == "1" {
		os.Exit(Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "sluice-cli-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("SLUICE_CONFIG_DIR", dir)
	for _, v := range []string{"SLUICE_SERVER", "SLUICE_TOKEN", "SLUICE_DB", "SLUICE_SERVICE", "SLUICE_PROVIDER", "SLUICE_CONTEXT"} {
		os.Unsetenv(v)
	}
	localServer = func(context.Context) (string, bool) { return "", false }
	code := m.Run()
	if msg := untried(); code == 0 && msg != "" {
		fmt.Fprintln(os.Stderr, "FAIL:", msg)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDemo(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "demo", "--db", filepath.Join(t.TempDir(), "demo.db"))
	if code != ExitOK {
		t.Fatalf("demo exited %d: %s", code, errOut)
	}
	for _, want := range []string{
		"sequence numbers [1 2 3]",
		"again with the same receipt: message 1: lock lost",
		"dead-lettered #2 with reason OutOfStock",
		"reason=MaxDeliveryCountExceeded",
		"resubmitted #2 as new message #4",
		"appended 3 records at positions 1..3",
		"shipping got orders/order-1",
		"shipping got orders/order-2",
		"done.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	if code, _, _ := run(t); code != ExitUsage {
		t.Errorf("no command: exit %d, want %d", code, ExitUsage)
	}
	if code, _, errOut := run(t, "frobnicate"); code != ExitUsage || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := run(t, "bench", "--scenario", "nope"); code != ExitUsage || !strings.Contains(errOut, "unknown or missing --scenario") {
		t.Errorf("unknown scenario: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := run(t, "bench", "--db", "redis://x", "--scenario", "enqueue"); code != ExitError || !strings.Contains(errOut, "unknown database scheme") {
		t.Errorf("unknown scheme: exit %d, stderr %q", code, errOut)
	}
}

// TestBenchScenarios runs every scenario briefly on SQLite and checks the
// JSON lines scripts rely on.
func TestBenchScenarios(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bench.db")
	for name := range scenarios {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(t, "bench", "--db", db, "--scenario", name, "--json",
				"--duration", "300ms", "--messages", "500", "--inflight", "300", "--sqlite-synchronous", "NORMAL",
				"--sessions", "200", "--locked", "190", "--scheduled", "400")
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			// Scenarios that compare two levels print one line for each.
			levels := map[string]struct {
				key    string
				values []int
			}{
				"backlog":                 {"inflight", []int{0, 300}},
				"session-accept":          {"locked", []int{0, 190}},
				"receive-among-scheduled": {"scheduled", []int{0, 400}},
				"topic-fanout":            {"subscriptions", []int{0, 10}},
			}
			want := 1
			if _, ok := levels[name]; ok || name == "stream-lagging" {
				want = 2 // stream-lagging: the no-lag run, then the lagging one
			}
			transports := []string{"library", "connect-proto", "connect-json", "grpc"}
			switch name {
			case "api":
				want = 3 * len(transports) // a send line and two receive lines each
			case "api-stream":
				want = len(transports)
			}
			if len(lines) != want {
				t.Fatalf("%d result lines, want %d:\n%s", len(lines), want, out)
			}
			for i, line := range lines {
				var r map[string]any
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				if r["scenario"] != name || r["backend"] != "sqlite" {
					t.Errorf("scenario/backend = %v/%v", r["scenario"], r["backend"])
				}
				keys := []string{"msgs_per_sec", "p50_ms", "p99_ms"}
				switch name {
				case "stream-backlog":
					keys = append(keys, "peak_rss_mib", "cache_budget_mib")
				case "stream-e2e", "api-stream":
					keys = append(keys, "publish_p50_ms", "publish_p99_ms")
				case "cluster":
					keys = append(keys, "nodes")
				case "stream-lagging":
					keys = append(keys, "peak_rss_mib", "cache_budget_records")
				}
				for _, k := range keys {
					if v, ok := r[k].(float64); !ok || v <= 0 {
						t.Errorf("%s = %v, want a positive number", k, r[k])
					}
				}
				if name == "api" && r["transport"] != transports[i/3] {
					t.Errorf("line %d transport = %v, want %s", i, r["transport"], transports[i/3])
				}
				if name == "api-stream" && r["transport"] != transports[i] {
					t.Errorf("line %d transport = %v, want %s", i, r["transport"], transports[i])
				}
				if name == "api" && i%3 == 2 && !strings.Contains(r["note"].(string), "CompleteBatch") {
					t.Errorf("line %d note = %v, want the CompleteBatch round", i, r["note"])
				}
				// raw-insert commits its one row (--batch 1) by one
				// statement; the naive form says so.
				if m, ok := map[string]string{"raw-insert": "insert", "raw-insert-naive": "naive"}[name]; ok && r["method"] != m {
					t.Errorf("method = %v, want %s", r["method"], m)
				}
				if (name == "enqueue" || name == "lease-settle" || name == "e2e") && r["queues"] != 1.0 {
					t.Errorf("queues = %v, want 1", r["queues"])
				}
				if l, ok := levels[name]; ok {
					// Every level, 0 included, is in the JSON.
					got, ok := r[l.key].(float64)
					if want := float64(l.values[i]); !ok || got != want {
						t.Errorf("line %d %s = %v, want %v", i, l.key, r[l.key], want)
					}
				}
			}
		})
	}
}

// TestBenchQueuesAndBatches runs the queue scenarios on three queues,
// and the raw-insert scenarios with rows of ten, briefly on SQLite: each
// reports what it ran and measured something.
func TestBenchQueuesAndBatches(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		want map[string]any
	}{
		{"enqueue", []string{"--queues", "3", "--producers", "1"}, map[string]any{"queues": 3.0, "producers": 1.0}},
		{"lease-settle", []string{"--queues", "3", "--consumers", "1", "--messages", "200"}, map[string]any{"queues": 3.0, "consumers": 1.0}},
		{"e2e", []string{"--queues", "3", "--producers", "1", "--consumers", "1"}, map[string]any{"queues": 3.0, "producers": 1.0, "consumers": 1.0}},
		{"raw-insert", []string{"--batch", "10", "--clients", "2"}, map[string]any{"method": "values", "batch": 10.0, "clients": 2.0}},
		{"raw-insert-naive", []string{"--batch", "10", "--clients", "2"}, map[string]any{"method": "naive", "batch": 10.0, "clients": 2.0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"bench", "--db", filepath.Join(t.TempDir(), "bench.db"), "--scenario", c.name, "--json",
				"--duration", "200ms", "--sqlite-synchronous", "NORMAL"}, c.args...)
			code, out, errOut := run(t, args...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var r map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
				t.Fatalf("output %q: %v", out, err)
			}
			for k, v := range c.want {
				if r[k] != v {
					t.Errorf("%s = %v, want %v", k, r[k], v)
				}
			}
			if v, ok := r["msgs_per_sec"].(float64); !ok || v <= 0 {
				t.Errorf("msgs_per_sec = %v, want a positive number", r["msgs_per_sec"])
			}
			count, _ := r["count"].(float64)
			// Every queue's worker made one call at least, however
			// loaded the machine.
			switch c.name {
			case "enqueue", "e2e":
				if count < 3 {
					t.Errorf("count = %v, want 3 or more (a send to each queue, and for e2e its completion)", count)
				}
			case "lease-settle":
				if count < 3 || count > 600 {
					t.Errorf("count = %v, want 3 to 600 (a lease from each queue, at most the 3 x 200 pre-loaded)", count)
				}
			case "raw-insert", "raw-insert-naive":
				if count < 20 || int(count)%10 != 0 {
					t.Errorf("count = %v, want a multiple of 10 of at least 20 (a transaction of 10 rows a client)", count)
				}
			}
		})
	}
	// Zero queues, or rows of none, are refused.
	for _, args := range [][]string{{"--scenario", "enqueue", "--queues", "0"}, {"--scenario", "raw-insert", "--batch", "0"}} {
		code, _, errOut := run(t, append([]string{"bench", "--db", filepath.Join(t.TempDir(), "bench.db"), "--duration", "100ms"}, args...)...)
		if code == ExitOK {
			t.Errorf("bench %v: exit %d, want an error", args, code)
		}
		if !strings.Contains(errOut, strings.TrimPrefix(args[2], "--")) {
			t.Errorf("bench %v: stderr %q does not name %s", args, errOut, args[2])
		}
	}
}

// bench --scenario api --server drives a running server with a token:
// only the API's transports run, each a send line and two receive lines.
func TestBenchAgainstServer(t *testing.T) {
	t.Parallel()
	const token = "bench-token-0123456789"
	url := startServer(t, server.Key{Name: "bench", Token: token, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}})
	code, out, errOut := run(t, "bench", "--db", filepath.Join(t.TempDir(), "bench.db"), "--scenario", "api", "--server", url,
		"--token", token, "--json", "--duration", "300ms")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	transports := []string{"connect-proto", "connect-json", "grpc"}
	if len(lines) != 3*len(transports) {
		t.Fatalf("%d result lines, want %d:\n%s", len(lines), 3*len(transports), out)
	}
	for i, line := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r["transport"] != transports[i/3] {
			t.Errorf("line %d transport = %v, want %s", i, r["transport"], transports[i/3])
		}
		if v, ok := r["msgs_per_sec"].(float64); !ok || v <= 0 {
			t.Errorf("line %d msgs_per_sec = %v", i, r["msgs_per_sec"])
		}
	}
}

// TestBenchStreamLagging runs stream-lagging briefly in each --lag mode
// on SQLite: the figures the targets are read from are in the
// JSON, and fast got every event in both runs.
func TestBenchStreamLagging(t *testing.T) {
	t.Parallel()
	for _, mode := range lagModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "bench.db")
			// 64 records a partition, 16 partitions: 1,200 events fill the
			// caches about once, enough for lagging windows to split off.
			code, out, errOut := run(t, "bench", "--db", db, "--scenario", "stream-lagging", "--lag", mode, "--json",
				"--cache-records", "64", "--messages", "1200", "--rate", "4000", "--sqlite-synchronous", "NORMAL")
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 {
				t.Fatalf("%d result lines, want 2:\n%s", len(lines), out)
			}
			for i, line := range lines {
				var r map[string]any
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				wantLag := []string{"none", mode}[i]
				if r["lag"] != wantLag || r["cache_records"] != 64.0 || r["cache_budget_records"] != 64.0*16 {
					t.Errorf("line %d: lag %v, cache_records %v, cache_budget_records %v; want %s, 64, 1024",
						i, r["lag"], r["cache_records"], r["cache_budget_records"], wantLag)
				}
				if r["count"] != 1200.0 || r["published"] != 1200.0 {
					t.Errorf("line %d: fast got %v of %v events, want 1200 of 1200", i, r["count"], r["published"])
				}
				keys := []string{"msgs_per_sec", "p50_ms", "p99_ms", "peak_rss_mib", "peak_cached_records"}
				if i == 1 {
					keys = append(keys, "msgs_per_sec_ratio", "p99_ratio", "lag_walked_records")
					if r["lag_caught_up"] != true {
						t.Errorf("lag_caught_up = %v, want true", r["lag_caught_up"])
					}
					// lag walked every event published in the run (and
					// the history, for replay) once released.
					walked := 1200.0
					if mode == "replay" {
						walked = 2400
					}
					if r["lag_walked_records"] != walked {
						t.Errorf("lag_walked_records = %v, want %v", r["lag_walked_records"], walked)
					}
					for _, k := range []string{"rehydrated_records", "rehydration_reads", "lag_needed_records", "splits", "merges"} {
						if _, ok := r[k].(float64); !ok {
							t.Errorf("%s = %v, want a number", k, r[k])
						}
					}
				}
				for _, k := range keys {
					if v, ok := r[k].(float64); !ok || v <= 0 {
						t.Errorf("line %d: %s = %v, want a positive number", i, k, r[k])
					}
				}
				if peak, ok := r["peak_partition_cached_records"].(float64); !ok || peak > 64 {
					t.Errorf("line %d: a partition's cache held %v records at its peak, want at most 64", i, r["peak_partition_cached_records"])
				}
			}
		})
	}
}

// TestBenchStreamLaggingFlags: stream-lagging refuses what it cannot
// run.
func TestBenchStreamLaggingFlags(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bench.db")
	for _, args := range [][]string{
		{"--lag", "sideways"},
		{"--lag", "slow", "--rate", "0"},
		{"--cache-records", "0"},
		{"--cache-windows", "65"},
		{"--messages", "0"},
	} {
		code, _, errOut := run(t, append([]string{"bench", "--db", db, "--scenario", "stream-lagging"}, args...)...)
		if code != ExitUsage || !strings.Contains(errOut, "sluice bench: --") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errOut)
		}
	}
}
