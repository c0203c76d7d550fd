package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// where is a back end the operator commands run against: the flags that
// name it.
type where struct {
	name  string
	flags []string
}

// startServer serves a fresh SQLite database on a free loopback port
// until the test ends, and returns its URL.
func startServer(t *testing.T, keys ...server.Key) string {
	t.Helper()
	return startServerWith(t, server.Config{Keys: keys})
}

// startServerWith is startServer with a configuration (its client and
// address are set here).
func startServerWith(t *testing.T, cfg server.Config) string {
	t.Helper()
	c, err := sluice.Open(t.Context(), filepath.Join(t.TempDir(), "server.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cfg.Client, cfg.Addr = c, "127.0.0.1:0"
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return "http://" + srv.Addr().String()
}

// both runs f in parallel against a fresh SQLite database (--db) and a
// running server (--server).
func both(t *testing.T, f func(t *testing.T, w where)) {
	t.Helper()
	for _, w := range []where{
		{"sqlite", []string{"--db", filepath.Join(t.TempDir(), "cli.db")}},
		{"server", []string{"--server", startServer(t)}},
	} {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			f(t, w)
		})
	}
}

// run runs a command against w, its flags last, with stdin as standard
// input, and returns the exit code, stdout and stderr.
func (w where) run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	noteRan(w.name, args)
	var out, errOut bytes.Buffer
	code := dispatch(t.Context(), append(slices.Clone(args), w.flags...), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// ok runs a command that must succeed, and returns its output.
func (w where) ok(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := w.run(t, "", args...)
	if code != ExitOK {
		t.Fatalf("sluice %s: exit %d: %s%s", strings.Join(args, " "), code, errOut, out)
	}
	return out
}

// fails runs a command that must exit with code and say want on stderr.
func (w where) fails(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	got, out, errOut := w.run(t, "", args...)
	if got != code || !strings.Contains(errOut, want) {
		t.Fatalf("sluice %s: exit %d, want %d; stderr %q, want %q; stdout %q", strings.Join(args, " "), got, code, errOut, want, out)
	}
}

// jsonLines parses output of --json: one object a line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for line := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		objs = append(objs, m)
	}
	return objs
}

// wantContains fails unless out holds each of want.
func wantContains(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// Flags may come before, between or after the arguments; after "--"
// everything is an argument.
func TestParseArgs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args, want []string
		subject    string
	}{
		{[]string{"q", "a", "b"}, []string{"q", "a", "b"}, ""},
		{[]string{"--subject", "s", "q", "a"}, []string{"q", "a"}, "s"},
		{[]string{"q", "--subject", "s", "a"}, []string{"q", "a"}, "s"},
		{[]string{"q", "a", "--subject=s"}, []string{"q", "a"}, "s"},
		{[]string{"q", "--", "--subject", "-x"}, []string{"q", "--subject", "-x"}, ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		subject := fs.String("subject", "", "")
		got, err := parseArgs(fs, c.args)
		if err != nil || !slices.Equal(got, c.want) || *subject != c.subject {
			t.Errorf("parseArgs(%q) = %q, subject %q, %v; want %q, subject %q", c.args, got, *subject, err, c.want, c.subject)
		}
	}
}

// Each setting comes from its flag, else its environment variable, else
// sluice serve's default; --db beats SLUICE_SERVER. With nothing said,
// the target is implicit (open looks for a local server, then the
// default database).
func TestTargetResolve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	resolve := func(env map[string]string, args ...string) (target, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var tg target
		tg.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return tg, tg.resolve(fs, func(k string) string {
			if k == "SLUICE_CONFIG_DIR" {
				return dir
			}
			return env[k]
		})
	}
	if tg, err := resolve(nil); err != nil || tg.server != "" || !tg.implicit || tg.db != "sqlite://sluice-data/sluice.db" ||
		tg.service != "default" || tg.provider != "default" {
		t.Errorf("defaults: %+v, %v", tg, err)
	}
	env := map[string]string{"SLUICE_SERVER": "http://127.0.0.1:1", "SLUICE_TOKEN": "tok", "SLUICE_DB": "env.db", "SLUICE_SERVICE": "svc"}
	if tg, err := resolve(env); err != nil || tg.server != "http://127.0.0.1:1" || tg.token != "tok" {
		t.Errorf("SLUICE_SERVER: %+v, %v", tg, err)
	}
	if tg, err := resolve(env, "--db", "flag.db"); err != nil || tg.server != "" || tg.db != "flag.db" || tg.service != "svc" {
		t.Errorf("--db over SLUICE_SERVER: %+v, %v", tg, err)
	}
	if tg, err := resolve(env, "--server", "http://127.0.0.1:2", "--token", "flag"); err != nil || tg.server != "http://127.0.0.1:2" || tg.token != "flag" {
		t.Errorf("--server and --token: %+v, %v", tg, err)
	}
	for _, bad := range [][]string{
		{"--server", "http://x:1", "--db", "x.db"},
		{"--db", "x.db", "--token", "t"},
		{"--server", "http://x:1", "--service", "s"},
	} {
		if _, err := resolve(nil, bad...); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The bar shows only when a resubmit takes more than one batch, redrawn
// in place, and ends its line.
func TestProgressBar(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	p := &progressBar{w: &b}
	p.update(10, 10)
	p.finish()
	if b.Len() != 0 {
		t.Fatalf("one batch drew %q", b.String())
	}
	p.update(1000, 2500)
	p.update(2000, 2500)
	p.update(2500, 2500)
	p.finish()
	want := "\r[============                  ] 1000/2500\r[========================      ] 2000/2500\r[==============================] 2500/2500\n"
	if b.String() != want {
		t.Fatalf("bar %q, want %q", b.String(), want)
	}
	if isTerminal(&b) {
		t.Error("a buffer is a terminal")
	}
}

// The groups list their commands; -h prints a command's flags.
func TestOperatorUsage(t *testing.T) {
	t.Parallel()
	w := where{name: "none"}
	if code, _, errOut := w.run(t, "", "queue"); code != ExitUsage || !strings.Contains(errOut, "sluice queue create [flags] NAME") {
		t.Errorf("queue alone: exit %d, %s", code, errOut)
	}
	if code, _, errOut := w.run(t, "", "dlq", "frob"); code != ExitUsage || !strings.Contains(errOut, `unknown command "frob"`) {
		t.Errorf("dlq frob: exit %d, %s", code, errOut)
	}
	if code, out, _ := w.run(t, "", "subscription", "-h"); code != ExitOK || !strings.Contains(out, "sluice subscription show [flags] TOPIC NAME") {
		t.Errorf("subscription -h: exit %d, %s", code, out)
	}
	if code, out, _ := w.run(t, "", "send", "-h"); code != ExitOK || !strings.Contains(out, "-message-id") || !strings.Contains(out, "SLUICE_SERVER") {
		t.Errorf("send -h: exit %d, %s", code, out)
	}
	code, out, _ := w.run(t, "", "help")
	if code != ExitOK || !strings.Contains(out, "5  refused") || !strings.Contains(out, "stream tail NAMESPACE [KEY]") {
		t.Errorf("help: exit %d, %s", code, out)
	}
	for _, o := range operatorOps() {
		if line := "  " + strings.TrimSpace(o.name+" "+o.args) + " "; !strings.Contains(out, line) {
			t.Errorf("help does not list %q", line)
		}
	}
	if strings.Contains(out, "--db only") {
		t.Error("help still says some commands work with --db only")
	}
}
