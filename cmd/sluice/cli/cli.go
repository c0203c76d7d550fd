// Package cli holds the sluice command's subcommands, testable without a
// process: Run takes the arguments and the output streams and returns the
// exit code.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes, which scripts may rely on.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
	// ExitNotFound reports an entity, a message or a stream subscription
	// that does not exist.
	ExitNotFound = 3
	// ExitNothing reports a receive that found no message (in time).
	ExitNothing = 4
	// ExitRefused reports a call the server refused: no credentials, an
	// unknown token, or a key without the permission.
	ExitRefused = 5
)

const usageText = `usage: sluice <command> [flags]

commands:
  serve    serve the API on embedded SQLite or a database (sluice serve -h)
  migrate  up, status or print: apply the schema's migrations, show where a database stands, print their SQL
  demo     run a short tour of queues and partition logs on an embedded SQLite file
  bench    measure throughput and latency against a database (sluice bench -h)
  version  print sluice's version, its Go version and the commit it was built from
  completion bash|zsh|fish  print the shell's completion script (source <(sluice completion bash))

%s
  An ENTITY is a queue or a subscription's path, TOPIC/Subscriptions/NAME (send takes a topic too).
  Where they work, the first that says: --server URL (with --token) or --db DSN (with --service and
  --provider); --context NAME; SLUICE_SERVER (with SLUICE_TOKEN) or SLUICE_DB (with SLUICE_SERVICE and
  SLUICE_PROVIDER); SLUICE_CONTEXT; the selected context. With none, a server answering at
  http://127.0.0.1:7070, else the database sqlite://sluice-data/sluice.db if it exists (--create
  creates it); a database file opened or created is named on stderr. --json prints one JSON object
  a line.

exit codes:
  0  success
  1  an error
  2  a usage error: bad flags or arguments
  3  not found: the entity or the message does not exist
  4  nothing to receive: receive found no message (within --wait)
  5  refused: the server wants credentials, or the key lacks the permission
`

// usage is the top-level help: every command, the operator commands
// listed from their table, so that none is left out.
func usage() string {
	var b strings.Builder
	b.WriteString("operator commands (sluice <command> -h for each one's flags):\n")
	for _, o := range operatorOps() {
		fmt.Fprintf(&b, "  %-46s %s\n", strings.TrimSpace(o.name+" "+o.args), o.summary())
	}
	return fmt.Sprintf(usageText, b.String())
}

// Run runs the command named by args[0], reading standard input from the
// process's.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, args, os.Stdin, stdout, stderr)
}

// dispatch is Run with its standard input given, for tests.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return ExitUsage
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "migrate":
		return migrate(ctx, args[1:], stdout, stderr)
	case "demo":
		return demo(ctx, args[1:], stdout, stderr)
	case "bench":
		return bench(ctx, args[1:], stdout, stderr)
	case "version":
		return version(args[1:], stdout, stderr)
	case "completion":
		return completion(args[1:], stdout, stderr)
	case completeCommand: // what the completion scripts ask
		return complete(args[1:], stdout)
	case benchNodeCommand: // a node process of sluice bench --scenario cluster
		return benchNode(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return ExitOK
	}
	if code, ok := runOperator(ctx, args, stdin, stdout, stderr); ok {
		return code
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n%s", args[0], usage())
	return ExitUsage
}
