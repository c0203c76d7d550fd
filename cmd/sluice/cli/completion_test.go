package cli

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Completion offers the commands, a group's subcommands and a command's
// flags, from the operator table itself.
func TestCompletion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"que"}, []string{"queue"}},
		{[]string{"s"}, []string{"serve", "send", "stream", "session", "stats", "subscription"}},
		{[]string{"queue", ""}, []string{"create", "list", "show", "update", "delete"}},
		{[]string{"message", "re"}, []string{"renew-lock", "release"}},
		{[]string{"queue", "create", "orders", "--lock"}, []string{"--lock-duration"}},
		{[]string{"dlq", "purge", "q", "-"}, nil}, // checked below: -f, the target flags, -h
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"stats", "--th"}, []string{"--throughput"}},
		{[]string{"queue", "create", "or"}, nil}, // a name: nothing to offer
	} {
		got := candidates(c.args)
		if c.want == nil {
			continue
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("candidates(%q) = %q, want %q", c.args, got, want)
		}
	}
	flags := candidates([]string{"dlq", "purge", "q", "-"})
	for _, want := range []string{"-f", "--server", "--db", "--json", "-h"} {
		if !slices.Contains(flags, want) {
			t.Errorf("dlq purge's flags %q lack %s", flags, want)
		}
	}
	if got := candidates([]string{"queue", "create", "or"}); len(got) != 0 {
		t.Errorf("a name completed with %q", got)
	}
	for shell, script := range completionScripts {
		if !strings.Contains(script, "sluice "+completeCommand) {
			t.Errorf("the %s script does not ask sluice %s", shell, completeCommand)
		}
	}
	if code := completion([]string{"tcsh"}, &strings.Builder{}, &strings.Builder{}); code != ExitUsage {
		t.Errorf("completion tcsh: exit %d", code)
	}
}

// The bash script completes in a real bash, through the command itself
// (this test binary standing in for sluice).
func TestCompletionInBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := completionScripts["bash"] + `sluice() { ` + benchNodeEnv + `=1 "` + exe + `" "$@"; }
COMP_WORDS=(sluice queue cr); COMP_CWORD=2; _sluice; printf '%s\n' "${COMPREPLY[@]}"
COMP_WORDS=(sluice message complete q --session-t); COMP_CWORD=4; _sluice; printf '%s\n' "${COMPREPLY[@]}"
`
	out, err := exec.Command(bash, "--norc", "-c", script).CombinedOutput()
	if err != nil || string(out) != "create\n--session-token\n" {
		t.Fatalf("bash completed %q (%v), want create and --session-token", out, err)
	}
}
