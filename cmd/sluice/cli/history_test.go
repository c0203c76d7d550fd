package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server"
)

// until runs cmd until its --json lines satisfy ok, failing after 30 s.
func (w where) until(t *testing.T, what string, ok func([]map[string]any) bool, cmd ...string) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines := jsonLines(t, w.ok(t, append(cmd, "--json")...))
		if ok(lines) {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30 s: %v", what, lines)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stats --history and stream lag --history print what a server sampled,
// with the API's field names in --json; on a database they say that a
// server keeps history.
func TestHistoryCommands(t *testing.T) {
	t.Parallel()
	w := where{name: "server", flags: []string{"--server", startServerWith(t, server.Config{HistoryInterval: 100 * time.Millisecond})}}
	w.ok(t, "queue", "create", "jobs")
	w.until(t, "sample of jobs", func(l []map[string]any) bool { return len(l) > 0 }, "stats", "jobs", "--history")
	w.ok(t, "send", "jobs", "a", "b")
	lines := w.until(t, "sample of the sends", func(l []map[string]any) bool {
		last := l[len(l)-1]
		for _, s := range l {
			if s["sent"].(float64) > 0 && last["active"] == 2.0 {
				return true
			}
		}
		return false
	}, "stats", "jobs", "--history")
	for _, s := range lines {
		for _, field := range []string{"entity", "interval", "at", "active", "inFlight", "scheduled", "deferred", "deadLettered", "expired",
			"sent", "received", "settled"} {
			if _, ok := s[field]; !ok {
				t.Fatalf("stats --history --json lacks %s: %v", field, s)
			}
		}
		if s["entity"] != "jobs" || s["interval"] != "0.100s" {
			t.Fatalf("stats --history --json: %v", s)
		}
	}
	out := w.ok(t, "stats", "jobs", "--history")
	wantContains(t, "stats --history", out, "AT", "ACTIVE", "IN FLIGHT", "DEAD-LETTERED", "EXPIRED", "SENT/S", "RECEIVED/S", "SETTLED/S",
		"(a sample every 100ms)")
	if rows := strings.Count(out, "\n"); rows < 2 {
		t.Errorf("stats --history printed no sample:\n%s", out)
	}
	w.fails(t, ExitUsage, "give ENTITY", "stats", "--history")
	w.fails(t, ExitUsage, "exclude each other", "stats", "jobs", "--history", "--throughput")
	w.fails(t, ExitNotFound, "sluice stats: ", "stats", "nosuchqueue", "--history")

	// A subscription nobody delivers lags by what is published to it.
	sub := jsonLines(t, w.ok(t, "stream", "subscribe", "orders", "o-1", "ghost", "--from", "beginning", "--json"))[0]["id"].(string)
	w.ok(t, "stream", "publish", "orders", "o-1", "placed", "paid")
	wantContains(t, "stream lag", w.ok(t, "stream", "lag"), "CONSUMER  NAMESPACE  GROUP    LAG  PROCESSORS\nghost     orders     default  2    0\n")
	if now := jsonLines(t, w.ok(t, "stream", "lag", "GHOST", "--json")); len(now) != 1 || now[0]["consumer"] != "ghost" ||
		now[0]["namespace"] != "orders" || now[0]["lag"] != 2.0 || now[0]["processors"] != 0.0 || now[0]["group"] != "" {
		t.Errorf("stream lag --json: %v", now)
	}
	w.until(t, "sample of ghost lagging by 2", func(l []map[string]any) bool {
		if len(l) != 1 {
			return false
		}
		samples, _ := l[0]["samples"].([]any)
		return len(samples) > 0 && samples[len(samples)-1].(map[string]any)["lag"] == 2.0 && l[0]["consumer"] == "ghost" &&
			l[0]["namespace"] == "orders" && l[0]["interval"] == "0.100s"
	}, "stream", "lag", "ghost", "--history")
	wantContains(t, "stream lag --history", w.ok(t, "stream", "lag", "--history"), "AT", "ghost·orders", "(lag; a sample every 100ms)")
	wantContains(t, "stream lag --subscription", w.ok(t, "stream", "lag", "--subscription", sub),
		"SUBSCRIPTION", sub+"  ghost     orders/o-1  2\n")
	h := w.until(t, "sample of the subscription", func(l []map[string]any) bool {
		samples, _ := l[0]["samples"].([]any)
		return len(samples) > 0 && samples[len(samples)-1].(map[string]any)["lag"] == 2.0
	}, "stream", "lag", "--subscription", sub, "--history")
	if h[0]["id"] != sub || h[0]["consumer"] != "ghost" || h[0]["key"] != "o-1" {
		t.Errorf("stream lag --subscription --history --json: %v", h)
	}
	wantContains(t, "stream lag --subscription --history", w.ok(t, "stream", "lag", "--subscription", sub, "--history"),
		"subscription "+sub+" of ghost to orders/o-1\n", "LAG")
	w.fails(t, ExitNotFound, "sluice stream lag: ", "stream", "lag", "--subscription", "nosuch", "--history")
	w.fails(t, ExitUsage, "give no CONSUMER", "stream", "lag", "ghost", "--subscription", sub)
	w.fails(t, ExitUsage, "--max", "stream", "lag", "--history", "--max", "0")

	// On a database: the lag now, and no history.
	db := where{name: "sqlite", flags: []string{"--db", filepath.Join(t.TempDir(), "cli.db")}}
	db.ok(t, "queue", "create", "jobs")
	db.fails(t, ExitError, "history is kept by a server", "stats", "jobs", "--history")
	db.fails(t, ExitError, "use --server", "stream", "lag", "--history")
	db.ok(t, "stream", "subscribe", "orders", "o-1", "ghost", "--from", "beginning")
	db.ok(t, "stream", "publish", "orders", "o-1", "placed")
	wantContains(t, "stream lag on a database", db.ok(t, "stream", "lag", "ghost"), "ghost     orders     default  1    0\n")
}
