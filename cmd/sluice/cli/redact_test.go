package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// testPostgresWithPassword returns the test PostgreSQL's DSN with a
// password added (the test server trusts its clients, so it is not
// checked) and a fresh schema, or skips.
func testPostgresWithPassword(t *testing.T, password string) string {
	t.Helper()
	base := os.Getenv("SLUICE_TEST_POSTGRES")
	if base == "" {
		t.Skip("SLUICE_TEST_POSTGRES is not set")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	q := u.Query()
	q.Set("search_path", "redact_"+hex.EncodeToString(b))
	u.RawQuery = q.Encode()
	return u.String()
}

// serve, migrate and the commands that open a database never print a
// DSN's password: not where they say what they serve, nor in errors.
func TestDSNPasswordsNotPrinted(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-pw"
	for _, db := range []string{"postgres://u:" + secret + "@127.0.0.1:1/db?connect_timeout=5", "mysql://root:" + secret + "@127.0.0.1:1/test"} {
		for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0", "--self-check=false"}, {"migrate"}, {"queue", "list"}} {
			code, out, errOut := run(t, append(args, "--db", db)...)
			if code == ExitOK || strings.Contains(out+errOut, secret) || !strings.Contains(errOut, "sluice") {
				t.Errorf("%v --db %s: exit %d, printed %s %s", args, db, code, out, errOut)
			}
		}
	}
	db := testPostgresWithPassword(t, secret)
	code, out, errOut := run(t, "migrate", "--db", db)
	if code != ExitOK || strings.Contains(out+errOut, secret) || !strings.Contains(out, ":xxxxx@") {
		t.Errorf("migrate: exit %d, printed %s %s", code, out, errOut)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var sout, serr lockedBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- Run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--self-check=false", "--service", "redact"}, &sout, &serr)
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(sout.String(), "sluice serving"); {
		select {
		case code := <-exited:
			t.Fatalf("serve exited %d: %s %s", code, sout.String(), serr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s %s", sout.String(), serr.String())
		}
	}
	cancel()
	<-exited
	if got := sout.String() + serr.String(); strings.Contains(got, secret) || !strings.Contains(got, "sluice serving postgres://postgres:xxxxx@") {
		t.Errorf("serve printed: %s", got)
	}
}
