package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// send takes its bodies from the arguments, the files or standard input,
// and every property from a flag; peek shows them all.
func TestSendAndPeek(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f1, f2 := filepath.Join(dir, "one.txt"), filepath.Join(dir, "two.bin")
	os.WriteFile(f1, []byte("from a file"), 0o644)
	os.WriteFile(f2, []byte{0xff, 0x00, 0x01}, 0o644)
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "inbox")
		if out := w.ok(t, "send", "inbox", "one", "two"); out != "1\n2\n" {
			t.Fatalf("send of two bodies printed %q", out)
		}
		if code, out, errOut := w.run(t, "from stdin\nline two\n", "send", "inbox"); code != ExitOK || out != "3\n" {
			t.Fatalf("send from stdin: exit %d, %q %s", code, out, errOut)
		}
		if out := w.ok(t, "send", "inbox", "--file", f1, "--file", f2, "--json"); out != "{\"sequenceNumber\":4}\n{\"sequenceNumber\":5}\n" {
			t.Fatalf("send --file --json printed %q", out)
		}
		w.ok(t, "send", "inbox", "all the flags", "--message-id", "m-1", "--partition-key", "pk", "--correlation-id", "c-1",
			"--subject", "greeting", "--content-type", "text/plain", "--reply-to", "replies", "--reply-to-session-id", "rs",
			"--to", "someone", "--property", "color=red", "--property", "size=L", "--ttl", "1h")
		w.ok(t, "send", "inbox", "later", "--schedule-in", "1h")
		w.ok(t, "send", "inbox", "much later", "--schedule-at", "2099-01-02T03:04:05Z")
		w.fails(t, ExitUsage, `--property "nokey": want key=value`, "send", "inbox", "x", "--property", "nokey")
		w.fails(t, ExitUsage, "exclude each other", "send", "inbox", "x", "--schedule-in", "1h", "--schedule-at", "2099-01-02T03:04:05Z")
		w.fails(t, ExitUsage, "--schedule-at", "send", "inbox", "x", "--schedule-at", "tomorrow")

		msgs := jsonLines(t, w.ok(t, "peek", "inbox", "--json", "--max", "20"))
		if len(msgs) != 8 {
			t.Fatalf("peek: %d messages, want 8", len(msgs))
		}
		for i, want := range []string{"one", "two", "from stdin\nline two\n", "from a file"} {
			if msgs[i]["body"] != want || msgs[i]["sequenceNumber"] != float64(i+1) || msgs[i]["state"] != "ready" {
				t.Errorf("message %d = %v, want body %q", i+1, msgs[i], want)
			}
		}
		if msgs[4]["bodyBase64"] != "/wAB" || msgs[4]["body"] != nil {
			t.Errorf("binary body: %v", msgs[4])
		}
		m := msgs[5]
		for k, want := range map[string]any{
			"messageId": "m-1", "partitionKey": "pk", "correlationId": "c-1", "subject": "greeting",
			"contentType": "text/plain", "replyTo": "replies", "replyToSessionId": "rs", "to": "someone",
			"body": "all the flags", "deliveryCount": 0.0,
		} {
			if m[k] != want {
				t.Errorf("message 6 %s = %v, want %v", k, m[k], want)
			}
		}
		if p, _ := m["applicationProperties"].(map[string]any); p["color"] != "red" || p["size"] != "L" {
			t.Errorf("message 6 properties = %v", m["applicationProperties"])
		}
		for _, k := range []string{"enqueuedTime", "expiresAt"} {
			if s, _ := m[k].(string); !strings.HasPrefix(s, "20") {
				t.Errorf("message 6 %s = %v", k, m[k])
			}
		}
		if msgs[6]["state"] != "scheduled" || msgs[7]["scheduledEnqueueTime"] != "2099-01-02T03:04:05Z" {
			t.Errorf("scheduled messages: %v %v", msgs[6], msgs[7])
		}
		if _, ok := msgs[0]["lockToken"]; ok {
			t.Errorf("a peeked message has a lock token: %v", msgs[0])
		}

		out := w.ok(t, "peek", "inbox", "--from", "5", "--max", "2")
		wantContains(t, "peek --from 5", out, "message #5 (delivery 0, enqueued ", "  body: (base64) /wAB\n", "message #6",
			"  subject: greeting\n", "  property color: red\n", "  property size: L\n", "  body: all the flags\n", "  state: ready\n")
		if strings.Contains(out, "message #4") || strings.Contains(out, "message #7") {
			t.Errorf("peek --from 5 --max 2 printed others:\n%s", out)
		}
		w.fails(t, ExitUsage, "--max 0", "peek", "inbox", "--max", "0")
	})
}

var lockToken = regexp.MustCompile(`^[0-9a-f]{32}$`)

// receive settles each message as its flags say, or leaves it locked;
// the dead letters are listed, resubmitted and purged.
func TestReceiveAndDeadLetters(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "work")
		w.ok(t, "send", "work", "a", "b", "c", "d", "e", "f")

		out := w.ok(t, "receive", "work")
		wantContains(t, "receive", out, "message #1 (delivery 1, ", "  lock token: ", "  body: a\n", "  completed\n")
		wantContains(t, "receive --abandon", w.ok(t, "receive", "work", "--abandon"), "message #2 (delivery 1, ", "  abandoned\n")
		again := jsonLines(t, w.ok(t, "receive", "work", "--json"))
		if len(again) != 1 || again[0]["sequenceNumber"] != 2.0 || again[0]["deliveryCount"] != 2.0 || again[0]["body"] != "b" {
			t.Fatalf("receive after abandon: %v", again)
		}
		if tok, _ := again[0]["lockToken"].(string); !lockToken.MatchString(tok) {
			t.Errorf("lock token %q", tok)
		}
		wantContains(t, "receive --defer", w.ok(t, "receive", "work", "--defer"), "message #3", "  deferred\n")
		wantContains(t, "receive --dead-letter", w.ok(t, "receive", "work", "--dead-letter", "Broken", "--dead-letter-description", "bad input"),
			"message #4", "  dead-lettered\n")
		held := jsonLines(t, w.ok(t, "receive", "work", "--no-complete", "--json"))
		if len(held) != 1 || held[0]["sequenceNumber"] != 5.0 || !lockToken.MatchString(held[0]["lockToken"].(string)) {
			t.Fatalf("receive --no-complete: %v", held)
		}
		out = w.ok(t, "receive", "work", "--mode", "receive-and-delete")
		if !strings.Contains(out, "message #6") || strings.Contains(out, "completed") || strings.Contains(out, "lock token") {
			t.Errorf("receive-and-delete:\n%s", out)
		}
		w.fails(t, ExitNothing, "no message to receive", "receive", "work")
		w.fails(t, ExitNothing, "no message to receive", "receive", "work", "--wait", "150ms")

		left := jsonLines(t, w.ok(t, "peek", "work", "--json"))
		if len(left) != 2 || left[0]["sequenceNumber"] != 3.0 || left[0]["state"] != "deferred" ||
			left[1]["sequenceNumber"] != 5.0 || left[1]["state"] != "leased" {
			t.Fatalf("left in the queue: %v", left)
		}

		out = w.ok(t, "dlq", "list", "work")
		wantContains(t, "dlq list", out, "message #", "  dead-letter reason: Broken\n", "  dead-letter description: bad input\n", "  body: d\n")
		dead := jsonLines(t, w.ok(t, "dlq", "list", "work", "--json"))
		if len(dead) != 1 || dead[0]["deadLetterReason"] != "Broken" || dead[0]["deadLetterDescription"] != "bad input" || dead[0]["body"] != "d" {
			t.Fatalf("dlq list --json: %v", dead)
		}
		if out := w.ok(t, "dlq", "resubmit", "work"); out != "resubmitted 1\n" {
			t.Fatalf("dlq resubmit printed %q", out)
		}
		if out := w.ok(t, "dlq", "list", "work"); out != "" {
			t.Fatalf("dead letters after resubmit:\n%s", out)
		}
		back := jsonLines(t, w.ok(t, "receive", "work", "--json", "--dead-letter", "Again"))
		if len(back) != 1 || back[0]["body"] != "d" || back[0]["sequenceNumber"] != 7.0 {
			t.Fatalf("the resubmitted message: %v", back)
		}
		w.fails(t, ExitUsage, "only be completed or abandoned", "receive", "work", "--dlq", "--defer")
		fromDLQ := jsonLines(t, w.ok(t, "receive", "work", "--dlq", "--json"))
		if len(fromDLQ) != 1 || fromDLQ[0]["deadLetterReason"] != "Again" {
			t.Fatalf("receive --dlq: %v", fromDLQ)
		}
		if out := w.ok(t, "dlq", "list", "work", "--json"); out != "" {
			t.Fatalf("receive --dlq left %s", out)
		}

		w.ok(t, "send", "work", "g", "h")
		w.ok(t, "receive", "work", "--max", "2", "--dead-letter", "Purge")
		first := jsonLines(t, w.ok(t, "dlq", "list", "work", "--json", "--max", "1"))
		if len(first) != 1 || first[0]["body"] != "g" {
			t.Fatalf("dlq list --max 1: %v", first)
		}
		w.fails(t, ExitNotFound, "", "dlq", "resubmit", "work", "999")
		w.fails(t, ExitUsage, `sequence number "x"`, "dlq", "resubmit", "work", "x")
		if out := w.ok(t, "dlq", "resubmit", "work", fmt.Sprint(first[0]["sequenceNumber"]), "--json"); out != "{\"resubmitted\":1}\n" {
			t.Fatalf("dlq resubmit SEQ printed %q", out)
		}
		if out := w.ok(t, "dlq", "purge", "work", "--json"); out != "{\"purged\":1}\n" {
			t.Fatalf("dlq purge printed %q", out)
		}
		wantContains(t, "receive after resubmit", w.ok(t, "receive", "work"), "  body: g\n")
		if out := w.ok(t, "dlq", "purge", "work"); out != "purged 0\n" {
			t.Fatalf("dlq purge of none printed %q", out)
		}
	})
}

// Settle flags that contradict each other are usage errors.
func TestReceiveUsage(t *testing.T) {
	t.Parallel()
	w := where{name: "sqlite", flags: []string{"--db", filepath.Join(t.TempDir(), "usage.db")}}
	w.ok(t, "queue", "create", "q")
	for _, c := range []struct {
		want string
		args []string
	}{
		{"exclude each other", []string{"--abandon", "--defer"}},
		{"nothing to settle", []string{"--mode", "receive-and-delete", "--abandon"}},
		{`--mode "later"`, []string{"--mode", "later"}},
		{"--max 0", []string{"--max", "0"}},
		{"--dead-letter-description goes with --dead-letter", []string{"--dead-letter-description", "why"}},
		{"a dead-letter queue has no sessions", []string{"--dlq", "--session", "next"}},
	} {
		w.fails(t, ExitUsage, c.want, append([]string{"receive", "q"}, c.args...)...)
	}
}
