package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"connectrpc.com/connect/v2"
	"golang.org/x/term"

	"github.com/sluicehq/sluice"
)

// op is one operator command: the words that name it, its arguments, its
// own flags, and what it does once connected to a server or a database.
type op struct {
	name  string // the words that name it: "queue create", "send"
	args  string // its arguments, as the usage line shows them
	about string // what it does, for -h
	// minArgs and maxArgs bound the arguments (maxArgs < 0: no bound).
	minArgs, maxArgs int
	// streams: the command works on streams, which need a database and
	// the tenant's partition count.
	streams bool
	// noTarget: the command works on neither a server nor a database
	// (sluice context): it runs with no api.
	noTarget bool
	// confirm, for a command that destroys, says what it is about to do
	// ("" when it destroys nothing this time): on a terminal the command
	// asks before it starts, unless -f.
	confirm func(args []string) string
	flags   func(fs *flag.FlagSet)
	// check validates the flags and arguments before anything is opened
	// (nil: nothing to check); its errors are usage errors.
	check func(args []string) error
	run   func(ctx context.Context, e *env, args []string) error
}

// env is what a command runs with: where it works, how it prints, and
// the standard streams.
type env struct {
	api    sluiceAPI
	json   bool
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// operatorOps returns the operator commands, each with flags of its own.
func operatorOps() []*op {
	return []*op{
		opQueueCreate(), opQueueList(), opQueueShow(), opQueueUpdate(), opQueueDelete(),
		opTopicCreate(), opTopicList(), opTopicShow(), opTopicUpdate(), opTopicDelete(),
		opSubscriptionCreate(), opSubscriptionList(), opSubscriptionShow(), opSubscriptionUpdate(), opSubscriptionDelete(),
		opRuleAdd(), opRuleDelete(),
		opSend(), opReceive(), opPeek(),
		opMessageComplete(), opMessageAbandon(), opMessageDeadLetter(), opMessageDefer(), opMessageRenewLock(), opMessageRelease(),
		opMessageCancelScheduled(), opMessageDelete(), opMessagePurge(),
		opDLQList(), opDLQReasons(), opDLQResubmit(), opDLQPurge(),
		opStreamPublish(), opStreamTail(),
		opStreamSubscribe(), opStreamSubscriptions(), opStreamSubscription(), opStreamUnsubscribe(),
		opStreamClearFault(), opStreamParked(), opStreamReposition(), opStreamStats(), opStreamLag(), opStreamRetention(), opStreamConsume(),
		opSessionState(), opSessionRenew(), opSessionRelease(),
		opClusterStatus(), opStats(),
		opContextAdd(), opContextList(), opContextSelect(), opContextShow(), opContextRemove(),
	}
}

// runOperator runs the operator command args name; ok is false when
// they name none.
func runOperator(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int, ok bool) {
	var group []*op
	for _, o := range operatorOps() {
		words := strings.Fields(o.name)
		switch {
		case words[0] != args[0]:
		case len(words) == 1:
			return o.exec(ctx, args[1:], stdin, stdout, stderr), true
		case len(args) > 1 && args[1] == words[1]:
			return o.exec(ctx, args[2:], stdin, stdout, stderr), true
		default:
			group = append(group, o)
		}
	}
	if len(group) == 0 {
		return 0, false
	}
	w, code := stderr, ExitUsage
	switch {
	case len(args) > 1 && (args[1] == "-h" || args[1] == "--help" || args[1] == "help"):
		w, code = stdout, ExitOK
	case len(args) > 1:
		fmt.Fprintf(stderr, "sluice %s: unknown command %q\n", args[0], args[1])
	default:
		fmt.Fprintf(stderr, "sluice %s: which one?\n", args[0])
	}
	fmt.Fprintln(w, "usage:")
	for _, o := range group {
		fmt.Fprintf(w, "  %s\n      %s\n", o.usage(), strings.ReplaceAll(o.about, "\n", "\n      "))
	}
	return code, true
}

// exec parses the command's flags and arguments, connects, runs it, and
// turns its error into an exit code.
func (o *op) exec(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var t target
	var force bool
	fs := o.flagSet(&t, &force)
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "usage: %s\n\n%s\n\nflags:\n", o.usage(), o.about)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return ExitOK
	}
	if err == nil {
		err = o.checkArgs(pos)
	}
	if err == nil && o.check != nil {
		err = o.check(pos)
	}
	if err == nil && !o.noTarget {
		err = t.resolve(fs, os.Getenv)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice %s: %v\nusage: %s (-h lists the flags)\n", o.name, err, o.usage())
		return ExitUsage
	}
	if o.confirm != nil && !force {
		if what := o.confirm(pos); what != "" && isInteractive(stdin) && !confirmed(stdin, stderr, what) {
			fmt.Fprintf(stderr, "sluice %s: not confirmed: nothing done (-f skips the question)\n", o.name)
			return ExitError
		}
	}
	if err := o.connectAndRun(ctx, &t, pos, stdin, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, errorLine(o.name, err))
		return exitCode(err)
	}
	return ExitOK
}

// flagSet returns the command's flags: -f for one that asks before it
// destroys, where it works (or only --json), and its own.
func (o *op) flagSet(t *target, force *bool) *flag.FlagSet {
	fs := flag.NewFlagSet(o.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if o.confirm != nil {
		fs.BoolVar(force, "f", false, "do not ask for confirmation")
	}
	if o.noTarget {
		fs.BoolVar(&t.json, "json", false, "print one JSON object a line")
	} else {
		t.register(fs)
	}
	if o.flags != nil {
		o.flags(fs)
	}
	return fs
}

// summary is the first clause of what the command does, for the
// top-level help.
func (o *op) summary() string {
	s := strings.Join(strings.Fields(o.about), " ")
	for _, sep := range []string{". ", "; ", ": ", ", then", " (", ", from", ", one", ", each"} {
		s, _, _ = strings.Cut(s, sep)
	}
	return strings.TrimSuffix(s, ".")
}

// usage is the command's usage line.
func (o *op) usage() string {
	return strings.TrimSpace("sluice " + o.name + " [flags] " + o.args)
}

func (o *op) checkArgs(pos []string) error {
	if len(pos) >= o.minArgs && (o.maxArgs < 0 || len(pos) <= o.maxArgs) {
		return nil
	}
	if len(pos) < o.minArgs {
		return fmt.Errorf("missing arguments: want %s", o.args)
	}
	return fmt.Errorf("unexpected arguments %q", pos[o.maxArgs:])
}

func (o *op) connectAndRun(ctx context.Context, t *target, pos []string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := &env{json: t.json, getenv: os.Getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if o.noTarget {
		return o.run(ctx, e, pos)
	}
	a, err := t.open(ctx, o.streams, stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	e.api = a
	return o.run(ctx, e, pos)
}

// parseArgs parses flags wherever they stand among the arguments, as in
// "queue create orders --lock-duration 30s", and returns the others in
// order; after "--" every argument is one of them.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// errNothing reports a receive that found no message.
var errNothing = errors.New("no message to receive")

// exitCode is the exit code that tells scripts what kind of error err is.
func exitCode(err error) int {
	code := connect.CodeOf(err)
	switch {
	case errors.Is(err, errUsage):
		return ExitUsage
	case errors.Is(err, errNothing):
		return ExitNothing
	case errors.Is(err, sluice.ErrEntityNotFound), errors.Is(err, sluice.ErrMessageNotFound), errors.Is(err, sluice.ErrSubscriptionNotFound):
		return ExitNotFound
	case code == connect.CodeUnauthenticated, code == connect.CodePermissionDenied:
		return ExitRefused
	}
	return ExitError
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string { return strings.Join(*r, ", ") }

func (r *repeated) Set(v string) error {
	*r = append(*r, v)
	return nil
}

// keyValues parses the key=value pairs of a repeated flag.
func keyValues(flagName string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want key=value", flagName, p)
		}
		m[k] = v
	}
	return m, nil
}

// isInteractive reports whether r is a terminal someone can answer at
// (a reader may say so itself, as tests' do).
func isInteractive(r io.Reader) bool {
	if t, ok := r.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirmed asks whether to do what, and reports whether the answer was
// yes.
func confirmed(stdin io.Reader, stderr io.Writer, what string) bool {
	fmt.Fprintf(stderr, "%s? [y/N] ", what)
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}
