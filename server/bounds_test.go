package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// rawCall is an HTTP/1.1 connection to the server that sends a call's
// headers, announcing a body of bodyLen bytes, and none of the body yet.
func rawCall(t *testing.T, e *env, procedure, token string, streaming bool, bodyLen int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ct := "application/json"
	if streaming {
		ct = "application/connect+json"
	}
	head := fmt.Sprintf("POST /sluice.v1.%s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nConnect-Protocol-Version: 1\r\n"+
		"Content-Length: %d\r\n", procedure, strings.TrimPrefix(e.URL, "http://"), ct, bodyLen)
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkRefusedUnread checks that a call with token is refused with
// PERMISSION_DENIED before its body is read: the call's headers and one
// byte of its body are sent, the rest never is, and the answer must come
// within 10 s (the server's read bound is 30 s).
func checkRefusedUnread(t *testing.T, e *env, m rpcMethod, token, inMessage string) {
	t.Helper()
	c := rawCall(t, e, m.name, token, m.streaming, 1000)
	if _, err := io.WriteString(c, "{"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s with a body yet to come: no answer (%v): the server waits for the body before refusing", m.name, err)
	}
	defer res.Body.Close()
	s := &rpcStream{status: res.StatusCode, body: res.Body, r: bufio.NewReader(res.Body)}
	wantHTTP := http.StatusForbidden
	if m.streaming {
		wantHTTP = http.StatusOK
	}
	if res.StatusCode != http.StatusOK || !m.streaming {
		raw, _ := io.ReadAll(res.Body)
		var ce connectError
		if err := json.Unmarshal(raw, &ce); err != nil {
			t.Fatalf("%s: status %d %q", m.name, res.StatusCode, raw)
		}
		wantStatus(t, m.name+" before its body", res.StatusCode, ce, wantHTTP, "permission_denied", "", inMessage)
		return
	}
	_, end, err := s.next()
	if err != nil || end == nil {
		t.Fatalf("%s before its body: the stream did not end with an error: %v", m.name, err)
	}
	wantStatus(t, m.name+" before its body", res.StatusCode, *end, wantHTTP, "permission_denied", "", inMessage)
}

// logRecords is a slog handler that keeps the records it gets.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// matching returns the records whose message contains msg, each as its
// message and attributes, "k=v" separated by spaces.
func (l *logRecords) matching(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if !strings.Contains(r.Message, msg) {
			continue
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.Key + "=" + a.Value.String()
			return true
		})
		out = append(out, line)
	}
	return out
}

// hardeningKeys: admin may do anything; nothing is a valid key that
// grants nothing.
var hardeningKeys = []server.Key{
	{Name: "admin", Token: "hard-admin-token-0123456789", Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
	{Name: "nothing", Token: "hard-nothing-token-0123456789"},
}

// slowClients opens n connections that send a Send call's headers with
// the admin's token and then its body one byte every 300 ms (30 bytes at
// most: each stops by itself within 9 s), and returns them.
func slowClients(t *testing.T, e *env, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range n {
		c := rawCall(t, e, "MessagingService/Send", "hard-admin-token-0123456789", false, 1000)
		go func() {
			for range 30 {
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(300 * time.Millisecond)
			}
		}()
		conns = append(conns, c)
	}
	return conns
}

// connEnded reports, within d, whether the server closed c or answered on it.
func connEnded(c net.Conn, d time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err // nil at EOF; a timeout if c stayed open
}

// A request must be read within ReadTimeout: clients that send a body (or
// headers) a byte at a time have their connections closed once it
// passes, and stop counting as calls in flight.
func TestSlowRequestsCut(t *testing.T) {
	t.Parallel()
	const readTimeout = time.Second
	e := start(t, "sqlite", server.Config{Keys: hardeningKeys, ReadTimeout: readTimeout})
	began := time.Now()
	conns := slowClients(t, e, 20)
	for range 5 { // headers a byte at a time, never finished
		c, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			for _, b := range []byte("POST /sluice.v1.MessagingService/Send HTTP/1.1\r\n") {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(300 * time.Millisecond)
			}
		}()
		conns = append(conns, c)
	}
	// The clients would go on for 9 s; the bound ends them after 1 s (with
	// a margin for a loaded machine, far below 9 s).
	for i, c := range conns {
		if err := connEnded(c, 12*time.Second); err != nil {
			t.Fatalf("slow client %d: not cut off after %v: %v", i, time.Since(began), err)
		}
	}
	if d := time.Since(began); d > 8*time.Second {
		t.Fatalf("the slow clients were cut off after %v, want about %v", d, readTimeout)
	}
	if !waitForMetric(t, e, "sluice_api_calls_in_flight", 0) {
		t.Fatal("the cut calls still count as in flight")
	}
}

// waitForMetric polls /metrics until the gauge named reads want (10 s
// at most).
func waitForMetric(t *testing.T, e *env, name string, want float64) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, e.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer hard-admin-token-0123456789")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, line := range strings.Split(string(raw), "\n") {
			var v float64
			if rest, ok := strings.CutPrefix(line, name+" "); ok {
				if _, err := fmt.Sscan(rest, &v); err == nil && v == want {
					return true
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// The read bound is on reading the request, not on the call: a receive
// that waits, and a Tail stream, outlast it over HTTP/1.1.
func TestReadBoundSparesLongCalls(t *testing.T) {
	t.Parallel()
	const readTimeout = 500 * time.Millisecond
	e := start(t, "sqlite", server.Config{Keys: hardeningKeys, ReadTimeout: readTimeout, Heartbeat: 200 * time.Millisecond})
	const admin = "hard-admin-token-0123456789"
	if status, body := postRaw(t, e, "EntityService/CreateQueue", admin, `{"name":"q"}`); status != http.StatusOK {
		t.Fatalf("CreateQueue: %d %s", status, body)
	}
	began := time.Now()
	if status, body := postRaw(t, e, "MessagingService/Receive", admin, `{"entity":"q","maxWait":"2s"}`); status != http.StatusOK {
		t.Fatalf("a receive waiting 2 s, with a read bound of %v: %d %s", readTimeout, status, body)
	}
	if d := time.Since(began); d < 2*time.Second {
		t.Fatalf("the receive returned after %v, want its wait of 2 s", d)
	}
	// Over HTTP/2 (gRPC over h2c): a receive that waits, and a tail.
	c := e.Remote(t, &client.Options{Token: admin, GRPC: true})
	r, err := c.NewReceiver("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 2*time.Second)
	began = time.Now()
	ms, err := r.Receive(wctx, 1)
	wcancel()
	if d := time.Since(began); len(ms) != 0 || d < 1900*time.Millisecond {
		t.Fatalf("a gRPC receive waiting 2 s: %d messages, %v after %v", len(ms), err, d)
	}
	tctx, tcancel := context.WithTimeout(t.Context(), 4*readTimeout)
	err = c.TailStream(tctx, "ns", "k", func(*sluice.StreamEvent) error { return nil }, nil)
	tcancel()
	if tctx.Err() == nil {
		t.Fatalf("a gRPC tail ended before its context, within %v (read bound %v): %v", 4*readTimeout, readTimeout, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := rpcOpenStream(t, ctx, e, "StreamService/Tail", admin, `{"namespace":"ns","key":"k"}`)
	defer s.close()
	began = time.Now()
	for time.Since(began) < 4*readTimeout {
		if _, end, err := s.next(); err != nil || end != nil {
			t.Fatalf("Tail ended after %v (read bound %v): %v, %+v", time.Since(began), readTimeout, err, end)
		}
	}
}

// MaxConnections bounds the connections open at once: one more is
// closed as soon as it is accepted, and logged; once one closes, another
// is served.
func TestMaxConnections(t *testing.T) {
	t.Parallel()
	logs := &logRecords{}
	e := start(t, "sqlite", server.Config{MaxConnections: 3, Logger: slog.New(logs)})
	addr := strings.TrimPrefix(e.URL, "http://")
	var open []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		open = append(open, c)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := connEnded(extra, 10*time.Second); err != nil {
		t.Fatalf("a fourth connection stays open: %v", err)
	}
	if got := logs.matching("connection refused"); len(got) == 0 || !strings.Contains(got[0], "peer=127.0.0.1:") {
		t.Fatalf("the refused connection is not logged with its peer: %q", got)
	}
	open[0].Close()
	if !waitForHealthz(e.URL, 10*time.Second) {
		t.Fatal("no connection is served after one of the three closed")
	}
}

// waitForHealthz polls /healthz on fresh connections until one answers.
func waitForHealthz(url string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		tr := &http.Transport{DisableKeepAlives: true}
		res, err := (&http.Client{Transport: tr, Timeout: time.Second}).Get(url + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// Key.MaxConnections bounds the connections that carry a key's calls: a
// call on one more fails with RESOURCE_EXHAUSTED and its connection
// closes; calls on a connection already counted go on; once one
// closes, another connection is served.
func TestKeyMaxConnections(t *testing.T) {
	t.Parallel()
	const token = "hard-two-token-0123456789"
	e := start(t, "sqlite", server.Config{Keys: append([]server.Key{{Name: "two", Token: token, MaxConnections: 2,
		Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}}}, hardeningKeys...)})
	call := func(tr *http.Transport) (int, connectError, bool) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.URL+"/sluice.v1.EntityService/ListQueues", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var ce connectError
		if res.StatusCode != http.StatusOK {
			_ = json.Unmarshal(raw, &ce)
		}
		return res.StatusCode, ce, res.Close
	}
	var trs []*http.Transport
	for range 3 {
		tr := &http.Transport{MaxConnsPerHost: 1}
		t.Cleanup(tr.CloseIdleConnections)
		trs = append(trs, tr)
	}
	for i := range 2 {
		for range 3 {
			if status, ce, _ := call(trs[i]); status != http.StatusOK {
				t.Fatalf("a call on connection %d: %d %+v", i, status, ce)
			}
		}
	}
	status, ce, closes := call(trs[2])
	wantStatus(t, "a call on a third connection", status, ce, http.StatusTooManyRequests, "resource_exhausted", "TOO_MANY_CONNECTIONS", `key "two"`)
	if !closes {
		t.Error("the refused connection stays open (no Connection: close)")
	}
	trs[0].CloseIdleConnections()
	if !waitFor2(10*time.Second, func() bool { s, _, _ := call(trs[2]); return s == http.StatusOK }) {
		t.Fatal("a new connection is still refused after one of the two closed")
	}
}

// waitFor2 polls cond every 20 ms until it holds or d passes.
func waitFor2(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
