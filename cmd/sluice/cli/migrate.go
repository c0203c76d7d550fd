package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/sluicehq/sluice"
)

// migrateUsage is the synopsis of the migrate command.
const migrateUsage = `usage: sluice migrate [up|status|print] [--db DSN]
  up      apply the pending migrations (the default)
  status  show the database's schema version and the pending migrations
  print   print every migration's SQL in the database's dialect, for review`

// migrate applies the schema's migrations to a database, reports where
// its schema stands, or prints them.
func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	action := "up"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		action, args = args[0], args[1:]
	}
	fset := flag.NewFlagSet("migrate "+action, flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprintln(stderr, migrateUsage)
		fset.PrintDefaults()
	}
	db := fset.String("db", "", "database DSN (env SLUICE_DB; default "+defaultServeConfig().DB+")")
	print := fset.Bool("print", false, "the same as migrate print")
	if err := fset.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return ExitOK
		}
		return ExitUsage
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice migrate: unexpected %q\n", fset.Arg(0))
		fset.Usage()
		return ExitUsage
	}
	if *print {
		action = "print"
	}
	dsn := *db
	if dsn == "" {
		dsn = os.Getenv("SLUICE_DB")
	}
	if dsn == "" {
		dsn = defaultServeConfig().DB
	}
	switch action {
	case "print":
		return migratePrint(dsn, stdout, stderr)
	case "up", "status":
	default:
		fmt.Fprintf(stderr, "sluice migrate: unknown action %q\n", action)
		fset.Usage()
		return ExitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := sluice.NewMigrator(ctx, dsn, &sluice.Options{Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, "sluice migrate:", err)
		if errors.Is(err, sluice.ErrInvalidArgument) {
			return ExitUsage
		}
		return ExitError
	}
	defer m.Close()
	if action == "up" {
		return migrateUp(ctx, m, dsn, stdout, stderr)
	}
	return migrateStatus(ctx, m, dsn, stdout, stderr)
}

// migratePrint prints the migrations of dsn's dialect.
func migratePrint(dsn string, stdout, stderr io.Writer) int {
	migs, err := sluice.Migrations(dsn)
	if err != nil {
		fmt.Fprintln(stderr, "sluice migrate:", err)
		return ExitUsage
	}
	for _, m := range migs {
		fmt.Fprintf(stdout, "-- ==== %s ====\n%s\n", m.Name, strings.TrimRight(m.SQL, "\n"))
	}
	return ExitOK
}

// migrateUp applies the pending migrations.
func migrateUp(ctx context.Context, m *sluice.Migrator, dsn string, stdout, stderr io.Writer) int {
	done, err := m.Up(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "sluice migrate:", err)
		return ExitError
	}
	migs := m.List()
	last := migs[len(migs)-1]
	fmt.Fprintf(stdout, "%s: schema at version %04d (%s); applied %d migration(s)\n",
		sluice.RedactDSN(dsn), last.Version, last.Name, len(done))
	return ExitOK
}

// migrateStatus reports the database's version and what is pending.
func migrateStatus(ctx context.Context, m *sluice.Migrator, dsn string, stdout, stderr io.Writer) int {
	st, err := m.Status(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "sluice migrate:", err)
		return ExitError
	}
	state := "up to date"
	switch {
	case st.Database > st.Required:
		state = "ahead of this sluice: upgrade it"
	case len(st.Pending) > 0:
		state = fmt.Sprintf("%d pending: run sluice migrate up", len(st.Pending))
	}
	fmt.Fprintf(stdout, "%s: schema at version %04d, this sluice requires %04d (%s)\n",
		sluice.RedactDSN(dsn), st.Database, st.Required, state)
	for _, p := range st.Pending {
		fmt.Fprintf(stdout, "pending %s\n", p.Name)
	}
	return ExitOK
}
