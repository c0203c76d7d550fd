// Command sluice-ncruces is the sluice command, with every subcommand, plus
// the DSN scheme sqlite-ncruces://PATH: sluice's SQLite backend on the ncruces
// driver. It serves measurements, e.g.
//
//	sluice-ncruces bench --db sqlite-ncruces:///tmp/b.db --scenario e2e
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/cmd/sluice/cli"
	_ "github.com/sluicehq/sluice/store/sqlite/sqlitedrivers/ncruces"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
