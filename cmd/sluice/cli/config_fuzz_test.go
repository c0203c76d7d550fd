package cli

import (
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// FuzzServeConfig loads arbitrary bytes as sluice serve's configuration
// file, with its keys and grants, and builds the server it describes on
// a SQLite-backed client. Nothing panics, and a configuration that is
// accepted is valid: no negative bound, key names distinct, every grant
// pattern a name or a prefix ending in its only '*', and every key's
// token authenticates while a wrong one does not.
func FuzzServeConfig(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"db": "sqlite://x.db", "addr": "127.0.0.1:0", "max_receive_wait": "30s", "max_request_bytes": 1048576,
		  "log_level": "warn", "log_format": "json", "self_check": false, "stream_partitions": 16}`,
		`{"token": "0123456789abcdef0123"}`,
		`{"keys": [{"name": "app", "token": "0123456789abcdef0123", "rate_per_second": 10, "burst": 20,
		  "grants": [{"actions": ["send", "receive"], "entities": ["orders-*", "billing/Subscriptions/*"]}]},
		 {"name": "ops", "token_sha256": "` + strings.Repeat("ab", 32) + `",
		  "grants": [{"actions": ["all"], "entities": ["*"]}, {"actions": ["manage"], "entities": ["$cluster"]}]}]}`,
		// A '*' inside a pattern, and two keys of one name (issue 15.19).
		`{"keys": [{"name": "a", "token": "0123456789abcdef0123", "grants": [{"actions": ["send"], "entities": ["orders*eu"]}]}]}`,
		`{"keys": [{"name": "a", "token": "0123456789abcdef0123"}, {"name": "a", "token": "0123456789abcdef0124"}]}`,
		`{"keys": [{"name": "a", "token": "short"}]}`,
		`{"max_receive_wait": "-1s", "max_request_bytes": -1, "max_consumers": -5}`,
		`{"max_receive_wait": 30}`, `{"adress": "x"}`, `[]`, `null`, `{"keys": null}`, `{"keys": [{}]}`,
	} {
		f.Add([]byte(s))
	}
	c, err := sluice.Open(f.Context(), "sqlite://"+f.TempDir()+"/fuzz.db", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "config.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadServeConfig(flag.NewFlagSet("serve", flag.ContinueOnError), []string{"--config", path},
			func(string) string { return "" })
		if err != nil {
			return
		}
		keys, err := cfg.keys()
		if err != nil || cfg.validate() != nil {
			return
		}
		// The address is checked when the server listens, not here; a
		// loopback one keeps the check from resolving names.
		srv, err := server.New(server.Config{Client: c, Addr: "127.0.0.1:0", Keys: keys, Insecure: cfg.Insecure,
			MaxRequestBytes: cfg.MaxRequestBytes, MaxReceiveWait: time.Duration(cfg.MaxReceiveWait), MaxConsumers: cfg.MaxConsumers,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return
		}
		checkAccepted(t, cfg, keys)
		checkAuthenticates(t, srv.Handler(), cfg, keys)
	})
}

// checkAccepted checks an accepted configuration's values.
func checkAccepted(t *testing.T, cfg serveConfig, keys []server.Key) {
	t.Helper()
	if cfg.MaxRequestBytes < 0 || cfg.MaxReceiveWait < 0 || cfg.MaxConsumers < 0 || cfg.StreamPartitions < 0 {
		t.Fatalf("configuration with a negative bound accepted: max_request_bytes %d, max_receive_wait %v, "+
			"max_consumers %d, stream_partitions %d", cfg.MaxRequestBytes, time.Duration(cfg.MaxReceiveWait), cfg.MaxConsumers, cfg.StreamPartitions)
	}
	names := make(map[string]bool)
	for _, k := range keys {
		if k.Name == "" || names[k.Name] {
			t.Fatalf("keys named %q twice (or not at all) accepted", k.Name)
		}
		names[k.Name] = true
		for _, g := range k.Grants {
			if g.Actions == 0 || len(g.Entities) == 0 {
				t.Fatalf("key %q: a grant of %v on %q accepted", k.Name, g.Actions, g.Entities)
			}
			for _, p := range g.Entities {
				if i := strings.IndexByte(p, '*'); p == "" || i >= 0 && i != len(p)-1 {
					t.Fatalf("key %q: grant pattern %q accepted ('*' only ends a prefix)", k.Name, p)
				}
			}
		}
	}
}

// checkAuthenticates calls the server with each key's token, and with a
// token no key has: only the latter is unauthenticated.
func checkAuthenticates(t *testing.T, h http.Handler, cfg serveConfig, keys []server.Key) {
	t.Helper()
	call := func(token string) int {
		r := httptest.NewRequest(http.MethodPost, "/sluice.v1.EntityService/GetQueue", strings.NewReader(`{"name": "q"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if len(keys) == 0 {
		return
	}
	for _, k := range keys {
		if k.Token != "" {
			if code := call(k.Token); code == http.StatusUnauthorized || code >= 500 {
				t.Fatalf("key %q: a call with its token answers %d", k.Name, code)
			}
		}
	}
	unknown := "unknown-token-0123456789abcdef"
	for _, k := range keys {
		if k.Token == unknown {
			return
		}
	}
	if code := call(unknown); code != http.StatusUnauthorized {
		t.Fatalf("a call with an unknown token answers %d, want 401", code)
	}
}
