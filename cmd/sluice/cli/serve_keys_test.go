package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The bounds on reading requests and on connections, and a key's bounds
// on connections and consumers, come from the file, the environment or
// the flags; --token's key has no bounds of its own.
func TestServeConfigBounds(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.json")
	os.WriteFile(file, []byte(`{"read_timeout": "5s", "max_connections": 100, "keys": [{"name": "app", "token": "app-token-0123456789",
		"max_connections": 3, "max_consumers": 2, "grants": [{"actions": ["receive"], "entities": ["orders-*"]}]}]}`), 0o644)
	load := func(env map[string]string, args ...string) serveConfig {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, err := loadServeConfig(fs, args, func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("load(%v, %v): %v", env, args, err)
		}
		return cfg
	}
	if c := load(nil); time.Duration(c.ReadTimeout) != 30*time.Second || c.MaxConnections != 8192 {
		t.Fatalf("defaults: read timeout %v, max connections %d", time.Duration(c.ReadTimeout), c.MaxConnections)
	}
	c := load(map[string]string{"SLUICE_CONFIG": file})
	if time.Duration(c.ReadTimeout) != 5*time.Second || c.MaxConnections != 100 {
		t.Fatalf("from the file: read timeout %v, max connections %d", time.Duration(c.ReadTimeout), c.MaxConnections)
	}
	c = load(map[string]string{"SLUICE_CONFIG": file, "SLUICE_READ_TIMEOUT": "3s"}, "--max-connections", "7", "--token", "tok-0123456789abcdef")
	if time.Duration(c.ReadTimeout) != 3*time.Second || c.MaxConnections != 7 {
		t.Fatalf("the environment and a flag: read timeout %v, max connections %d", time.Duration(c.ReadTimeout), c.MaxConnections)
	}
	keys, err := c.keys()
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys: %+v, %v", keys, err)
	}
	if tok, app := keys[0], keys[1]; tok.MaxConnections != -1 || tok.MaxConsumers != -1 || app.MaxConnections != 3 || app.MaxConsumers != 2 {
		t.Fatalf("keys' bounds: --token %+v, app %+v", tok, app)
	}
	for _, bad := range [][]string{{"--read-timeout", "0s"}, {"--read-timeout", "soon"}, {"--max-connections", "0"},
		{"--history-interval", "10ms"}, {"--history-interval", "6m"}} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := loadServeConfig(fs, bad, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v, want an error about %s", bad, err, bad[0])
		}
	}
}

// serve refuses, at load, a grant pattern with '*' other than at its end
// and two keys of one name, saying how to fix them.
func TestServeRefusesBadKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ keys, want string }{
		{`[{"name": "a", "token": "a-token-0123456789", "grants": [{"actions": ["send"], "entities": ["orders*eu"]}]}]`,
			`"orders*eu": '*' stands only at the end`},
		{`[{"name": "a", "token": "a-token-0123456789", "grants": [{"actions": ["send"], "entities": ["x"]}]},
		   {"name": "a", "token": "b-token-0123456789", "grants": [{"actions": ["send"], "entities": ["y"]}]}]`,
			`two keys are named "a"`},
	} {
		file := filepath.Join(t.TempDir(), "sluice.json")
		os.WriteFile(file, []byte(`{"keys": `+tc.keys+`}`), 0o644)
		code, _, errOut := run(t, "serve", "--config", file, "--db", filepath.Join(t.TempDir(), "k.db"), "--addr", "127.0.0.1:0", "--self-check=false")
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("serve with keys %s: exit %d, %s; want a usage error with %q", tc.keys, code, errOut, tc.want)
		}
	}
}
