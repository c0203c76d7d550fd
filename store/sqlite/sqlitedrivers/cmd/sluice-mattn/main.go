// Command sluice-mattn is the sluice command, with every subcommand, plus
// the DSN scheme sqlite-mattn://PATH: sluice's SQLite backend on the mattn
// driver. It serves measurements, e.g.
//
//	sluice-mattn bench --db sqlite-mattn:///tmp/b.db --scenario e2e
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/cmd/sluice/cli"
	_ "github.com/sluicehq/sluice/store/sqlite/sqlitedrivers/mattn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
