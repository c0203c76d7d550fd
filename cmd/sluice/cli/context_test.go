package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Contexts name where commands work: add one, select it, and commands
// without --server or --db work there; --context names another; the
// file is the user's alone, and shows no API key.
func TestContexts(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SLUICE_CONFIG_DIR", dir)
	none := where{name: "none"}
	if out := none.ok(t, "context", "list"); !strings.Contains(out, "no contexts in "+filepath.Join(dir, "contexts.json")) {
		t.Fatalf("context list with none: %q", out)
	}
	url := startServer(t)
	if out := none.ok(t, "context", "add", "local", "--server", url, "--token", "secret", "--select"); !strings.Contains(out, "(selected)") {
		t.Fatalf("context add --select: %q", out)
	}
	none.ok(t, "queue", "create", "orders")
	if out := none.ok(t, "queue", "list", "--server", url); !strings.Contains(out, "orders") {
		t.Fatalf("the selected context's server has no queue orders: %q", out)
	}
	file := filepath.Join(t.TempDir(), "ctx.db")
	none.ok(t, "context", "add", "file", "--db", "sqlite://"+file, "--service", "svc")
	code, out, errOut := none.run(t, "", "queue", "create", "invoices", "--context", "file")
	if code != ExitOK || !strings.Contains(errOut, "created the database "+file+" (from context file)") {
		t.Fatalf("queue create --context file: exit %d, %q %q", code, out, errOut)
	}
	if out := none.ok(t, "queue", "list", "--db", file, "--service", "svc"); !strings.Contains(out, "invoices") {
		t.Fatalf("the context's database and tenant have no queue invoices: %q", out)
	}
	if out := none.ok(t, "queue", "list"); strings.Contains(out, "invoices") {
		t.Fatalf("the selected context reached the other context's database: %q", out)
	}
	t.Setenv("SLUICE_CONTEXT", "file")
	if out := none.ok(t, "queue", "list"); !strings.Contains(out, "invoices") {
		t.Fatalf("SLUICE_CONTEXT did not beat the selected context: %q", out)
	}
	t.Setenv("SLUICE_CONTEXT", "")

	none.fails(t, ExitUsage, `context "local" exists: give -f`, "context", "add", "local", "--server", url)
	none.ok(t, "context", "add", "local", "--server", url, "-f")
	none.fails(t, ExitUsage, `no context "nosuch" (there are file, local`, "queue", "list", "--context", "nosuch")
	none.fails(t, ExitUsage, "give --server URL or --db DSN", "context", "add", "x")
	none.fails(t, ExitUsage, "--server and --db", "context", "add", "x", "--server", url, "--db", file)
	none.fails(t, ExitUsage, "context name", "context", "add", "../x", "--server", url)
	none.fails(t, ExitUsage, "want http://host:port", "context", "add", "x", "--server", "ftp://h")
	none.fails(t, ExitUsage, "--context names a server or a database itself", "queue", "list", "--context", "file", "--db", file)

	info, err := os.Stat(filepath.Join(dir, "contexts.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("contexts file: %v, mode %v, want 0600", err, info.Mode())
	}
	none.ok(t, "context", "add", "keyed", "--server", url, "--token", "hush")
	out = none.ok(t, "context", "list", "--json")
	if strings.Contains(out, "hush") || strings.Contains(out, "secret") {
		t.Fatalf("context list --json shows an API key: %s", out)
	}
	var selected []string
	for _, c := range jsonLines(t, out) {
		if c["selected"] == true {
			selected = append(selected, c["name"].(string))
		}
	}
	if len(selected) != 1 || selected[0] != "local" {
		t.Fatalf("selected contexts %v, want [local]", selected)
	}
	if out := none.ok(t, "context", "show", "keyed"); !strings.Contains(out, "with an API key") || strings.Contains(out, "hush") {
		t.Fatalf("context show: %q", out)
	}
	none.ok(t, "context", "select", "--none")
	none.fails(t, ExitUsage, "no context selected", "context", "show")
	none.ok(t, "context", "select", "file")
	none.ok(t, "context", "remove", "file")
	var cs contexts
	b, _ := os.ReadFile(filepath.Join(dir, "contexts.json"))
	if err := json.Unmarshal(b, &cs); err != nil || cs.Selected != "" || len(cs.Contexts) != 2 {
		t.Fatalf("after removing the selected context: %+v, %v", cs, err)
	}
}

// With nothing saying where, a command works through a server answering
// at sluice serve's default address, else on the default database if it
// exists, and otherwise refuses, creating nothing, unless --create; it
// names on stderr what it chose and the database file it opened or
// created.
func TestImplicitTarget(t *testing.T) {
	t.Chdir(t.TempDir())
	none := where{name: "none"}
	none.fails(t, ExitUsage, "nowhere to work: no server answers at http://127.0.0.1:7070", "queue", "list")
	if _, err := os.Stat("sluice-data"); !os.IsNotExist(err) {
		t.Fatalf("a refused command left sluice-data behind: %v", err)
	}
	code, _, errOut := none.run(t, "", "queue", "create", "here", "--create")
	if code != ExitOK || !strings.Contains(errOut, "created the database sluice-data/sluice.db (from the default)") {
		t.Fatalf("--create: exit %d, %q", code, errOut)
	}
	code, out, errOut := none.run(t, "", "queue", "list")
	if code != ExitOK || !strings.Contains(out, "here") || !strings.Contains(errOut, "using the database sluice-data/sluice.db") {
		t.Fatalf("the default database once it exists: exit %d, %q %q", code, out, errOut)
	}
	url := startServer(t)
	localServer = func(context.Context) (string, bool) { return url, true }
	t.Cleanup(func() { localServer = func(context.Context) (string, bool) { return "", false } })
	code, out, errOut = none.run(t, "", "queue", "list")
	if code != ExitOK || strings.Contains(out, "here") || !strings.Contains(errOut, "working through the server at "+url) {
		t.Fatalf("with a local server: exit %d, %q %q", code, out, errOut)
	}
}
