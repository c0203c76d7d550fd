package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// stallingProxy forwards TCP connections to a server until stall: then
// the connections open so far stay open and carry nothing more either
// way, as a connection whose peer vanished does (a half-open connection,
// a dead NAT entry). Connections made after it forward again.
type stallingProxy struct {
	l      net.Listener
	target string

	mu      sync.Mutex
	stalled []chan struct{} // closed on stall, one per connection
	conns   []net.Conn
}

func newStallingProxy(t *testing.T, target string) *stallingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingProxy{l: l, target: target}
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *stallingProxy) url() string { return "http://" + p.l.Addr().String() }

func (p *stallingProxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		stalled := make(chan struct{})
		p.mu.Lock()
		p.stalled = append(p.stalled, stalled)
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go forward(out, in, stalled)
		go forward(in, out, stalled)
	}
}

// forward copies from src to dst until stalled, and then reads on
// without passing anything along, like a peer that is gone.
func forward(dst io.Writer, src io.Reader, stalled chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-stalled:
			if err != nil {
				return
			}
			continue
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// stall stalls the connections open so far.
func (p *stallingProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.stalled {
		close(s)
	}
	p.stalled = nil
}

// A Consume stream whose connection goes silent, with no error on
// either side, is found out by the client from the missing heartbeats:
// the client opens another stream, which replaces the silent one on the
// server, and the delivery in progress on the silent stream comes again
// on the new one at once: not after its ack timeout, and not as a failed
// attempt (with one attempt allowed, a failure would park it). Over
// HTTP/1.1 each stream has a connection of its own; over gRPC (HTTP/2)
// the streams and the acks share one. A key allowed one stream only may
// still replace it.
func TestConsumeSilentStreamReplaced(t *testing.T) {
	const token = "one-stream-token-0123456789"
	oneStream := []server.Key{{Name: "one", Token: token, MaxStreams: 1,
		Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}}}
	for _, c := range []struct {
		name string
		opts client.Options
		keys []server.Key
	}{
		{"connect", client.Options{}, nil},
		{"grpc", client.Options{GRPC: true}, nil},
		{"one stream a key", client.Options{Token: token}, oneStream},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testSilentStreamReplaced(t, &c.opts, c.keys)
		})
	}
}

func testSilentStreamReplaced(t *testing.T, opts *client.Options, keys []server.Key) {
	// A heartbeat of a second: long enough that a loaded machine does not
	// miss three, short enough for a test.
	const beat = time.Second
	e := start(t, "sqlite", server.Config{StreamNodes: streamNodes, Heartbeat: beat, Keys: keys})
	proxy := newStallingProxy(t, strings.TrimPrefix(e.URL, "http://"))
	c, err := client.New(proxy.url(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	type delivery struct {
		body    string
		attempt int
	}
	got := make(chan delivery, 16)
	held := make(chan struct{})
	var once sync.Once
	startRemote(t, c, "", func(p *client.StreamProcessor) {
		p.Handle("worker", func(ctx context.Context, ev *sluice.StreamEvent) error {
			got <- delivery{string(ev.Body), ev.Attempt}
			first := false
			once.Do(func() { first = true })
			if first {
				close(held)
				<-ctx.Done() // in progress when the connection stalls
				return ctx.Err()
			}
			return nil
		}, &sluice.ConsumerOptions{Namespace: "jobs", MaxAttempts: 1, DeliveryTimeout: time.Minute})
	})
	next := func(what string, within time.Duration) delivery {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-time.After(within):
			t.Fatalf("%s: none after %v", what, within)
			return delivery{}
		}
	}
	lib := e.Lib // publishes straight to the database, past the proxy
	if _, err := lib.Publish(ctx, sluice.StreamID{Namespace: "jobs", Key: "j"}, sluice.Event{Body: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	if d := next("the first delivery", 20*time.Second); d != (delivery{"one", 1}) {
		t.Fatalf("first delivery %+v", d)
	}
	<-held
	stalledAt := time.Now()
	proxy.stall()

	// Three missed heartbeats (3 s) and a reconnection later, the event
	// comes again as the same attempt: well within the minute's ack
	// timeout, and before the server's own ping (2 s, then 15 s for the
	// answer) would close the stalled connection.
	if d := next("the delivery again after the stall", 12*time.Second); d != (delivery{"one", 1}) {
		t.Fatalf("delivered again as %+v, want the same attempt of one", d)
	}
	t.Logf("delivered again %v after the stall", time.Since(stalledAt).Round(time.Millisecond))
	if _, err := lib.Publish(ctx, sluice.StreamID{Namespace: "jobs", Key: "j"}, sluice.Event{Body: []byte("two")}); err != nil {
		t.Fatal(err)
	}
	if d := next("a delivery on the new stream", 20*time.Second); d != (delivery{"two", 1}) {
		t.Fatalf("next delivery %+v", d)
	}
	if parked, err := lib.ParkedEvents(ctx, "ns/jobs/worker", 10); err != nil || len(parked) != 0 {
		t.Fatalf("parked: %+v, %v; want none", parked, err)
	}
	_, metrics := scrape(t, e, opts.Token)
	if !strings.Contains(metrics, `sluice_stream_deliveries_total{consumer="worker",outcome="stream_closed"} 1`) ||
		strings.Contains(metrics, `outcome="expired"`) {
		t.Errorf("the silent stream's delivery is not counted as handed over:\n%s", grepLines(metrics, "sluice_stream_deliveries_total"))
	}
}

// A tail whose connection goes silent ends with ErrClosed once it misses
// three heartbeats, rather than wait forever.
func TestTailSilentEnds(t *testing.T) {
	e := start(t, "sqlite", server.Config{StreamNodes: streamNodes, Heartbeat: time.Second})
	proxy := newStallingProxy(t, strings.TrimPrefix(e.URL, "http://"))
	c, err := client.New(proxy.url(), nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		ended <- c.TailStream(t.Context(), "orders", "", func(*sluice.StreamEvent) error { return nil },
			&sluice.TailOptions{Started: func(int) { close(started) }})
	}()
	<-started
	time.Sleep(4 * time.Second) // heartbeats keep a quiet tail open past three of them
	select {
	case err := <-ended:
		t.Fatalf("the tail ended while heartbeats came: %v", err)
	default:
	}
	proxy.stall()
	select {
	case err := <-ended:
		if !errors.Is(err, sluice.ErrClosed) {
			t.Fatalf("the silent tail ended with %v, want ErrClosed", err)
		}
	case <-time.After(12 * time.Second):
		t.Fatal("the silent tail still waits")
	}
}

// A tail whose callback takes longer than three heartbeats is not taken
// for a silent one: the time in the callback does not count.
func TestTailSlowCallbackLives(t *testing.T) {
	e := start(t, "sqlite", server.Config{StreamNodes: streamNodes, Heartbeat: time.Second})
	c := e.Remote(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := make(chan struct{})
	got := make(chan string, 2)
	ended := make(chan error, 1)
	go func() {
		ended <- c.TailStream(ctx, "orders", "", func(ev *sluice.StreamEvent) error {
			if string(ev.Body) == "slow" {
				time.Sleep(4 * time.Second)
			}
			got <- string(ev.Body)
			return nil
		}, &sluice.TailOptions{Started: func(int) { close(started) }})
	}()
	<-started
	id := sluice.StreamID{Namespace: "orders", Key: "o"}
	for _, body := range []string{"slow", "after"} {
		if _, err := e.Lib.Publish(t.Context(), id, sluice.Event{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"slow", "after"} {
		select {
		case b := <-got:
			if b != want {
				t.Fatalf("tailed %q, want %q", b, want)
			}
		case err := <-ended:
			t.Fatalf("the tail ended during a slow callback: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatalf("no %q", want)
		}
	}
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the tail ended with %v", err)
	}
}
