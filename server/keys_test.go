package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testcert"
	"github.com/sluicehq/sluice/server"
)

// A key's grant patterns and its name are checked at New: '*' ends a
// pattern, a pattern is not empty, and no two keys share a name.
func TestKeysChecked(t *testing.T) {
	t.Parallel()
	c, err := sluice.NewClient(shared.Backend(t, "sqlite"), &sluice.Options{Service: "t-" + randHex(6)})
	if err != nil {
		t.Fatal(err)
	}
	key := func(name string, patterns ...string) server.Key {
		return server.Key{Name: name, Token: name + "-token-0123456789abcdef", Grants: []server.Grant{{Actions: server.Send, Entities: patterns}}}
	}
	for _, tc := range []struct {
		keys []server.Key
		want string // "" when the keys are valid
	}{
		{[]server.Key{key("a", "orders", "orders-*", "*", "billing/Subscriptions/*", "o.r_d-3*", server.ClusterEntity, server.MetricsEntity)}, ""},
		{[]server.Key{key("a", "orders*eu")}, `"orders*eu": '*' stands only at the end`},
		{[]server.Key{key("a", "*-eu")}, `"*-eu": '*' stands only at the end`},
		{[]server.Key{key("a", "**")}, `"**"`},
		{[]server.Key{key("a", "")}, "empty entity pattern"},
		{[]server.Key{key("a", " orders")}, "spaces"},
		{[]server.Key{key("a", "orders eu")}, `"orders eu" holds ' '`},
		{[]server.Key{key("a", "orders?")}, `"orders?" holds '?'`},
		{[]server.Key{key("a", "a$b")}, `"a$b" holds '$'`},
		{[]server.Key{key("a")}, "names no entity"},
		{[]server.Key{{Name: "a", Token: "a-token-0123456789abcdef", Grants: []server.Grant{{Entities: []string{"*"}}}}}, "needs permissions"},
		{[]server.Key{key("a", "x"), {Name: "a", Token: "other-token-0123456789", Grants: []server.Grant{{Actions: server.Send, Entities: []string{"y"}}}}},
			`two keys are named "a"`},
	} {
		_, err := server.New(server.Config{Client: c, Keys: tc.keys})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.keys, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want an error with %q", tc.keys, err, tc.want)
		}
	}
}

// Handler guards the Host as Start does: without keys it answers only
// requests to a loopback host, unless Insecure.
func TestHandlerHostGuard(t *testing.T) {
	t.Parallel()
	c, err := sluice.NewClient(shared.Backend(t, "sqlite"), &sluice.Options{Service: "t-" + randHex(6)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  server.Config
		want int
	}{
		{server.Config{}, http.StatusMisdirectedRequest},
		{server.Config{Insecure: true}, http.StatusOK},
		{server.Config{Keys: hardeningKeys}, http.StatusOK},
	} {
		tc.cfg.Client = c
		srv, err := server.New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		for host, want := range map[string]int{"evil.example": tc.want, "localhost:7070": http.StatusOK, "127.0.0.1": http.StatusOK} {
			req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
			req.Host = host
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("keys %d, insecure %v: Handler answers Host %s with %d, want %d", len(tc.cfg.Keys), tc.cfg.Insecure, host, rec.Code, want)
			}
		}
	}
}

// Keys over plain HTTP on a non-loopback address start with a warning:
// their tokens travel in clear. On loopback, or over TLS, none.
func TestPlainHTTPKeysWarn(t *testing.T) {
	t.Parallel()
	cert := testcert.New(t)
	for _, tc := range []struct {
		addr string
		tls  bool
		warn bool
	}{{"0.0.0.0:0", false, true}, {"127.0.0.1:0", false, false}, {"0.0.0.0:0", true, false}} {
		logs := &logRecords{}
		cfg := server.Config{Addr: tc.addr, Keys: hardeningKeys, Logger: slog.New(logs)}
		if tc.tls {
			cfg.TLS = cert.ServerConfig()
		}
		start(t, "sqlite", cfg)
		if got := len(logs.matching("tokens travel in clear")) > 0; got != tc.warn {
			t.Errorf("keys on %s (TLS %v): warned %v, want %v", tc.addr, tc.tls, got, tc.warn)
		}
	}
}

// A key starts at most its share of the server's consumers (a quarter
// of MaxConsumers by default, Key.MaxConsumers otherwise): one more
// fails with RESOURCE_EXHAUSTED, while another key still starts one, and
// joining a consumer already running is not counted.
func TestKeyConsumerShare(t *testing.T) {
	t.Parallel()
	const a, b = "hard-a-token-0123456789", "hard-b-token-0123456789"
	all := []server.Grant{{Actions: server.All, Entities: []string{"*"}}}
	e := start(t, "sqlite", server.Config{MaxConsumers: 4, StreamNodes: rpcStreamNodes, Keys: []server.Key{
		{Name: "a", Token: a, Grants: all}, {Name: "b", Token: b, Grants: all, MaxConsumers: 2}}})
	consume := func(token, consumer string) (*rpcStream, json.RawMessage, *connectError) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		s := rpcOpenStream(t, ctx, e, "StreamService/Consume", token, `{"consumer":"`+consumer+`"}`)
		t.Cleanup(func() { cancel(); s.close() })
		deadline := time.AfterFunc(30*time.Second, cancel)
		defer deadline.Stop()
		msg, end, err := s.next()
		if err != nil {
			t.Fatalf("Consume %s: %v", consumer, err)
		}
		return s, msg, end
	}
	if _, _, end := consume(a, "c1"); end != nil {
		t.Fatalf("key a's first consumer: %+v", end)
	}
	_, _, end := consume(a, "c2")
	if end == nil || end.Code != "resource_exhausted" || !strings.Contains(end.Message, `key "a"`) {
		t.Fatalf("key a's second consumer: %+v, want RESOURCE_EXHAUSTED (its share of 4 is 1)", end)
	}
	for _, c := range []string{"c1", "c2", "c3"} { // c1 runs already: joining it counts nothing
		if _, _, end := consume(b, c); end != nil {
			t.Fatalf("key b's consumer %s: %+v", c, end)
		}
	}
	if _, _, end := consume(b, "c4"); end == nil || end.Code != "resource_exhausted" {
		t.Fatalf("key b's third consumer: %+v, want RESOURCE_EXHAUSTED (its share is 2)", end)
	}
}
