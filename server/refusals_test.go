package server_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcert"
	"github.com/sluicehq/sluice/server"
)

// Refused calls are logged, at a bounded rate: each record names the
// peer, the procedure, the key when the call named a known one, never a
// token; past the burst, the records dropped are counted in the next.
func TestRefusalsLogged(t *testing.T) {
	t.Parallel()
	logs := &logRecords{}
	const unknown, limited = "hard-unknown-token-0123456789", "hard-limited-token-0123456789"
	const elsewhere = "hard-elsewhere-token-0123456789"
	e := start(t, "sqlite", server.Config{Logger: slog.New(logs), Keys: append([]server.Key{{Name: "limited", Token: limited,
		RatePerSecond: 0.001, Burst: 1, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
		{Name: "elsewhere", Token: elsewhere, Grants: []server.Grant{{Actions: server.All, Entities: []string{"other-*"}}}}}, hardeningKeys...)})
	began := time.Now()
	post(t, e, "EntityService/ListQueues", limited, `{}`) // its one call
	// Refused before the handler (no token, an unknown one, no grant of
	// the permission, the rate limit), and by it (no grant on "q").
	for _, token := range []string{"", unknown, "hard-nothing-token-0123456789", limited, elsewhere} {
		for range 2 {
			if status, _ := post(t, e, "EntityService/GetQueue", token, `{"name":"q"}`); status == http.StatusOK {
				t.Fatalf("a call with token %q was not refused", token)
			}
		}
	}
	for range 300 {
		post(t, e, "EntityService/GetQueue", unknown, `{"name":"q"}`)
	}
	elapsed := time.Since(began)
	got := logs.matching("call refused")
	if limit := 10 + int(elapsed/time.Second) + 1; len(got) > limit || len(got) < 8 {
		t.Fatalf("%d refusals logged in %v (310 refused calls), want 8 to %d:\n%s", len(got), elapsed, limit, strings.Join(got, "\n"))
	}
	for _, want := range []string{"code=unauthenticated", "key=nothing", "code=permission_denied", "key=limited", "code=resource_exhausted",
		`key=elsewhere err=key "elsewhere" may not manage "q"`} {
		if !slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("no refusal logged with %s:\n%s", want, strings.Join(got, "\n"))
		}
	}
	for _, l := range got {
		if !strings.Contains(l, "peer=127.0.0.1:") || !strings.Contains(l, "procedure=/sluice.v1.EntityService/GetQueue") {
			t.Errorf("a refusal without its peer or procedure: %s", l)
		}
		if strings.Contains(l, "token-0123456789") {
			t.Errorf("a refusal logs a token: %s", l)
		}
	}
	// The bucket refills one record a second: the next names how many
	// were dropped.
	if !waitFor2(5*time.Second, func() bool {
		post(t, e, "EntityService/GetQueue", unknown, `{"name":"q"}`)
		return len(logs.matching("call refused")) > len(got)
	}) {
		t.Fatal("no refusal logged after the burst refilled")
	}
	if last := logs.matching("call refused"); !strings.Contains(last[len(got)], "suppressed=") {
		t.Errorf("the record after the dropped ones does not count them: %s", last[len(got)])
	}
}

// Refused scrapes of /metrics are logged as refused API calls are: with
// the path, the peer and the key's name, never the token.
func TestMetricsRefusalsLogged(t *testing.T) {
	t.Parallel()
	logs := &logRecords{}
	const scraper = "hard-scraper-token-0123456789"
	e := start(t, "sqlite", server.Config{Logger: slog.New(logs), Keys: append([]server.Key{{Name: "scraper", Token: scraper,
		Grants: []server.Grant{{Actions: server.Receive, Entities: []string{"*"}}}}}, hardeningKeys...)})
	for _, authorization := range []string{"", "Bearer hard-unknown-token-0123456789", "Bearer " + scraper} {
		if status, _ := get(t, e, "/metrics", authorization); status == http.StatusOK {
			t.Fatalf("/metrics with %q was not refused", authorization)
		}
	}
	got := logs.matching("request refused")
	if len(got) != 3 {
		t.Fatalf("%d refusals of /metrics logged, want 3:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, want := range []string{"code=unauthenticated", "code=permission_denied", "key=scraper"} {
		if !slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("no refusal of /metrics logged with %s:\n%s", want, strings.Join(got, "\n"))
		}
	}
	for _, l := range got {
		if !strings.Contains(l, "path=/metrics") || !strings.Contains(l, "peer=127.0.0.1:") || strings.Contains(l, "token-0123456789") {
			t.Errorf("a refusal of /metrics without its path or peer, or with a token: %s", l)
		}
	}
}

// The HTTP server's errors (here, TLS handshakes with peers that speak
// no TLS) are logged at a bounded rate.
func TestHandshakeErrorsBounded(t *testing.T) {
	t.Parallel()
	logs := &logRecords{}
	cert := testcert.New(t)
	e := start(t, "sqlite", server.Config{TLS: cert.ServerConfig(), Logger: slog.New(logs)})
	began := time.Now()
	for range 100 {
		c, err := net.Dial("tcp", e.Srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "\x16\x03\x01\x00\x05hello, not TLS")
		_ = connEnded(c, 10*time.Second)
		c.Close()
	}
	elapsed := time.Since(began)
	if !waitFor2(10*time.Second, func() bool { return len(logs.matching("TLS handshake error")) > 0 }) {
		t.Fatal("no handshake error logged")
	}
	got := logs.matching("TLS handshake error")
	if limit := 10 + int(elapsed/time.Second) + 1; len(got) > limit {
		t.Fatalf("%d handshake errors logged in %v (100 failed handshakes), want at most %d", len(got), elapsed, limit)
	}
}
