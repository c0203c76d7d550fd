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

	"github.com/sluicehq/sluice/server"
)

// rawCall is an HTTP/1.1 connection to the server that sends a call's
// headers, announcing a body of bodyLen bytes, and none of the body yet.
func rawCall(t *testing.T, e *env, procedure, token string, streaming bool, bodyLen int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ct := "application/json"
	if streaming {
		ct = "application/connect+json"
	}
	head := fmt.Sprintf("POST /sluice.v1.%s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nConnect-Protocol-Version: 1\r\n"+
		"Content-Length: %d\r\n", procedure, strings.TrimPrefix(e.url, "http://"), ct, bodyLen)
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
