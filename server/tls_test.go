package server_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testcert"
	"github.com/sluicehq/sluice/server"
)

// protocols records the protocol of every response a transport gets.
type protocols struct {
	next http.RoundTripper

	mu  sync.Mutex
	got []string
}

func (p *protocols) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := p.next.RoundTrip(req)
	if err == nil {
		p.mu.Lock()
		p.got = append(p.got, res.Proto)
		p.mu.Unlock()
	}
	return res, err
}

// all returns the protocols recorded since the last call.
func (p *protocols) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.got
	p.got = nil
	return slices.Compact(got)
}

// With Config.TLS the server speaks HTTPS only, and HTTP/2 through ALPN:
// Connect and gRPC calls succeed for a client that trusts the
// certificate's authority, over HTTP/2; a plain HTTP request, or a client
// that does not trust the authority, fails.
func TestTLS(t *testing.T) {
	cert := testcert.New(t)
	e := start(t, "sqlite", server.Config{TLS: cert.ServerConfig()})
	url := "https://" + e.Srv.Addr().String()
	ctx := t.Context()

	h2 := new(http.Protocols)
	h2.SetHTTP2(true)
	seen := &protocols{next: &http.Transport{TLSClientConfig: cert.ClientConfig(), Protocols: h2}}
	trusting := &http.Client{Transport: seen}
	for _, p := range []struct {
		name string
		opts client.Options
	}{{"Connect", client.Options{HTTPClient: trusting}}, {"gRPC", client.Options{HTTPClient: trusting, GRPC: true}}} {
		c, err := client.New(url, &p.opts)
		if err != nil {
			t.Fatal(err)
		}
		name := "q-" + randHex(3)
		if _, err := c.CreateQueue(ctx, name, nil); err != nil {
			t.Fatalf("%s over HTTPS: CreateQueue: %v", p.name, err)
		}
		snd, _ := c.NewSender(name)
		if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("secret")}); err != nil {
			t.Fatalf("%s over HTTPS: Send: %v", p.name, err)
		}
		r, _ := c.NewReceiver(name, nil)
		ms, err := r.Receive(ctx, 1)
		if err != nil || string(ms[0].Body) != "secret" {
			t.Fatalf("%s over HTTPS: Receive = %+v, %v", p.name, ms, err)
		}
		if err := r.CompleteBatch(ctx, ms); err != nil {
			t.Fatalf("%s over HTTPS: CompleteBatch: %v", p.name, err)
		}
		if got := seen.all(); !slices.Equal(got, []string{"HTTP/2.0"}) {
			t.Fatalf("%s over HTTPS spoke %v, want HTTP/2.0 alone", p.name, got)
		}
	}
	// A client that offers HTTP/1.1 alone is served too.
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: cert.ClientConfig()}}
	res, err := h1.Get(url + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over HTTPS/1.1: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 1 || res.TLS == nil {
		t.Fatalf("GET /healthz over HTTPS/1.1: %s over %s", res.Status, res.Proto)
	}

	// Plain HTTP to the TLS port gets no API.
	plain, err := client.New("http://"+e.Srv.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.ListQueues(ctx, "", 10); err == nil {
		t.Fatal("a Connect call over plain HTTP to the TLS port succeeded")
	}
	if res, err := http.Get("http://" + e.Srv.Addr().String() + "/healthz"); err == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("GET /healthz over plain HTTP to the TLS port: %s, want 400", res.Status)
		}
	}

	// A client without the authority refuses the certificate.
	untrusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}, Protocols: h2}}
	_, err = untrusting.Get(url + "/healthz")
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("GET /healthz without the authority: %v, want a certificate verification error", err)
	}
	for _, grpc := range []bool{false, true} {
		c, _ := client.New(url, &client.Options{HTTPClient: untrusting, GRPC: grpc})
		if _, err := c.ListQueues(ctx, "", 10); !errors.As(err, &verr) {
			t.Fatalf("a client without the authority (gRPC %v): %v, want a certificate verification error", grpc, err)
		}
	}
}
