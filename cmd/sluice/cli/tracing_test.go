package cli

import (
	"compress/gzip"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/client"
)

// collector is an OTLP/HTTP receiver of traces, keeping the spans posted
// to /v1/traces with their resource's service.name.
type collector struct {
	mu    sync.Mutex
	spans map[string]*tracepb.Span // by name
	svc   map[string]string        // span name -> service.name
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a POST of protobuf to /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				svc = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans[s.Name], c.svc[s.Name] = s, svc
			}
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (c *collector) span(name string) (*tracepb.Span, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spans[name], c.svc[name]
}

// With --otlp-endpoint, sluice serve traces its API calls and, at a
// graceful shutdown, exports the spans its batches still hold.
func TestServeTracing(t *testing.T) {
	t.Parallel()
	col := &collector{spans: make(map[string]*tracepb.Span), svc: make(map[string]string)}
	hs := httptest.NewServer(col)
	defer hs.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut lockedBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- Run(ctx, []string{"serve", "--db", filepath.Join(t.TempDir(), "trace.db"), "--addr", "127.0.0.1:0",
			"--self-check=false", "--otlp-endpoint", hs.URL}, &out, &errOut)
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
	c, _ := client.New(url, nil)
	if _, err := c.CreateQueue(ctx, "traced", nil); err != nil {
		t.Fatal(err)
	}
	// The batch holds the span for seconds: only the shutdown sends it
	// this soon.
	cancel()
	select {
	case code := <-exited:
		if code != ExitOK {
			t.Fatalf("serve exited %d: %s %s", code, out.String(), errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	s, svc := col.span("sluice.v1.EntityService/CreateQueue")
	if s == nil {
		t.Fatalf("the collector received no CreateQueue span; serve said: %s", errOut.String())
	}
	if svc != "sluice" {
		t.Errorf("service.name %q, want sluice", svc)
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
	}
	if attrs["sluice.entity"] != "traced" || attrs["rpc.response.status_code"] != "OK" || attrs["rpc.system.name"] != "connectrpc" {
		t.Errorf("span attributes %v", attrs)
	}
	if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span kind %v", s.Kind)
	}
	if !strings.Contains(errOut.String(), "tracing API calls over OTLP/HTTP") || !strings.Contains(errOut.String(), hs.URL+"/v1/traces") {
		t.Errorf("serve did not say where it traces to: %s", errOut.String())
	}
}

// The OTLP endpoint comes from --otlp-endpoint, else SLUICE_OTLP_ENDPOINT,
// else the file; it is a collector's URL, and a base URL gets the traces
// path.
func TestServeOTLPEndpoint(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.json")
	if err := os.WriteFile(file, []byte(`{"otlp_endpoint": "http://file.example:4318"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, ""},
		{map[string]string{"SLUICE_CONFIG": file}, nil, "http://file.example:4318"},
		{map[string]string{"SLUICE_CONFIG": file, "SLUICE_OTLP_ENDPOINT": "http://env.example:4318"}, nil, "http://env.example:4318"},
		{map[string]string{"SLUICE_CONFIG": file, "SLUICE_OTLP_ENDPOINT": "http://env.example:4318"},
			[]string{"--otlp-endpoint", "http://flag.example:4318"}, "http://flag.example:4318"},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, err := loadServeConfig(fs, c.args, func(k string) string { return c.env[k] })
		if err != nil || cfg.OTLPEndpoint != c.want {
			t.Errorf("%v %v: endpoint %q, %v; want %q", c.env, c.args, cfg.OTLPEndpoint, err, c.want)
		}
	}
	for in, want := range map[string]string{
		"http://localhost:4318":              "http://localhost:4318/v1/traces",
		"https://otel.example:4318/":         "https://otel.example:4318/v1/traces",
		"http://gateway.example/otlp/traces": "http://gateway.example/otlp/traces",
	} {
		if got, err := otlpTracesURL(in); err != nil || got != want {
			t.Errorf("otlpTracesURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"localhost:4318", "grpc://collector:4317", "http://", "::"} {
		if got, err := otlpTracesURL(bad); err == nil {
			t.Errorf("otlpTracesURL(%q) = %q, want an error", bad, got)
		}
	}
	code, _, errOut := run(t, "serve", "--db", filepath.Join(t.TempDir(), "bad.db"), "--otlp-endpoint", "collector:4318")
	if code != ExitUsage || !strings.Contains(errOut, "OTLP endpoint") {
		t.Errorf("serve --otlp-endpoint collector:4318: exit %d, %s", code, errOut)
	}
}
