package cli

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Shell completion comes from the operator commands' own table, as the
// help does: a command added there completes with its flags, with no
// script to keep in step.

// completeCommand is the hidden command the scripts call.
const completeCommand = "__complete"

// toolCommands are the commands outside the operator table.
var toolCommands = []string{"serve", "migrate", "demo", "bench", "version", "completion", "help"}

// completionScripts are what `sluice completion SHELL` prints: each asks
// `sluice __complete` for the candidates of the word being typed.
var completionScripts = map[string]string{
	"bash": `# sluice completion for bash: source <(sluice completion bash)
_sluice() {
	local IFS=$'\n'
	COMPREPLY=($(sluice __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _sluice sluice
`,
	"zsh": `# sluice completion for zsh: source <(sluice completion zsh)
autoload -U +X bashcompinit && bashcompinit
_sluice() {
	local IFS=$'\n'
	COMPREPLY=($(sluice __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _sluice sluice
`,
	"fish": `# sluice completion for fish: sluice completion fish | source
complete -c sluice -f -a '(sluice __complete (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null)'
`,
}

// completion prints the completion script of a shell.
func completion(args []string, stdout, stderr io.Writer) int {
	shells := slices.Sorted(maps.Keys(completionScripts))
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintf(stdout, "usage: sluice completion %s\n\nPrints the shell's completion script; load it with\n"+
			"  source <(sluice completion bash)    (or zsh)\n  sluice completion fish | source\n", strings.Join(shells, "|"))
		return ExitOK
	}
	if len(args) != 1 || completionScripts[args[0]] == "" {
		fmt.Fprintf(stderr, "sluice completion: want one shell: %s\n", strings.Join(shells, ", "))
		return ExitUsage
	}
	fmt.Fprint(stdout, completionScripts[args[0]])
	return ExitOK
}

// complete prints, a line each, the words that may stand where the last
// of args is being typed (args: the words after "sluice", the last one
// partial, perhaps empty).
func complete(args []string, stdout io.Writer) int {
	for _, c := range candidates(args) {
		fmt.Fprintln(stdout, c)
	}
	return ExitOK
}

func candidates(args []string) []string {
	if len(args) == 0 {
		args = []string{""}
	}
	done, partial := args[:len(args)-1], args[len(args)-1]
	ops := operatorOps()
	var out []string
	add := func(words ...string) {
		for _, w := range words {
			if strings.HasPrefix(w, partial) && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	switch len(done) {
	case 0:
		add(toolCommands...)
		for _, o := range ops {
			add(strings.Fields(o.name)[0])
		}
		return out
	case 1:
		if done[0] == "completion" {
			add(slices.Sorted(maps.Keys(completionScripts))...)
			return out
		}
		for _, o := range ops {
			if words := strings.Fields(o.name); len(words) == 2 && words[0] == done[0] {
				add(words[1])
			}
		}
		if len(out) > 0 || !strings.HasPrefix(partial, "-") {
			return out
		}
	}
	// A command's flags, once its words are given.
	for _, o := range ops {
		words := strings.Fields(o.name)
		if len(done) < len(words) || !slices.Equal(done[:len(words)], words) || !strings.HasPrefix(partial, "-") {
			continue
		}
		var t target
		var force bool
		o.flagSet(&t, &force).VisitAll(func(f *flag.Flag) {
			if len(f.Name) == 1 {
				add("-" + f.Name)
			} else {
				add("--" + f.Name)
			}
		})
		add("-h")
	}
	return out
}
