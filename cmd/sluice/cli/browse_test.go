package cli

import (
	"slices"
	"testing"
)

func seqField(ms []map[string]any) []int {
	out := []int{}
	for _, m := range ms {
		out = append(out, int(m["sequenceNumber"].(float64)))
	}
	return out
}

// peek searches by state, id, correlation id, subject, session,
// property and dead-letter reason; dlq reasons counts the reasons.
func TestPeekSearch(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "orders")
		w.ok(t, "send", "orders", "pizza", "--message-id", "m-1", "--correlation-id", "c-1", "--subject", "food", "--property", "size=L")
		w.ok(t, "send", "orders", "pasta", "--property", "size=S")
		w.ok(t, "send", "orders", "later", "--schedule-in", "1h")
		w.ok(t, "send", "orders", "x", "y", "z")
		held := jsonLines(t, w.ok(t, "receive", "orders", "--max", "1", "--no-complete", "--json"))
		if len(held) != 1 || held[0]["sequenceNumber"] != 1.0 {
			t.Fatalf("receive --no-complete: %v", held)
		}
		find := func(args ...string) []int {
			t.Helper()
			return seqField(jsonLines(t, w.ok(t, append([]string{"peek", "orders", "--json", "--max", "100"}, args...)...)))
		}
		for _, c := range []struct {
			args []string
			want []int
		}{
			{[]string{"--message-id", "m-1"}, []int{1}},
			{[]string{"--correlation-id", "c-1"}, []int{1}},
			{[]string{"--subject", "food"}, []int{1}},
			{[]string{"--property", "size=S"}, []int{2}},
			{[]string{"--state", "locked,scheduled"}, []int{1, 3}},
			{[]string{"--state", "active"}, []int{2, 4, 5, 6}},
			{[]string{"--state", "active", "--max", "2"}, []int{2, 4}},
			{[]string{"--state", "active", "--from", "5"}, []int{5, 6}},
			{[]string{"--message-id", "none"}, []int{}},
		} {
			if got := find(c.args...); !slices.Equal(got, c.want) {
				t.Errorf("peek %v = %v, want %v", c.args, got, c.want)
			}
		}
		w.fails(t, ExitUsage, "--state", "peek", "orders", "--state", "gone")
		w.fails(t, ExitUsage, "--reason needs --dlq", "peek", "orders", "--reason", "x")
		w.fails(t, ExitUsage, "exclude", "peek", "orders", "--dlq", "--state", "active")

		// Dead letters by reason: counted, searched, purged.
		tokens := jsonLines(t, w.ok(t, "receive", "orders", "--max", "3", "--no-complete", "--json"))
		for i, m := range tokens {
			reason := "Late"
			if i == 2 {
				reason = "Burnt"
			}
			w.ok(t, "message", "dead-letter", "orders", m["lockToken"].(string), "--reason", reason)
		}
		reasons := jsonLines(t, w.ok(t, "dlq", "reasons", "orders", "--json"))
		if len(reasons) != 2 || reasons[0]["reason"] != "Late" || reasons[0]["count"] != 2.0 || reasons[1]["reason"] != "Burnt" {
			t.Fatalf("dlq reasons --json: %v", reasons)
		}
		wantContains(t, "dlq reasons", w.ok(t, "dlq", "reasons", "orders"), "COUNT", "2  ", "Late", "Burnt")
		late := seqField(jsonLines(t, w.ok(t, "peek", "orders", "--dlq", "--reason", "Late", "--json")))
		if len(late) != 2 {
			t.Fatalf("peek --dlq --reason Late: %v", late)
		}
		if out := w.ok(t, "dlq", "purge", "orders", "--reason", "Late", "-f"); out != "purged 2\n" {
			t.Fatalf("dlq purge --reason printed %q", out)
		}
		if got := seqField(jsonLines(t, w.ok(t, "peek", "orders", "--dlq", "--json"))); len(got) != 1 {
			t.Fatalf("after purging Late the dead letters are %v", got)
		}
		// --reason "" selects those without a reason: none here.
		if got := seqField(jsonLines(t, w.ok(t, "peek", "orders", "--dlq", "--reason", "", "--json"))); len(got) != 0 {
			t.Fatalf("peek --dlq --reason '' found %v", got)
		}
		if out := w.ok(t, "dlq", "purge", "orders", "--reason", "", "-f"); out != "purged 0\n" {
			t.Fatalf("dlq purge --reason '' printed %q", out)
		}
	})
}

// message delete deletes numbered or oldest messages, never a locked
// one; message purge deletes the rest.
func TestMessageDeleteAndPurge(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "jobs")
		w.ok(t, "send", "jobs", "1", "2", "3", "4", "5", "6")
		w.ok(t, "receive", "jobs", "--max", "1", "--no-complete")
		if out := w.ok(t, "message", "delete", "jobs", "1,2", "-f"); out != "deleted 1\n" {
			t.Fatalf("message delete 1,2 printed %q (1 is locked)", out)
		}
		if out := jsonLines(t, w.ok(t, "message", "delete", "jobs", "--oldest", "2", "-f", "--json")); len(out) != 1 || out[0]["deleted"] != 2.0 {
			t.Fatalf("message delete --oldest 2 --json: %v", out)
		}
		if got := seqField(jsonLines(t, w.ok(t, "peek", "jobs", "--json"))); !slices.Equal(got, []int{1, 5, 6}) {
			t.Fatalf("after the deletes: %v", got)
		}
		w.fails(t, ExitUsage, "--oldest", "message", "delete", "jobs")
		w.fails(t, ExitUsage, "exclude", "message", "delete", "jobs", "3", "--oldest", "1")
		w.fails(t, ExitUsage, "--oldest -1", "message", "delete", "jobs", "--oldest", "-1")
		w.fails(t, ExitUsage, "flag -before: want a time", "message", "purge", "jobs", "--before", "yesterday")
		w.fails(t, ExitNotFound, "", "message", "purge", "nothing", "-f")
		if out := w.ok(t, "message", "purge", "jobs", "--before", "2000-01-01T00:00:00Z", "-f"); out != "purged 0\n" {
			t.Fatalf("message purge --before 2000 printed %q", out)
		}
		if out := w.ok(t, "message", "purge", "jobs", "-f"); out != "purged 2\n" {
			t.Fatalf("message purge printed %q", out)
		}
		if got := seqField(jsonLines(t, w.ok(t, "peek", "jobs", "--json"))); !slices.Equal(got, []int{1}) {
			t.Fatalf("after the purge: %v (the locked message stays)", got)
		}
	})
}
