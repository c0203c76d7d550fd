package server_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

const traceToken = "trace-test-token-0123456789"

// traced starts a server that traces into a span recorder, with one key
// of every permission.
func traced(t *testing.T) (*env, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := start(t, "sqlite", server.Config{TracerProvider: tp,
		Keys: []server.Key{{Name: "admin", Token: traceToken, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}}}})
	return e, sr
}

// ended waits for the ended span of a procedure whose entity attribute
// is entity ("": none): a server ends a call's span after the response
// has left.
func ended(t *testing.T, sr *tracetest.SpanRecorder, procedure, entity string) sdktrace.ReadOnlySpan {
	t.Helper()
	name := "sluice.v1." + procedure
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, s := range sr.Ended() {
			if got, _ := attr(s, string(server.EntityAttribute)); s.Name() == name && got == entity {
				return s
			}
		}
	}
	t.Fatalf("no span %s for entity %q among %v", name, entity, spanNames(sr))
	return nil
}

func spanNames(sr *tracetest.SpanRecorder) []string {
	var names []string
	for _, s := range sr.Ended() {
		names = append(names, s.Name())
	}
	return names
}

func attr(s sdktrace.ReadOnlySpan, key string) (string, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

// wantSpan checks a span's kind, status and attributes: want maps a key
// to its value, "" to its absence.
func wantSpan(t *testing.T, s sdktrace.ReadOnlySpan, status codes.Code, want map[string]string) {
	t.Helper()
	if s.SpanKind() != trace.SpanKindServer {
		t.Errorf("%s: kind %v, want server", s.Name(), s.SpanKind())
	}
	if s.Status().Code != status {
		t.Errorf("%s: status %v %q, want %v", s.Name(), s.Status().Code, s.Status().Description, status)
	}
	for k, v := range want {
		got, ok := attr(s, k)
		switch {
		case v == "" && ok:
			t.Errorf("%s: attribute %s=%q, want none", s.Name(), k, got)
		case v != "" && got != v:
			t.Errorf("%s: attribute %s=%q, want %q (all: %v)", s.Name(), k, got, v, s.Attributes())
		}
	}
}

// Every call of the API gets a server span named by its procedure, with
// the RPC conventions' attributes and the entity it names; a caller's
// mistake shows in the code, not as the span's error; no span carries a
// body or a token.
func TestTracing(t *testing.T) {
	t.Parallel()
	e, sr := traced(t)
	ctx := t.Context()
	c := e.Remote(t, &client.Options{Token: traceToken})
	if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	snd, _ := c.NewSender("orders")
	const body = "a body no span may hold"
	if _, err := snd.Send(ctx, &sluice.Message{Body: []byte(body), ApplicationProperties: map[string]string{"secret": "a property"}}); err != nil {
		t.Fatal(err)
	}
	wantSpan(t, ended(t, sr, "MessagingService/Send", "orders"), codes.Unset, map[string]string{
		"rpc.system.name": "connectrpc", "rpc.method": "sluice.v1.MessagingService/Send",
		"rpc.response.status_code": "OK", "error.type": ""})

	t.Run("gRPC", func(t *testing.T) {
		g := e.Remote(t, &client.Options{Token: traceToken, GRPC: true})
		if _, err := g.GetQueue(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
		wantSpan(t, ended(t, sr, "EntityService/GetQueue", "orders"), codes.Unset, map[string]string{
			"rpc.system.name": "grpc", "rpc.method": "sluice.v1.EntityService/GetQueue", "rpc.response.status_code": "OK"})
	})

	t.Run("a missing queue", func(t *testing.T) {
		missing, _ := c.NewSender("missing")
		if _, err := missing.Send(ctx, &sluice.Message{Body: []byte(body)}); err == nil {
			t.Fatal("a send to a missing queue succeeded")
		}
		wantSpan(t, ended(t, sr, "MessagingService/Send", "missing"), codes.Unset, map[string]string{
			"rpc.response.status_code": "NOT_FOUND", "error.type": "NOT_FOUND"})
	})

	t.Run("refused", func(t *testing.T) {
		anonymous := e.Remote(t, nil)
		if _, err := anonymous.GetQueue(ctx, "refused"); err == nil {
			t.Fatal("a call without a token succeeded")
		}
		// Refused before the handler named the entity.
		wantSpan(t, ended(t, sr, "EntityService/GetQueue", ""), codes.Unset, map[string]string{
			"rpc.response.status_code": "UNAUTHENTICATED"})
	})

	t.Run("streaming", func(t *testing.T) {
		r, _ := e.Lib.NewReceiver("orders", nil)
		msgs, err := r.Receive(ctx, 1)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("Receive: %v, %v", msgs, err)
		}
		if err := r.DeadLetter(ctx, msgs[0], nil); err != nil {
			t.Fatal(err)
		}
		if n, err := c.ResubmitDeadLetters(ctx, "orders", nil); err != nil || n != 1 {
			t.Fatalf("ResubmitDeadLetters: %d, %v", n, err)
		}
		wantSpan(t, ended(t, sr, "MessagingService/ResubmitDeadLetters", "orders"), codes.Unset, map[string]string{
			"rpc.system.name": "connectrpc", "rpc.method": "sluice.v1.MessagingService/ResubmitDeadLetters",
			"rpc.response.status_code": "OK"})
	})

	// A path the API does not define is the caller's choice: it names no
	// span (connect runs no interceptor for it today, and the filter
	// keeps it so should a fallback handler come).
	t.Run("a made-up procedure", func(t *testing.T) {
		if status, _ := post(t, e, "EntityService/NoSuchCall", traceToken, `{}`); status != http.StatusNotImplemented {
			t.Fatalf("status %d", status)
		}
		if _, err := c.GetQueue(ctx, "after-no-such-call"); err == nil {
			t.Fatal("GetQueue of a missing queue succeeded")
		}
		ended(t, sr, "EntityService/GetQueue", "after-no-such-call")
		for _, name := range spanNames(sr) {
			if strings.Contains(name, "NoSuchCall") {
				t.Errorf("a span %s for a procedure the API does not define", name)
			}
		}
	})

	for _, s := range sr.Ended() {
		for _, kv := range s.Attributes() {
			if v := kv.Value.String(); strings.Contains(v, body) || strings.Contains(v, traceToken) || strings.Contains(v, "a property") {
				t.Errorf("%s: attribute %s holds %q", s.Name(), kv.Key, v)
			}
		}
		if strings.Contains(s.Status().Description, traceToken) {
			t.Errorf("%s: status holds the token", s.Name())
		}
	}
}

// A call carrying W3C trace context continues the caller's trace: its
// span is the child of the caller's, in the same trace, with the same
// trace state.
func TestTracingContinuesTheCallersTrace(t *testing.T) {
	t.Parallel()
	e, sr := traced(t)
	const (
		traceID = "0af7651916cd43dd8448eb211c80319c"
		spanID  = "b7ad6b7169203331"
	)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/sluice.v1.EntityService/GetQueue",
		strings.NewReader(`{"name": "traced"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+traceToken)
	req.Header.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
	req.Header.Set("tracestate", "vendor=opaque")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("GetQueue of a missing queue: status %d", res.StatusCode)
	}
	s := ended(t, sr, "EntityService/GetQueue", "traced")
	if got := s.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("trace %s, want the caller's %s", got, traceID)
	}
	if p := s.Parent(); p.SpanID().String() != spanID || !p.IsRemote() {
		t.Errorf("parent %s (remote %v), want the caller's span %s", p.SpanID(), p.IsRemote(), spanID)
	}
	if got := s.SpanContext().TraceState().String(); got != "vendor=opaque" {
		t.Errorf("trace state %q", got)
	}
	wantSpan(t, s, codes.Unset, map[string]string{"rpc.system.name": "connectrpc", "rpc.response.status_code": "NOT_FOUND"})
}

// A failure of the server's own sets the span's status to Error.
func TestTracingServerFault(t *testing.T) {
	t.Parallel()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	lib, err := sluice.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "fault.db"), &sluice.Options{Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Client: lib, Addr: "127.0.0.1:0", TracerProvider: tp, Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	lib.Close() // every call now fails inside the server
	c, _ := client.New("http://"+srv.Addr().String(), nil)
	if _, err := c.ListQueues(t.Context(), "", 10); err == nil {
		t.Fatal("ListQueues on a closed database succeeded")
	}
	var s sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(5 * time.Second); s == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, r := range sr.Ended() {
			if r.Name() == "sluice.v1.EntityService/ListQueues" {
				s = r
			}
		}
	}
	if s == nil {
		t.Fatalf("no ListQueues span among %v", spanNames(sr))
	}
	code, _ := attr(s, "rpc.response.status_code")
	if code != "INTERNAL" && code != "UNAVAILABLE" {
		t.Errorf("status code %q, want INTERNAL or UNAVAILABLE", code)
	}
	wantSpan(t, s, codes.Error, map[string]string{"error.type": code})
}

// The cost of tracing a cheap unary call, off and on (spans batched to
// an exporter that drops them).
func BenchmarkTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			var cfg server.Config
			if on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				defer tp.Shutdown(context.Background())
				cfg.TracerProvider = tp
			}
			lib, err := sluice.Open(b.Context(), "sqlite://"+filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer lib.Close()
			cfg.Client, cfg.Addr = lib, "127.0.0.1:0"
			srv, err := server.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.Start(b.Context()); err != nil {
				b.Fatal(err)
			}
			defer srv.Shutdown(context.Background())
			c, _ := client.New("http://"+srv.Addr().String(), nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.Throughput(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
