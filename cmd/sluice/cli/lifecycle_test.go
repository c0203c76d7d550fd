package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect/v2"

	"github.com/sluicehq/sluice"
)

// heldTokens receives n messages of entity, leaves them locked, and
// returns their lock tokens by sequence number.
func heldTokens(t *testing.T, w where, entity string, n int, more ...string) map[int64]string {
	t.Helper()
	args := append([]string{"receive", entity, "--no-complete", "--json", "--max", strconv.Itoa(n)}, more...)
	out := map[int64]string{}
	for _, m := range jsonLines(t, w.ok(t, args...)) {
		out[int64(m["sequenceNumber"].(float64))] = m["lockToken"].(string)
	}
	if len(out) != n {
		t.Fatalf("receive --no-complete --max %d got %d messages", n, len(out))
	}
	return out
}

// states peeks an entity and returns each message's state by sequence
// number.
func states(t *testing.T, w where, entity string) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, m := range jsonLines(t, w.ok(t, "peek", entity, "--json", "--max", "100")) {
		out[int64(m["sequenceNumber"].(float64))] = m["state"].(string)
	}
	return out
}

// A message received with --no-complete is settled later by its token
// alone, in each of the four ways; a deferred one is received by its
// number, a lock renewed, a scheduled message cancelled.
func TestSettleByToken(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "work")
		w.ok(t, "send", "work", "a", "b", "c", "d", "e")
		tok := heldTokens(t, w, "work", 5)

		// Two tokens complete in one batch.
		done := jsonLines(t, w.ok(t, "message", "complete", "work", tok[1], tok[2], "--json"))
		if len(done) != 2 || done[0]["outcome"] != "completed" || done[0]["sequenceNumber"] != 1.0 || done[1]["lockToken"] != tok[2] {
			t.Fatalf("message complete --json: %v", done)
		}
		if out := w.ok(t, "message", "abandon", "work", tok[3], "--property", "retried=yes"); out != "message #3 abandoned\n" {
			t.Fatalf("message abandon printed %q", out)
		}
		w.fails(t, ExitUsage, "--reason is required", "message", "dead-letter", "work", tok[4])
		wantContains(t, "message dead-letter", w.ok(t, "message", "dead-letter", "work", tok[4], "--reason", "Broken",
			"--description", "bad input"), "message #4 dead-lettered\n")
		wantContains(t, "message defer", w.ok(t, "message", "defer", "work", tok[5]), "message #5 deferred\n")

		if got, want := states(t, w, "work"), map[int64]string{3: "ready", 5: "deferred"}; !mapsEqual(got, want) {
			t.Fatalf("after settling: states %v, want %v", got, want)
		}
		dead := jsonLines(t, w.ok(t, "dlq", "list", "work", "--json"))
		if len(dead) != 1 || dead[0]["deadLetterReason"] != "Broken" || dead[0]["deadLetterDescription"] != "bad input" {
			t.Fatalf("dlq list --json: %v", dead)
		}
		again := jsonLines(t, w.ok(t, "peek", "work", "--json", "--from", "3", "--max", "1"))
		if p, _ := again[0]["applicationProperties"].(map[string]any); p["retried"] != "yes" || again[0]["deliveryCount"] != 1.0 {
			t.Fatalf("the abandoned message: %v", again[0])
		}

		// A settled token settles nothing again; every token is tried.
		code, out, errOut := w.run(t, "", "message", "complete", "work", tok[1], tok[3])
		if code == ExitOK || !strings.Contains(errOut, "2 of 2 messages not completed") || strings.Count(out, "not completed") != 2 {
			t.Fatalf("completing settled tokens: exit %d, %q %q", code, out, errOut)
		}
		w.fails(t, ExitUsage, "lock token", "message", "complete", "work", "not-a-token")
		w.fails(t, ExitUsage, "lock token", "message", "renew-lock", "work", tok[1]+"0")
		w.fails(t, ExitUsage, "--session-token", "message", "complete", "work", tok[1], "--session", "s", "--session-token", "xyz")
		w.fails(t, ExitUsage, "missing arguments", "message", "complete", "work")

		// The deferred message, by its number.
		wantContains(t, "receive --deferred", w.ok(t, "receive", "work", "--deferred", "5"), "message #5", "  body: e\n", "  completed\n")
		w.fails(t, ExitNotFound, "", "receive", "work", "--deferred", "5")
		w.fails(t, ExitUsage, "sequence number", "receive", "work", "--deferred", "0")
		w.fails(t, ExitUsage, "--deferred and --dlq", "receive", "work", "--deferred", "1", "--dlq")

		// A renewed lock lasts longer than the first.
		held := jsonLines(t, w.ok(t, "receive", "work", "--no-complete", "--json"))
		first, _ := time.Parse(time.RFC3339, held[0]["lockedUntil"].(string))
		token := held[0]["lockToken"].(string)
		renewed := jsonLines(t, w.ok(t, "message", "renew-lock", "work", token, "--json"))
		until, err := time.Parse("2006-01-02T15:04:05.000Z", renewed[0]["lockedUntil"].(string))
		if err != nil || len(renewed) != 1 || !until.After(first.Add(-time.Millisecond)) {
			t.Fatalf("renew-lock --json: %v (first lock until %v)", renewed, first)
		}
		wantContains(t, "renew-lock", w.ok(t, "message", "renew-lock", "work", token), "message #3 locked until ")

		// Released, it comes again on the same delivery.
		w.fails(t, ExitUsage, "session release", "message", "release", "work", token, "--session", "s", "--session-token", "0123456789abcdef")
		wantContains(t, "message release", w.ok(t, "message", "release", "work", token), "message #3 released\n")
		back := jsonLines(t, w.ok(t, "receive", "work", "--no-complete", "--json"))
		if len(back) != 1 || back[0]["sequenceNumber"] != 3.0 || back[0]["deliveryCount"] != held[0]["deliveryCount"] {
			t.Fatalf("after release, receive --json: %v (before: %v)", back, held[0])
		}
		token = back[0]["lockToken"].(string)
		w.ok(t, "message", "complete", "work", token)
		w.fails(t, ExitError, "lock lost", "message", "renew-lock", "work", token)

		// Dead letters settle by token in the dead-letter queue.
		dl := heldTokens(t, w, "work", 1, "--dlq")
		w.fails(t, ExitUsage, "--session and --dlq", "message", "complete", "work", dl[4], "--dlq", "--session", "s", "--session-token", "x")
		w.ok(t, "message", "complete", "work", dl[4], "--dlq")
		if out := w.ok(t, "dlq", "list", "work"); strings.Contains(out, "#4") {
			t.Fatalf("the completed dead letter is listed:\n%s", out)
		}

		// Scheduled messages, cancelled by number: all or none.
		seqs := strings.Fields(w.ok(t, "send", "work", "later", "much later", "--schedule-in", "1h"))
		w.fails(t, ExitNotFound, "", "message", "cancel-scheduled", "work", seqs[0], "999")
		if got := states(t, w, "work"); len(got) != 2 {
			t.Fatalf("a failed cancel changed the scheduled messages: %v", got)
		}
		out = w.ok(t, "message", "cancel-scheduled", "work", seqs[0]+","+seqs[1])
		if out != "scheduled message #"+seqs[0]+" cancelled\nscheduled message #"+seqs[1]+" cancelled\n" {
			t.Fatalf("cancel-scheduled printed %q", out)
		}
		if got := states(t, w, "work"); len(got) != 0 {
			t.Fatalf("after cancel-scheduled: %v", got)
		}
		w.fails(t, ExitUsage, "sequence number", "message", "cancel-scheduled", "work", "1,x")
	})
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A session's messages left locked settle under the session lock that
// receive printed; its state is read and set, its lock renewed and
// released.
func TestSessionCommands(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "carts", "--requires-session")
		w.ok(t, "send", "carts", "one", "two", "--session-id", "s1")
		msgs := jsonLines(t, w.ok(t, "receive", "carts", "--session", "s1", "--no-complete", "--max", "2", "--json"))
		if len(msgs) != 2 || msgs[0]["sessionLockToken"] == nil {
			t.Fatalf("receive --session --no-complete --json: %v", msgs)
		}
		w.fails(t, ExitError, "hint: the queue requires sessions: --session ID receives one session", "receive", "carts")
		w.fails(t, ExitError, "hint: the queue requires sessions: give each message --session-id", "send", "carts", "x")
		st := msgs[0]["sessionLockToken"].(string)
		lock := []string{"--session", "s1", "--session-token", st}
		w.fails(t, ExitUsage, "go together", "message", "complete", "carts", msgs[0]["lockToken"].(string), "--session", "s1")
		wantContains(t, "complete in a session", w.ok(t, append([]string{"message", "complete", "carts", msgs[0]["lockToken"].(string)}, lock...)...),
			"message #1 completed\n")

		held := lock[2:]
		w.ok(t, append([]string{"session", "state", "carts", "s1", "--set", "cart of two"}, held...)...)
		if out := w.ok(t, append([]string{"session", "state", "carts", "s1"}, held...)...); out != "session s1 state: cart of two\n" {
			t.Fatalf("session state printed %q", out)
		}
		w.fails(t, ExitError, "", "session", "state", "carts", "s1") // held: not free to accept
		wantContains(t, "session renew", w.ok(t, append([]string{"session", "renew", "carts", "s1"}, held...)...), "session s1 locked until ")
		w.fails(t, ExitUsage, "--session-token is required", "session", "renew", "carts", "s1")
		if out := w.ok(t, append([]string{"session", "release", "carts", "s1"}, held...)...); out != "session s1 released\n" {
			t.Fatalf("session release printed %q", out)
		}
		// Released: message #2 is delivered again, and the state stays.
		wantContains(t, "receive after release", w.ok(t, "receive", "carts", "--session", "s1"), "message #2 (delivery ", "  completed\n")
		state := jsonLines(t, w.ok(t, "session", "state", "carts", "s1", "--json"))
		if state[0]["body"] != "cart of two" || state[0]["sessionId"] != "s1" {
			t.Fatalf("session state --json: %v", state)
		}
		code, out, errOut := w.run(t, "from stdin", "session", "state", "carts", "s1", "--set-file", "-")
		if code != ExitOK || out != "session s1 state: from stdin\n" {
			t.Fatalf("session state --set-file -: exit %d %q %q", code, out, errOut)
		}
		if out := w.ok(t, "session", "state", "carts", "s1", "--clear"); out != "session s1: no state\n" {
			t.Fatalf("session state --clear printed %q", out)
		}
		w.fails(t, ExitUsage, "exclude each other", "session", "state", "carts", "s1", "--set", "x", "--clear")
		w.fails(t, ExitError, "", append([]string{"session", "renew", "carts", "s1"}, held...)...) // released: the lock is lost
		w.fails(t, ExitError, "session lock lost", append([]string{"session", "release", "carts", "s1"}, held...)...)
		w.fails(t, ExitUsage, "16 hex digits", "session", "state", "carts", "s1", "--session-token", "nope")
	})
}

// Updates change the settings given and keep the others; creates with
// --if-not-exists succeed on what exists; rules are added and deleted.
func TestUpdatesAndRules(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "work", "--default-ttl", "1h", "--max-delivery-count", "7")
		q := jsonLines(t, w.ok(t, "queue", "update", "work", "--lock-duration", "30s", "--json"))[0]
		if q["lockDuration"] != "30s" || q["maxDeliveryCount"] != 7.0 || q["defaultTtl"] != "3600s" {
			t.Fatalf("queue update --lock-duration: %v", q)
		}
		w.ok(t, "queue", "create", "elsewhere")
		q = jsonLines(t, w.ok(t, "queue", "update", "work", "--forward-to", "elsewhere", "--max-delivery-count", "3", "--json"))[0]
		if q["forwardTo"] != "elsewhere" || q["maxDeliveryCount"] != 3.0 || q["lockDuration"] != "30s" {
			t.Fatalf("queue update --forward-to: %v", q)
		}
		if q := jsonLines(t, w.ok(t, "queue", "update", "work", "--forward-to", "", "--json"))[0]; q["forwardTo"] != nil {
			t.Fatalf("queue update --forward-to \"\": %v", q)
		}
		w.fails(t, ExitUsage, "nothing to change", "queue", "update", "work")
		w.fails(t, ExitUsage, "requires-session", "queue", "update", "work", "--requires-session")
		w.fails(t, ExitNotFound, "", "queue", "update", "missing", "--lock-duration", "30s")
		w.fails(t, ExitError, "", "queue", "update", "work", "--lock-duration", "1h")

		w.fails(t, ExitError, "hint: --if-not-exists succeeds on one that exists; queue update changes its settings", "queue", "create", "work")
		code, out, errOut := w.run(t, "", "queue", "create", "work", "--if-not-exists", "--lock-duration", "2m", "--json")
		if code != ExitOK || !strings.Contains(errOut, "queue work exists: left as it is") || !strings.Contains(out, `"lockDuration":"30s"`) {
			t.Fatalf("queue create --if-not-exists on an existing queue: exit %d, %q %q", code, out, errOut)
		}

		w.ok(t, "topic", "create", "events")
		if tp := jsonLines(t, w.ok(t, "topic", "update", "events", "--default-ttl", "2h", "--json"))[0]; tp["defaultTtl"] != "7200s" {
			t.Fatalf("topic update: %v", tp)
		}
		w.ok(t, "topic", "create", "events", "--if-not-exists")
		w.ok(t, "subscription", "create", "events", "all")
		s := jsonLines(t, w.ok(t, "subscription", "update", "events", "all", "--max-delivery-count", "2", "--forward-to", "work", "--json"))[0]
		if s["maxDeliveryCount"] != 2.0 || s["forwardTo"] != "work" {
			t.Fatalf("subscription update: %v", s)
		}
		w.ok(t, "subscription", "create", "events", "all", "--if-not-exists", "--sql-filter", "1 = 0")

		wantContains(t, "rule add", w.ok(t, "rule", "add", "events", "all", "red", "--sql-filter", "color = 'red'"),
			"added rule red of events/Subscriptions/all: ")
		wantContains(t, "subscription show", w.ok(t, "subscription", "show", "events", "all"), "rule red:", "color = 'red'", "rule $Default:")
		w.fails(t, ExitUsage, "one filter", "rule", "add", "events", "all", "two", "--sql-filter", "a = 1", "--correlation", "subject=x")
		w.fails(t, ExitUsage, "one filter", "rule", "add", "events", "all", "none")
		w.ok(t, "rule", "add", "events", "all", "blue", "--correlation", "prop.color=blue", "--correlation", "subject=paint")
		w.ok(t, "rule", "delete", "events", "all", "$Default")
		rules := jsonLines(t, w.ok(t, "subscription", "show", "events", "all", "--json"))[0]["rules"].([]any)
		var names []string
		for _, r := range rules {
			names = append(names, r.(map[string]any)["name"].(string))
		}
		if slices.Sort(names); !slices.Equal(names, []string{"blue", "red"}) {
			t.Fatalf("rules after add and delete: %v", names)
		}
		w.fails(t, ExitNotFound, "", "rule", "delete", "events", "all", "missing")

		wantContains(t, "stream retention", w.ok(t, "stream", "retention", "orders", "--max-age", "1h", "--parked", "24h"),
			"namespace orders: max age 1h0m0s, max bytes 0, expiry none, parked 24h0m0s\n")
		w.fails(t, ExitUsage, "--max-bytes", "stream", "retention", "orders", "--max-bytes", "-1")
	})
}

// stats --throughput is the server's; on a database it says so.
func TestStatsThroughput(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		if w.flags[0] == "--db" {
			w.fails(t, ExitError, "use --server", "stats", "--throughput")
			return
		}
		w.ok(t, "queue", "create", "work")
		w.ok(t, "send", "work", "a")
		wantContains(t, "stats --throughput", w.ok(t, "stats", "--throughput"), "FROM", "SENT/S", "RECEIVED/S", "SETTLED/S")
		for _, s := range jsonLines(t, w.ok(t, "stats", "--throughput", "--json")) {
			if s["at"] == nil || !strings.HasSuffix(s["bucket"].(string), "s") {
				t.Fatalf("stats --throughput --json: %v", s)
			}
		}
		w.fails(t, ExitUsage, "give no ENTITY", "stats", "work", "--throughput")
	})
}

// stream consume prints what it delivers, and replays parked events.
func TestStreamConsume(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		// A consumer whose handler fails parks the event.
		p := newProcessor(t, w)
		p.Handle("audit", func(context.Context, *sluice.StreamEvent) error { return errors.New("audit down") },
			&sluice.ConsumerOptions{MaxAttempts: 1})
		sub := jsonLines(t, w.ok(t, "stream", "subscribe", "orders", "o-1", "audit", "--json"))[0]["id"].(string)
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		w.ok(t, "stream", "publish", "orders", "o-1", "placed")
		deadline := time.Now().Add(20 * time.Second)
		for len(jsonLines(t, w.ok(t, "stream", "parked", sub, "--json"))) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no parked event after 20s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}

		// The CLI, now the consumer's processor, delivers it again. A
		// server lets go of a remote processor's streams after its Stop
		// returns, and until then refuses another group for the consumer.
		var code int
		var out, errOut string
		deadline = time.Now().Add(20 * time.Second)
		for {
			code, out, errOut = w.run(t, "", "stream", "consume", "audit", "--replay", sub, "--json", "--for", "60s")
			if !strings.Contains(errOut, "until its streams here close") || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		lines := jsonLines(t, out)
		if code != ExitOK || len(lines) != 2 || lines[0]["body"] != "placed" || lines[1]["replayed"] != 1.0 {
			t.Fatalf("stream consume --replay: exit %d, %q %q", code, out, errOut)
		}
		if parked := jsonLines(t, w.ok(t, "stream", "parked", sub, "--json")); len(parked) != 0 {
			t.Fatalf("parked after the replay: %v", parked)
		}

		// Live events, through a namespace subscription made at start.
		var stdout, stderr bytes.Buffer
		finished := make(chan int, 1)
		go func() {
			finished <- dispatch(t.Context(), append([]string{"stream", "consume", "ledger", "--namespace", "orders", "--count", "2",
				"--for", "60s"}, w.flags...), strings.NewReader(""), &stdout, &stderr)
		}()
		deadline = time.Now().Add(20 * time.Second)
		for !strings.Contains(w.ok(t, "stream", "subscriptions", "orders", "o-2"), "ledger") {
			if time.Now().After(deadline) {
				t.Fatal("stream consume --namespace made no subscription in 20s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		w.ok(t, "stream", "publish", "orders", "o-2", "first", "second")
		select {
		case code := <-finished:
			if code != ExitOK || !strings.Contains(stdout.String(), ": first") || !strings.Contains(stdout.String(), ": second") {
				t.Fatalf("stream consume --count 2: exit %d, %q %q", code, stdout.String(), stderr.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("stream consume --count 2 still runs after 60s: %q %q", stdout.String(), stderr.String())
		}
		w.fails(t, ExitUsage, "exclude each other", "stream", "consume", "audit", "--replay", sub, "--fail", "x")
	})
}

// dlq resubmit --reason moves only the dead letters of that reason.
func TestResubmitByReason(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "work")
		w.ok(t, "send", "work", "a", "b", "c")
		w.ok(t, "receive", "work", "--dead-letter", "Broken")
		w.ok(t, "receive", "work", "--dead-letter", "Late")
		w.ok(t, "receive", "work", "--dead-letter", "Broken")
		if out := w.ok(t, "dlq", "resubmit", "work", "--reason", "Broken"); out != "resubmitted 2\n" {
			t.Fatalf("dlq resubmit --reason printed %q", out)
		}
		dead := jsonLines(t, w.ok(t, "dlq", "list", "work", "--json"))
		if len(dead) != 1 || dead[0]["deadLetterReason"] != "Late" {
			t.Fatalf("dead letters after resubmit --reason Broken: %v", dead)
		}
		if out := w.ok(t, "dlq", "resubmit", "work", "--reason", "Nothing"); out != "resubmitted 0\n" {
			t.Fatalf("dlq resubmit --reason with none printed %q", out)
		}
		w.fails(t, ExitUsage, "exclude each other", "dlq", "resubmit", "work", "2", "--reason", "Late")
		if got := states(t, w, "work"); len(got) != 2 {
			t.Fatalf("after resubmit: %v", got)
		}

		// Purges by reason and by number delete those alone.
		w.ok(t, "receive", "work", "--dead-letter", "Broken")
		w.ok(t, "receive", "work", "--dead-letter", "Stale")
		if out := w.ok(t, "dlq", "purge", "work", "--reason", "Broken", "-f"); out != "purged 1\n" {
			t.Fatalf("dlq purge --reason printed %q", out)
		}
		var late string
		for _, d := range jsonLines(t, w.ok(t, "dlq", "list", "work", "--json")) {
			if d["deadLetterReason"] == "Broken" {
				t.Fatalf("a Broken dead letter left after the purge: %v", d)
			}
			if d["deadLetterReason"] == "Late" {
				late = strconv.Itoa(int(d["sequenceNumber"].(float64)))
			}
		}
		if out := w.ok(t, "dlq", "purge", "work", late, "999", "--json"); out != "{\"purged\":1}\n" {
			t.Fatalf("dlq purge %s 999 printed %q", late, out)
		}
		dead = jsonLines(t, w.ok(t, "dlq", "list", "work", "--json"))
		if len(dead) != 1 || dead[0]["deadLetterReason"] != "Stale" {
			t.Fatalf("dead letters after the purges: %v", dead)
		}
		w.fails(t, ExitUsage, "exclude each other", "dlq", "purge", "work", "2", "--reason", "Late")
		w.fails(t, ExitUsage, "sequence number", "dlq", "purge", "work", "0")
	})
}

// A failed command says its name once, the condition without the
// library's prefixes, and the fix when there is one.
func TestErrorLine(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"receive", fmt.Errorf("sluice: receive: sluice: lease: queue \"carts\": %w", sluice.ErrSessionRequired),
			"sluice receive: lease: queue \"carts\": session required\n  hint: the queue requires sessions: --session ID"},
		{"queue show", fmt.Errorf("sluice: get queue: %w", sluice.ErrEntityNotFound), "sluice queue show: get queue: entity not found\n  hint: queue list"},
		{"queue list", connect.NewError(connect.CodeUnauthenticated, "no credentials"),
			"sluice queue list: unauthenticated: no credentials\n  hint: give the server a key: --token TOKEN, or SLUICE_TOKEN"},
		{"peek", errors.New("something else"), "sluice peek: something else"},
	} {
		if got := errorLine(c.name, c.err); !strings.HasPrefix(got, c.want) || strings.Count(got, "sluice") != 1 {
			t.Errorf("errorLine(%q, %v) =\n%s\nwant it to start with\n%s", c.name, c.err, got, c.want)
		}
	}
	if got := errorLine("peek", errors.New("something else")); strings.Contains(got, "hint") {
		t.Errorf("a hint for an error without one: %q", got)
	}
}

// A partitioned queue is created with --partitions, shows them, and
// sends and receives as any queue; the count is fixed at creation.
func TestPartitionedQueueCommands(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		q := jsonLines(t, w.ok(t, "queue", "create", "wide", "--partitions", "4", "--json"))[0]
		if q["partitionCount"] != 4.0 {
			t.Fatalf("queue create --partitions 4: %v", q)
		}
		if out := w.ok(t, "queue", "show", "wide"); !strings.Contains(out, "partitions") || !strings.Contains(out, "4") {
			t.Fatalf("queue show of a partitioned queue:\n%s", out)
		}
		w.ok(t, "send", "wide", "one", "two", "three")
		if msgs := jsonLines(t, w.ok(t, "receive", "wide", "--max", "3", "--wait", "10s", "--json")); len(msgs) != 3 {
			t.Fatalf("receive from a partitioned queue: %v", msgs)
		}
		w.fails(t, ExitUsage, "", "queue", "update", "wide", "--partitions", "2")
		w.fails(t, ExitError, "", "queue", "create", "wider", "--partitions", "17")
		if tp := jsonLines(t, w.ok(t, "topic", "create", "news", "--partitions", "2", "--json"))[0]; tp["partitionCount"] != 2.0 {
			t.Fatalf("topic create --partitions 2: %v", tp)
		}
	})
}
