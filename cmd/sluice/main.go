// Command sluice is the sluice binary: the server (serve), schema
// migrations (migrate), the operator commands (queue, topic,
// subscription, send, receive, peek, dlq, stream, cluster, stats), a demo
// of the library and a load tool (bench).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/cmd/sluice/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
