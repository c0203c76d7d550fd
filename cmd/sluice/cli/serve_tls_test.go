package cli

import (
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testcert"
)

// The TLS files come from their flags, else SLUICE_TLS_CERT and
// SLUICE_TLS_KEY, else the file's tls_cert and tls_key.
func TestServeTLSConfigPrecedence(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.json")
	if err := os.WriteFile(file, []byte(`{"tls_cert": "file.crt", "tls_key": "file.key"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(env map[string]string, args ...string) serveConfig {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, err := loadServeConfig(fs, append([]string{"--config", file}, args...), func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("load(%v, %v): %v", env, args, err)
		}
		return cfg
	}
	if c := load(nil); c.TLSCert != "file.crt" || c.TLSKey != "file.key" {
		t.Fatalf("from the file: %q %q", c.TLSCert, c.TLSKey)
	}
	env := map[string]string{"SLUICE_TLS_CERT": "env.crt", "SLUICE_TLS_KEY": "env.key"}
	if c := load(env); c.TLSCert != "env.crt" || c.TLSKey != "env.key" {
		t.Fatalf("the environment over the file: %q %q", c.TLSCert, c.TLSKey)
	}
	if c := load(env, "--tls-cert", "flag.crt", "--tls-key", "flag.key"); c.TLSCert != "flag.crt" || c.TLSKey != "flag.key" {
		t.Fatalf("the flags over the environment: %q %q", c.TLSCert, c.TLSKey)
	}
}

// sluice serve --tls-cert --tls-key serves HTTPS, HTTP/2 included (gRPC),
// to a client that trusts the certificate; a key that is not there is an
// error before it listens.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	cert := testcert.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, cert.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, cert.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "tls.db")
	code, _, errOut := run(t, "serve", "--db", db, "--addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", filepath.Join(dir, "missing.pem"))
	if code != ExitError || !strings.Contains(errOut, "TLS") {
		t.Errorf("serve with a missing key: exit %d, %s", code, errOut)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errBuf lockedBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- Run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile}, &out, &errBuf)
	}()
	serving := regexp.MustCompile(`on (https://127\.0\.0\.1:\d+)`)
	var url string
	for deadline := time.Now().Add(20 * time.Second); url == ""; {
		if m := serving.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case code := <-exited:
			t.Fatalf("serve exited %d: %s %s", code, out.String(), errBuf.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s %s", out.String(), errBuf.String())
		}
	}
	h2 := new(http.Protocols)
	h2.SetHTTP2(true)
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: cert.ClientConfig(), Protocols: h2}}
	for _, grpc := range []bool{false, true} {
		c, err := client.New(url, &client.Options{HTTPClient: trusting, GRPC: grpc})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListQueues(ctx, "", 10); err != nil {
			t.Fatalf("ListQueues over HTTPS (gRPC %v): %v", grpc, err)
		}
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Fatal("a client that does not trust the certificate reached /healthz")
	}
	cancel()
	select {
	case code := <-exited:
		if code != ExitOK {
			t.Fatalf("serve exited %d: %s %s", code, out.String(), errBuf.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}
