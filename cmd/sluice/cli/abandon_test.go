package cli

import (
	"testing"
	"time"
)

// message abandon --delay hides the messages that long (peek: scheduled);
// a negative delay is a usage error and changes nothing.
func TestAbandonDelay(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "work")
		w.ok(t, "send", "work", "a", "b")
		tok := heldTokens(t, w, "work", 2)
		w.fails(t, ExitUsage, "must not be negative", "message", "abandon", "work", tok[1], "--delay", "-1s")
		if got, want := states(t, w, "work"), map[int64]string{1: "leased", 2: "leased"}; !mapsEqual(got, want) {
			t.Fatalf("after a refused abandon: states %v, want %v", got, want)
		}
		start := time.Now()
		wantContains(t, "message abandon --delay 1h", w.ok(t, "message", "abandon", "work", tok[1], "--delay", "1h"), "message #1 abandoned\n")
		wantContains(t, "message abandon --delay 1s", w.ok(t, "message", "abandon", "work", tok[2], "--delay", "1s"), "message #2 abandoned\n")
		if got, want := states(t, w, "work"), map[int64]string{1: "scheduled", 2: "scheduled"}; !mapsEqual(got, want) {
			t.Fatalf("after abandons with a delay: states %v, want %v", got, want)
		}
		again := jsonLines(t, w.ok(t, "receive", "work", "--wait", "60s", "--json"))
		if e := time.Since(start); e < 900*time.Millisecond {
			t.Fatalf("message abandoned with --delay 1s received again after %v", e)
		}
		if len(again) != 1 || again[0]["sequenceNumber"] != 2.0 || again[0]["deliveryCount"] != 2.0 {
			t.Fatalf("receive after the delay: %v, want #2 on delivery 2", again)
		}
	})
}
