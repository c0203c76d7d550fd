// Package cli holds the sluice command's subcommands, testable without a
// process: Run takes the arguments and the output streams and returns the
// exit code.
package cli

import (
	"context"
	"fmt"
	"io"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

const usage = `usage: sluice <command> [flags]

commands:
  serve    serve the API on embedded SQLite or a database (sluice serve -h)
  migrate  apply the schema's migrations to a database, or print their SQL
  demo     run a short tour of queues and partition logs on an embedded SQLite file
  bench    measure throughput and latency against a database (sluice bench -h)
`

// Run runs the command named by args[0].
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
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
	case benchNodeCommand: // a node process of sluice bench --scenario cluster
		return benchNode(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n%s", args[0], usage)
	return ExitUsage
}
