package cli

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// queue create takes every setting from its flags; show prints them with
// the counts; list lists; delete deletes.
func TestQueueCommands(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		out := w.ok(t, "queue", "create", "orders", "--json", "--lock-duration", "30s", "--max-delivery-count", "3",
			"--default-ttl", "1h", "--dead-letter-on-expiry", "--dead-letter-retention", "24h", "--max-message-size", "2048",
			"--duplicate-detection", "--duplicate-window", "1m")
		q := jsonLines(t, out)
		if len(q) != 1 {
			t.Fatalf("create printed %d lines: %s", len(q), out)
		}
		for k, want := range map[string]any{
			"name": "orders", "lockDuration": "30s", "maxDeliveryCount": 3.0, "defaultTtl": "3600s",
			"deadLetterOnExpiry": true, "deadLetterRetention": "86400s", "maxMessageSize": 2048.0,
			"requiresDuplicateDetection": true, "duplicateDetectionWindow": "60s", "requiresSession": false,
		} {
			if q[0][k] != want {
				t.Errorf("created %s = %v, want %v", k, q[0][k], want)
			}
		}
		if _, ok := q[0]["stats"]; ok {
			t.Errorf("create printed counts: %s", out)
		}
		w.ok(t, "queue", "create", "sessions", "--requires-session")
		// Never (the default TTL and retention) shows as none, and as
		// sluice.Forever in JSON, which --default-ttl reads back.
		wantContains(t, "queue show with the defaults", w.ok(t, "queue", "show", "sessions"),
			"default ttl:            none", "dead-letter retention:  none")
		if s := jsonLines(t, w.ok(t, "queue", "show", "sessions", "--json")); s[0]["defaultTtl"] != "9223372036.854775807s" ||
			s[0]["deadLetterRetention"] != "9223372036.854775807s" {
			t.Errorf("show --json of a queue with the defaults: %v", s[0])
		}
		w.ok(t, "queue", "create", "never", "--default-ttl", sluice.Forever.String(), "--dead-letter-retention", sluice.Forever.String())
		wantContains(t, "queue show", w.ok(t, "queue", "show", "never"), "default ttl:            none", "dead-letter retention:  none")
		w.ok(t, "queue", "delete", "never")
		w.ok(t, "queue", "create", "relay", "--forward-to", "orders")
		w.fails(t, ExitError, "exists", "queue", "create", "orders")
		w.fails(t, ExitUsage, "--duplicate-window needs --duplicate-detection", "queue", "create", "x", "--duplicate-window", "1m")

		w.ok(t, "send", "relay", "forwarded")
		out = w.ok(t, "queue", "show", "orders")
		wantContains(t, "queue show", out, "queue:                  orders", "lock duration:          30s",
			"max delivery count:     3", "default ttl:            1h0m0s", "dead-letter on expiry:  yes",
			"max message size:       2048", "duplicate detection:    on, window 1m0s", "requires session:       no",
			"active:                 1", "dead-lettered:          0")
		show := jsonLines(t, w.ok(t, "queue", "show", "orders", "--json"))
		if st, _ := show[0]["stats"].(map[string]any); st["active"] != 1.0 || st["inFlight"] != 0.0 {
			t.Errorf("show --json stats = %v", show[0]["stats"])
		}
		if fw := jsonLines(t, w.ok(t, "queue", "show", "relay", "--json")); fw[0]["forwardTo"] != "orders" {
			t.Errorf("relay forwards to %v", fw[0]["forwardTo"])
		}

		out = w.ok(t, "queue", "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "orders ") ||
			!strings.HasPrefix(lines[2], "relay ") || !strings.HasPrefix(lines[3], "sessions ") {
			t.Fatalf("queue list:\n%s", out)
		}
		wantContains(t, "queue list", out, "on, window 1m0s")
		if l := jsonLines(t, w.ok(t, "queue", "list", "--json")); len(l) != 3 || l[2]["name"] != "sessions" || l[2]["requiresSession"] != true {
			t.Errorf("queue list --json: %v", l)
		}

		if out := w.ok(t, "queue", "delete", "relay"); out != "deleted queue relay\n" {
			t.Errorf("delete printed %q", out)
		}
		w.fails(t, ExitNotFound, "sluice queue show: ", "queue", "show", "relay")
		w.fails(t, ExitNotFound, "", "queue", "delete", "relay")
	})
}
