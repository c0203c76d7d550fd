package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// table is one case's results.
type table struct {
	c      benchCase
	rows   []row
	failed bool
}

// row is one system's line: its runs' figures, or why it has none.
type row struct {
	sys  system
	runs []figures
	note string
}

// runCase runs every selected system that has a side for k, c.runs
// times, interleaved: run 1 of every system, then run 2 of every one.
func runCase(ctx context.Context, c *config, k benchCase, log io.Writer) *table {
	t := &table{c: k}
	for _, s := range systems {
		if !slices.Contains(c.systems, s.name) || (s.raw && !k.raw) {
			continue
		}
		if (k.stream && s.stream == nil) || (!k.stream && s.queue == nil) || (k.processor && !s.processor) {
			continue
		}
		r := row{sys: s}
		if s.backend == "postgres" && c.pg == "" {
			r.note = "skipped: no --pg"
		}
		t.rows = append(t.rows, r)
	}
	for run := 1; run <= c.runs; run++ {
		for i := range t.rows {
			r := &t.rows[i]
			if r.note != "" || ctx.Err() != nil {
				continue
			}
			t0 := time.Now()
			f, err := runOnce(ctx, c, k, r.sys)
			fmt.Fprintf(log, "%s: %s run %d of %d: %v\n", k.name, r.sys.name, run, c.runs, time.Since(t0).Round(time.Millisecond))
			switch {
			case errors.Is(err, errSkip):
				r.note = "-"
			case err != nil:
				r.note = "error: " + err.Error()
				t.failed = true
				fmt.Fprintf(log, "%s: %s: %v\n", k.name, r.sys.name, err)
			default:
				r.runs = append(r.runs, f)
			}
		}
	}
	return t
}

// runOnce opens a fresh instance of sys in a directory of its own,
// measures k on it and closes it.
func runOnce(ctx context.Context, c *config, k benchCase, sys system) (figures, error) {
	dir, err := os.MkdirTemp("", "benchpeers-")
	if err != nil {
		return figures{}, err
	}
	defer os.RemoveAll(dir)
	n := 0
	e := func() *env {
		n++
		d := fmt.Sprintf("%s/%d", dir, n)
		return &env{pg: c.pg, dir: d, sqliteSync: c.sqliteSync}
	}
	if k.fresh != nil {
		return k.fresh(ctx, c, func() (queuePeer, error) {
			ee := e()
			if err := os.MkdirAll(ee.dir, 0o755); err != nil {
				return nil, err
			}
			return sys.queue(ctx, ee)
		})
	}
	ee := e()
	if err := os.MkdirAll(ee.dir, 0o755); err != nil {
		return figures{}, err
	}
	if k.stream {
		p, err := sys.stream(ctx, ee)
		if err != nil {
			return figures{}, fmt.Errorf("open: %w", err)
		}
		defer p.close(context.WithoutCancel(ctx))
		return k.streamRun(ctx, c, p)
	}
	p, err := sys.queue(ctx, ee)
	if err != nil {
		return figures{}, fmt.Errorf("open: %w", err)
	}
	defer p.close(context.WithoutCancel(ctx))
	return k.queue(ctx, c, p)
}

// median returns the median of the runs' a (or b) figures.
func median(runs []figures, b bool) float64 {
	var v []float64
	for _, f := range runs {
		if b {
			v = append(v, f.b)
		} else {
			v = append(v, f.a)
		}
	}
	slices.Sort(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

// base returns the row the ratio of r compares with: sluice on r's
// backend; for JetStream, sluice on PostgreSQL, else on SQLite.
func (t *table) base(r row) *row {
	want := []string{"sluice", "sluice-sqlite"}
	if r.sys.backend == "sqlite" {
		want = want[1:]
	}
	if r.sys.backend == "postgres" {
		want = want[:1]
	}
	for _, w := range want {
		for i := range t.rows {
			if t.rows[i].sys.name == w && len(t.rows[i].runs) > 0 {
				return &t.rows[i]
			}
		}
	}
	return nil
}

// print writes t as a Markdown table.
func (t *table) print(w io.Writer) {
	fmt.Fprintf(w, "\n### %s (%s)\n\n", t.c.title, t.c.name)
	fmt.Fprintf(w, "| system | backend | %s | x sluice | runs |\n|---|---|---|---|---|\n", t.c.unit)
	for _, r := range t.rows {
		if len(r.runs) == 0 || strings.HasPrefix(r.note, "error") {
			fmt.Fprintf(w, "| %s | %s | %s | | |\n", r.sys.name, r.sys.backend, strings.ReplaceAll(r.note, "|", "/"))
			continue
		}
		value, ratio, runs := t.format(r)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.sys.name, r.sys.backend, value, ratio, runs)
	}
}

// format returns r's median value, its ratio to sluice's and its runs.
func (t *table) format(r row) (value, ratio, runs string) {
	a := median(r.runs, false)
	var rs []string
	for _, f := range r.runs {
		if t.c.pair {
			rs = append(rs, fmt.Sprintf("%s/%s", num(f.a), num(f.b)))
		} else {
			rs = append(rs, num(f.a))
		}
	}
	runs = strings.Join(rs, " ")
	base := t.base(r)
	if !t.c.pair {
		value = num(a)
		if base != nil {
			ratio = fmt.Sprintf("%.2f", a/median(base.runs, false))
		}
		return value, ratio, runs
	}
	b := median(r.runs, true)
	value = fmt.Sprintf("%s / %s", num(a), num(b))
	if t.c.fresh != nil {
		value += fmt.Sprintf(" (%.2fx)", b/a)
	}
	if base != nil {
		ratio = fmt.Sprintf("%.2f / %.2f", a/median(base.runs, false), b/median(base.runs, true))
	}
	return value, ratio, runs
}

// num formats a figure: thousands separated above 100, else 3
// significant digits.
func num(v float64) string {
	if v >= 100 {
		s := fmt.Sprintf("%.0f", v)
		var out []byte
		for i := range len(s) {
			if i > 0 && (len(s)-i)%3 == 0 {
				out = append(out, ',')
			}
			out = append(out, s[i])
		}
		return string(out)
	}
	if v >= 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
