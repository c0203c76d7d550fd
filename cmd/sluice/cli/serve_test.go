package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// Each setting comes from its flag, else its environment variable, else
// the file, else its default.
func TestServeConfigPrecedence(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.json")
	os.WriteFile(file, []byte(`{"addr": "127.0.0.1:1001", "db": "sqlite://from-file.db", "max_receive_wait": "5s",
		"keys": [{"name": "ops", "token": "ops-token-0123456789", "max_streams": 8, "max_waits": 5, "grants": [{"actions": ["send", "receive"], "entities": ["orders-*"]}]}]}`), 0o644)
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
	if c := load(nil); c.Addr != "127.0.0.1:7070" || c.DB != "sqlite://sluice-data/sluice.db" || !c.SelfCheck || c.MaxConsumers != 256 ||
		c.SubscriptionLagMetrics {
		t.Fatalf("defaults: %+v", c)
	}
	env := map[string]string{"SLUICE_CONFIG": file}
	if c := load(env); c.Addr != "127.0.0.1:1001" || c.DB != "sqlite://from-file.db" || time.Duration(c.MaxReceiveWait) != 5*time.Second {
		t.Fatalf("from the file: %+v", c)
	}
	env["SLUICE_ADDR"] = "127.0.0.1:1002"
	if c := load(env); c.Addr != "127.0.0.1:1002" || c.DB != "sqlite://from-file.db" {
		t.Fatalf("the environment over the file: %+v", c)
	}
	if c := load(env, "--addr", "127.0.0.1:1003", "--self-check=false", "--stream-partitions", "32", "--max-consumers", "9",
		"--metrics-subscription-lag", "--history-interval", "30s"); c.Addr != "127.0.0.1:1003" ||
		c.SelfCheck || c.StreamPartitions != 32 || c.MaxConsumers != 9 || !c.SubscriptionLagMetrics || time.Duration(c.HistoryInterval) != 30*time.Second {
		t.Fatalf("a flag over the environment: %+v", c)
	}
	if c := load(nil, "--config", file, "--db", "sqlite://flag.db"); c.DB != "sqlite://flag.db" || c.Addr != "127.0.0.1:1001" {
		t.Fatalf("--config and a flag: %+v", c)
	}
	fromFile := load(env)
	keys, err := fromFile.keys()
	if err != nil || len(keys) != 1 || keys[0].Name != "ops" || len(keys[0].Grants) != 1 || keys[0].Grants[0].Actions.String() != "send+receive" ||
		keys[0].MaxStreams != 8 || keys[0].MaxWaits != 5 {
		t.Fatalf("keys from the file: %+v, %v", keys, err)
	}

	for _, bad := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"SLUICE_SELF_CHECK": "perhaps"}, nil, "SLUICE_SELF_CHECK"},
		{nil, []string{"--max-receive-wait", "soon"}, "--max-receive-wait"},
		{nil, []string{"extra"}, "unexpected arguments"},
		{map[string]string{"SLUICE_MAX_CONSUMERS": "0"}, nil, "SLUICE_MAX_CONSUMERS"},
		{map[string]string{"SLUICE_CONFIG": filepath.Join(t.TempDir(), "missing.json")}, nil, "configuration file"},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := loadServeConfig(fs, bad.args, func(k string) string { return bad.env[k] }); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v %v: %v, want an error about %s", bad.env, bad.args, err, bad.want)
		}
	}
	unknown := filepath.Join(t.TempDir(), "unknown.json")
	os.WriteFile(unknown, []byte(`{"adress": "127.0.0.1:1"}`), 0o644)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	if _, err := loadServeConfig(fs, []string{"--config", unknown}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "adress") {
		t.Errorf("a file with an unknown field: %v", err)
	}
	badKey := serveConfig{Keys: []keyConfig{{Name: "k", Token: "k-token-0123456789", Grants: []grantConfig{{Actions: []string{"fly"}, Entities: []string{"*"}}}}}}
	if _, err := badKey.keys(); err == nil || !strings.Contains(err.Error(), "fly") {
		t.Errorf("a key with an unknown permission: %v", err)
	}
}

// lockedBuffer is a buffer written by one goroutine and read by another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// sluice serve serves until its context ends, says where, checks itself,
// and shuts down cleanly.
func TestServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut lockedBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- Run(ctx, []string{"serve", "--db", filepath.Join(t.TempDir(), "serve.db"), "--addr", "127.0.0.1:0",
			"--token", "serve-test-token-0123456789", "--max-consumers", "1"}, &out, &errOut)
	}()
	serving := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)
	var url string
	for deadline := time.Now().Add(20 * time.Second); url == ""; {
		if m := serving.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case code := <-exited:
			t.Fatalf("serve exited %d: %s %s", code, out.String(), errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s %s", out.String(), errOut.String())
		}
	}
	for !strings.Contains(out.String(), "self-check") {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "self-check: created a queue, sent, received and completed a message") {
		t.Fatalf("the self-check failed: %s", out.String())
	}
	c, err := client.New(url, &client.Options{Token: "serve-test-token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatalf("CreateQueue on the served API: %v", err)
	}
	if qs, err := c.ListQueues(ctx, "", 10); err != nil || len(qs) != 1 {
		t.Fatalf("the self-check left queues behind: %+v, %v", qs, err)
	}
	// --max-consumers bounds the consumers the server runs.
	first := c.NewStreamProcessor(nil)
	first.Handle("a", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	if err := first.Start(ctx); err != nil {
		t.Fatalf("the first consumer: %v", err)
	}
	second := c.NewStreamProcessor(nil)
	second.Handle("b", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	if err := second.Start(ctx); err == nil || !strings.Contains(err.Error(), "at most 1 allowed") {
		t.Fatalf("a second consumer with --max-consumers 1: %v", err)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	anonymous, _ := client.New(url, nil)
	if _, err := anonymous.ListQueues(ctx, "", 10); err == nil {
		t.Fatal("a call without the token succeeded")
	}
	cancel()
	select {
	case code := <-exited:
		if code != ExitOK || !strings.Contains(out.String(), "shutting down") {
			t.Fatalf("serve exited %d after its context ended: %s %s", code, out.String(), errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// Without keys, serve refuses an address other machines reach, unless
// told --insecure; a bad setting is a usage error.
func TestServeRefuses(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "refuse.db")
	code, _, errOut := run(t, "serve", "--db", db, "--addr", "0.0.0.0:0", "--self-check=false")
	if code != ExitUsage || !strings.Contains(errOut, "--insecure") {
		t.Errorf("serve on 0.0.0.0 without keys: exit %d, %s", code, errOut)
	}
	code, _, errOut = run(t, "serve", "--db", db, "--log-level", "loud")
	if code != ExitUsage || !strings.Contains(errOut, "log level") {
		t.Errorf("serve --log-level loud: exit %d, %s", code, errOut)
	}
	code, _, errOut = run(t, "serve", "--db", db, "--tls-cert", "cert.pem")
	if code != ExitUsage || !strings.Contains(errOut, "go together") {
		t.Errorf("serve --tls-cert alone: exit %d, %s", code, errOut)
	}
}

// sluice migrate applies the migrations, or prints them for review.
func TestMigrate(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "migrate.db")
	migs, err := sluice.Migrations(db)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("schema at version %04d", migs[len(migs)-1].Version)
	code, out, errOut := run(t, "migrate", "--db", db)
	if code != ExitOK || !strings.Contains(out, want) || !strings.Contains(errOut, "migrated the schema") {
		t.Fatalf("migrate: exit %d, %s %s", code, out, errOut)
	}
	if c, err := sluice.Open(t.Context(), db, nil); err != nil {
		t.Fatalf("open the migrated database: %v", err)
	} else {
		c.Close()
	}
	code, out, _ = run(t, "migrate", "--db", "postgres://db.example/sluice", "--print")
	if code != ExitOK || !strings.Contains(out, "-- ==== 0001_init.sql ====") || !strings.Contains(out, "PostgreSQL dialect") ||
		!strings.Contains(out, "0011_stream_repositions.sql") {
		t.Fatalf("migrate --print: exit %d, %.300s", code, out)
	}
	if code, _, errOut := run(t, "migrate", "--db", "oracle://x"); code != ExitUsage || !strings.Contains(errOut, "unknown database scheme") {
		t.Fatalf("migrate of an unknown scheme: exit %d, %s", code, errOut)
	}
}

// serve's flags are typed: a bool takes no value (--insecure --addr X),
// and -h names each flag's kind and default, and exits 0.
func TestServeFlags(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, err := loadServeConfig(fs, []string{"--insecure", "--addr", "127.0.0.1:1", "--self-check=false"}, func(string) string { return "" })
	if err != nil || !cfg.Insecure || cfg.Addr != "127.0.0.1:1" || cfg.SelfCheck {
		t.Fatalf("--insecure --addr 127.0.0.1:1 --self-check=false: %+v, %v", cfg, err)
	}
	code, _, help := run(t, "serve", "-h")
	if code != ExitOK {
		t.Fatalf("serve -h: exit %d", code)
	}
	for _, want := range []string{"  --insecure\n", "  --max-receive-wait duration\n", "default 60s)", "  --max-consumers int\n",
		`default "127.0.0.1:7070")`, "the dashboard at / and Prometheus metrics at /metrics"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve -h lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "--insecure string") || strings.Contains(help, "--self-check string") {
		t.Errorf("serve -h shows a bool as a string:\n%s", help)
	}
}
