package cli

import (
	"strings"
	"testing"
)

// A topic's subscriptions get the messages their rules select.
func TestTopicsAndSubscriptions(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		tp := jsonLines(t, w.ok(t, "topic", "create", "events", "--json", "--default-ttl", "2h", "--max-message-size", "4096",
			"--duplicate-detection"))
		if tp[0]["name"] != "events" || tp[0]["defaultTtl"] != "7200s" || tp[0]["maxMessageSize"] != 4096.0 ||
			tp[0]["requiresDuplicateDetection"] != true || tp[0]["duplicateDetectionWindow"] != "600s" {
			t.Fatalf("topic create: %v", tp)
		}
		w.ok(t, "topic", "create", "other")
		w.ok(t, "subscription", "create", "events", "all")
		w.ok(t, "subscription", "create", "events", "red", "--sql-filter", "color = 'red'", "--sql-filter", "sys.subject = 'paint'")
		sub := jsonLines(t, w.ok(t, "subscription", "create", "events", "eu-orders", "--json", "--lock-duration", "45s",
			"--max-delivery-count", "2", "--correlation", "subject=order", "--correlation", "prop.region=eu"))
		if sub[0]["path"] != "events/Subscriptions/eu-orders" || sub[0]["lockDuration"] != "45s" || sub[0]["maxDeliveryCount"] != 2.0 {
			t.Fatalf("subscription create: %v", sub)
		}
		rules, _ := sub[0]["rules"].([]any)
		rule, _ := rules[0].(map[string]any)
		if corr, _ := rule["correlation"].(map[string]any); len(rules) != 1 || rule["name"] != "correlation" ||
			rule["filter"] != "correlation" || corr["subject"] != "order" || corr["prop.region"] != "eu" {
			t.Fatalf("subscription rules: %v", rules)
		}
		w.fails(t, ExitUsage, "the key is one of", "subscription", "create", "events", "bad", "--correlation", "colour=red")
		w.fails(t, ExitError, "", "subscription", "create", "events", "bad", "--sql-filter", "color = = 'red'")
		w.fails(t, ExitNotFound, "", "subscription", "create", "nosuchtopic", "s")

		w.ok(t, "send", "events", "red paint", "--property", "color=red")
		w.ok(t, "send", "events", "blue paint", "--subject", "paint", "--property", "color=blue")
		w.ok(t, "send", "events", "an order", "--subject", "order", "--property", "region=eu")
		for sub, want := range map[string][]string{
			"all":       {"red paint", "blue paint", "an order"},
			"red":       {"red paint", "blue paint"},
			"eu-orders": {"an order"},
		} {
			got := jsonLines(t, w.ok(t, "receive", "events/Subscriptions/"+sub, "--max", "10", "--json"))
			var bodies []string
			for _, m := range got {
				bodies = append(bodies, m["body"].(string))
			}
			if strings.Join(bodies, "|") != strings.Join(want, "|") {
				t.Errorf("subscription %s got %q, want %q", sub, bodies, want)
			}
		}

		out := w.ok(t, "subscription", "show", "events", "red")
		wantContains(t, "subscription show", out, "subscription:", "events/Subscriptions/red", "rule sql-1:", "sql: color = 'red'",
			"rule sql-2:", "sql: sys.subject = 'paint'", "active:", "lock duration:")
		out = w.ok(t, "subscription", "list", "events")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[1], "all ") || !strings.Contains(lines[1], "$Default (true)") ||
			!strings.Contains(lines[2], "correlation (correlation: prop.region=eu subject=order)") {
			t.Fatalf("subscription list:\n%s", out)
		}
		if l := jsonLines(t, w.ok(t, "subscription", "list", "events", "--json")); len(l) != 3 || l[2]["name"] != "red" {
			t.Errorf("subscription list --json: %v", l)
		}
		wantContains(t, "topic show", w.ok(t, "topic", "show", "events"), "topic:", "events", "default ttl:",
			"subscription:", "eu-orders", "red")
		if l := jsonLines(t, w.ok(t, "topic", "show", "events", "--json")); len(l[0]["subscriptions"].([]any)) != 3 {
			t.Errorf("topic show --json: %v", l)
		}
		out = w.ok(t, "topic", "list")
		if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "events ") ||
			!strings.HasPrefix(lines[2], "other ") {
			t.Fatalf("topic list:\n%s", out)
		}
		if l := jsonLines(t, w.ok(t, "topic", "list", "--json")); len(l) != 2 || l[0]["name"] != "events" || l[1]["name"] != "other" ||
			l[0]["defaultTtl"] == nil {
			t.Errorf("topic list --json: %v", l)
		}

		if out := w.ok(t, "subscription", "delete", "events", "red"); out != "deleted subscription events/Subscriptions/red\n" {
			t.Errorf("subscription delete printed %q", out)
		}
		w.fails(t, ExitNotFound, "", "subscription", "show", "events", "red")
		w.ok(t, "topic", "delete", "events")
		w.fails(t, ExitNotFound, "", "topic", "show", "events")
		w.fails(t, ExitNotFound, "", "subscription", "show", "events", "all")
	})
}

// A queue with sessions is received by session: a named one, or the
// next one with messages.
func TestSessions(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "carts", "--requires-session")
		w.ok(t, "send", "carts", "a1", "a2", "--session-id", "alice")
		w.ok(t, "send", "carts", "b1", "--session-id", "bob")
		w.fails(t, ExitError, "session", "receive", "carts")

		out := w.ok(t, "receive", "carts", "--session", "alice", "--max", "10")
		wantContains(t, "receive --session alice", out, "session alice (lock token ", "  body: a1\n", "  body: a2\n", "  completed\n")
		next := jsonLines(t, w.ok(t, "receive", "carts", "--session", "next", "--json", "--no-complete"))
		if len(next) != 1 || next[0]["sessionId"] != "bob" || next[0]["body"] != "b1" || next[0]["sessionLockToken"] == nil {
			t.Fatalf("receive --session next: %v", next)
		}
		// bob stays locked with its message, alice has none left.
		w.fails(t, ExitNothing, "no message", "receive", "carts", "--session", "next")
		w.fails(t, ExitNothing, "no message", "receive", "carts", "--session", "next", "--wait", "200ms")
		w.fails(t, ExitError, "", "receive", "carts", "--session", "bob")
		w.ok(t, "send", "carts", "a3", "--session-id", "alice")
		wantContains(t, "receive --session next --wait", w.ok(t, "receive", "carts", "--session", "next", "--wait", "5s"),
			"session alice", "  body: a3\n")
	})
}
