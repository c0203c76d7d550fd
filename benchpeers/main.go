// Command benchpeers runs one workload against sluice and its peers
// (River, goqite, NATS JetStream, Watermill's SQL Pub/Sub) and the
// database's own limit, interleaving the systems' runs, and prints a
// Markdown table per case with each system's median and its ratio to
// sluice on the same backend:
//
//	cd benchpeers && go run . --pg "$SLUICE_TEST_POSTGRES" [--runs 3] [--duration 3s] [--cases ...] [--systems ...]
//
// It is a module of its own so that sluice's module gains none of the
// peers' dependencies.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"
)

// config holds the flags.
type config struct {
	pg         string
	runs       int
	duration   time.Duration
	backlog    int
	locked     int
	rate       int
	samples    int
	cases      []string
	systems    []string
	sqliteSync string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, runs the cases and prints their tables to stdout:
// 0 when every run succeeded, 1 when one failed, 2 on bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c config
	var cases, syss string
	fs := flag.NewFlagSet("benchpeers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.pg, "pg", os.Getenv("SLUICE_TEST_POSTGRES"), "PostgreSQL DSN (default $SLUICE_TEST_POSTGRES); empty skips the PostgreSQL systems")
	fs.IntVar(&c.runs, "runs", 3, "interleaved runs of every system; the tables show medians")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "length of one timed run")
	fs.IntVar(&c.backlog, "backlog", 20000, "messages preloaded for the consume cases")
	fs.IntVar(&c.locked, "locked", 50000, "messages left locked in the receive-locked case")
	fs.IntVar(&c.samples, "samples", 100, "receives of 32 timed at each level of the receive-locked case")
	fs.IntVar(&c.rate, "rate", 500, "messages a second in the latency cases")
	fs.StringVar(&cases, "cases", "", "comma-separated cases (default all): "+strings.Join(caseNames(), ","))
	fs.StringVar(&syss, "systems", "", "comma-separated systems (default all): "+strings.Join(systemNames(), ","))
	fs.StringVar(&c.sqliteSync, "sqlite-sync", "FULL", "SQLite synchronous setting for sluice and goqite alike: FULL or NORMAL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c.cases, c.systems = split(cases, caseNames()), split(syss, systemNames())
	for _, n := range c.cases {
		if !slices.Contains(caseNames(), n) {
			fmt.Fprintf(stderr, "benchpeers: unknown case %q; cases: %s\n", n, strings.Join(caseNames(), ", "))
			return 2
		}
	}
	for _, n := range c.systems {
		if !slices.Contains(systemNames(), n) {
			fmt.Fprintf(stderr, "benchpeers: unknown system %q; systems: %s\n", n, strings.Join(systemNames(), ", "))
			return 2
		}
	}
	s := strings.ToUpper(c.sqliteSync)
	if s != "FULL" && s != "NORMAL" || c.runs < 1 || c.duration <= 0 || c.backlog < 1 || c.locked < 1 || c.rate < 1 || c.samples < 1 {
		fmt.Fprintln(stderr, "benchpeers: --sqlite-sync is FULL or NORMAL; --runs, --duration, --backlog, --locked, --samples and --rate are above 0")
		return 2
	}
	c.sqliteSync = s
	failed := false
	for _, k := range workload {
		if !slices.Contains(c.cases, k.name) {
			continue
		}
		t := runCase(ctx, &c, k, stderr)
		t.print(stdout)
		failed = failed || t.failed
		if ctx.Err() != nil {
			return 1
		}
	}
	if failed {
		return 1
	}
	return 0
}

// split reads a comma-separated list, all of all when empty.
func split(s string, all []string) []string {
	if s == "" {
		return all
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func caseNames() []string {
	var n []string
	for _, k := range workload {
		n = append(n, k.name)
	}
	return n
}

func systemNames() []string {
	var n []string
	for _, s := range systems {
		n = append(n, s.name)
	}
	return n
}
