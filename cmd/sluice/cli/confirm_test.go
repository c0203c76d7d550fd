package cli

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// tty is standard input that says it is a terminal.
type tty struct{ io.Reader }

func (tty) IsTerminal() bool { return true }

// On a terminal, a command that destroys asks first, and does nothing
// unless the answer is yes; -f skips the question, and so does input that
// is no terminal (a script's).
func TestConfirmations(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "confirm.db")
	w := where{name: "sqlite", flags: []string{"--db", db}}
	call := func(stdin io.Reader, args ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := dispatch(t.Context(), append(args, "--db", db), stdin, &out, &errOut)
		return code, errOut.String()
	}
	w.ok(t, "queue", "create", "doomed")
	code, errOut := call(tty{strings.NewReader("n\n")}, "queue", "delete", "doomed")
	if code != ExitError || !strings.Contains(errOut, `Delete queue "doomed" with its messages and dead letters? [y/N]`) ||
		!strings.Contains(errOut, "not confirmed: nothing done") {
		t.Fatalf("answered no: exit %d, %q", code, errOut)
	}
	w.ok(t, "queue", "show", "doomed")
	if code, errOut := call(tty{strings.NewReader("")}, "queue", "delete", "doomed"); code != ExitError {
		t.Fatalf("no answer: exit %d, %q", code, errOut)
	}
	if code, errOut := call(tty{strings.NewReader("yes\n")}, "queue", "delete", "doomed"); code != ExitOK {
		t.Fatalf("answered yes: exit %d, %q", code, errOut)
	}
	w.fails(t, ExitNotFound, "doomed", "queue", "show", "doomed")

	w.ok(t, "queue", "create", "forced")
	if code, errOut := call(tty{strings.NewReader("")}, "queue", "delete", "forced", "-f"); code != ExitOK || strings.Contains(errOut, "[y/N]") {
		t.Fatalf("-f: exit %d, %q", code, errOut)
	}
	w.ok(t, "queue", "create", "scripted")
	if code, errOut := call(strings.NewReader(""), "queue", "delete", "scripted"); code != ExitOK || strings.Contains(errOut, "[y/N]") {
		t.Fatalf("no terminal: exit %d, %q", code, errOut)
	}
	for _, c := range []struct {
		args []string
		ask  string
	}{
		{[]string{"dlq", "purge", "q"}, "Delete every dead letter of q?"},
		{[]string{"dlq", "resubmit", "q"}, "Resubmit every dead letter of q?"},
		{[]string{"dlq", "resubmit", "q", "--reason", "Late"}, `Resubmit every dead letter of q dead-lettered for "Late"?`},
		{[]string{"dlq", "purge", "q", "--reason", "Late"}, `Delete every dead letter of q dead-lettered for "Late"?`},
		{[]string{"dlq", "purge", "q", "3", "4"}, "Delete 2 dead letter(s) of q?"},
		{[]string{"message", "delete", "q", "3,4"}, "Delete 2 message(s) of q?"},
		{[]string{"message", "delete", "q", "--oldest", "5"}, "Delete the 5 oldest messages of q?"},
		{[]string{"message", "delete", "q", "--oldest", "5", "--before", "2026-01-02T03:04:05Z"},
			"Delete the 5 oldest messages of q enqueued before 2026-01-02T03:04:05Z?"},
		{[]string{"message", "purge", "q"}, "Delete every message of q?"},
		{[]string{"topic", "delete", "t"}, `Delete topic "t" with its subscriptions and their messages?`},
		{[]string{"subscription", "delete", "t", "s"}, "Delete subscription t/Subscriptions/s with its messages and dead letters?"},
	} {
		if code, errOut := call(tty{strings.NewReader("\n")}, c.args...); code != ExitError || !strings.Contains(errOut, c.ask) {
			t.Errorf("%q: exit %d, %q; want the question %q", c.args, code, errOut, c.ask)
		}
	}
	if _, errOut := call(tty{strings.NewReader("")}, "dlq", "resubmit", "q", "7"); strings.Contains(errOut, "[y/N]") {
		t.Errorf("resubmit of named dead letters asked: %q", errOut)
	}
}
