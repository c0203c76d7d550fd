package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/sluicehq/sluice"
)

// migrate applies the schema's migrations to a database, or prints them.
func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fset.SetOutput(stderr)
	db := fset.String("db", "", "database DSN (env SLUICE_DB; default "+defaultServeConfig().DB+")")
	print := fset.Bool("print", false, "print the migrations' SQL in the database's dialect, for review, instead of applying them")
	if err := fset.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return ExitOK
		}
		return ExitUsage
	}
	dsn := *db
	if dsn == "" {
		dsn = os.Getenv("SLUICE_DB")
	}
	if dsn == "" {
		dsn = defaultServeConfig().DB
	}
	migrations, err := sluice.Migrations(dsn)
	if err != nil {
		fmt.Fprintln(stderr, "sluice migrate:", err)
		return ExitUsage
	}
	names, err := fs.Glob(migrations, "*.sql")
	if err != nil || len(names) == 0 {
		fmt.Fprintln(stderr, "sluice migrate: no migrations:", err)
		return ExitError
	}
	if *print {
		for _, name := range names {
			sql, err := fs.ReadFile(migrations, name)
			if err != nil {
				fmt.Fprintln(stderr, "sluice migrate:", err)
				return ExitError
			}
			fmt.Fprintf(stdout, "-- ==== %s ====\n%s\n", name, strings.TrimRight(string(sql), "\n"))
		}
		return ExitOK
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b, err := sluice.OpenBackend(ctx, dsn, sluice.Options{Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, "sluice migrate:", err)
		return ExitError
	}
	defer b.Close()
	last := names[len(names)-1]
	fmt.Fprintf(stdout, "%s: schema at version %s (%s)\n", sluice.RedactDSN(dsn), strings.SplitN(last, "_", 2)[0], last)
	return ExitOK
}
