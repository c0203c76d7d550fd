package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/server"
)

// dashboardCall is a request the dashboard makes: a page or file, or an
// API call with its answer's type (nil for a file).
type dashboardCall struct {
	path   string
	stream bool
	raw    bool // the body is sent as is, not framed in an envelope
	answer proto.Message
}

// dashboardCalls are every request the dashboard's page makes
// (server/dashboard/static/app.js).
var dashboardCalls = []dashboardCall{
	{path: "/"},
	{path: "/app.js"},
	{path: "/app.css"},
	{path: "/sluice.v1.EntityService/ListEntityStats", answer: &sluicev1.ListEntityStatsResponse{}},
	{path: "/sluice.v1.EntityService/ListTopics", answer: &sluicev1.ListTopicsResponse{}},
	{path: "/sluice.v1.EntityService/ListSubscriptions", answer: &sluicev1.ListSubscriptionsResponse{}},
	{path: "/sluice.v1.ClusterService/GetClusterStatus", answer: &sluicev1.GetClusterStatusResponse{}},
	{path: "/sluice.v1.StatsService/GetThroughput", answer: &sluicev1.GetThroughputResponse{}},
	{path: "/sluice.v1.MessagingService/Peek", answer: &sluicev1.PeekResponse{}},
	{path: "/sluice.v1.MessagingService/ResubmitDeadLetters", stream: true, answer: &sluicev1.ResubmitDeadLettersResponse{}},
	// The same, with envelopes as a client may get them wrong (issue
	// 15.11: truncated, or compressed without an encoding).
	{path: "/sluice.v1.MessagingService/ResubmitDeadLetters", stream: true, raw: true,
		answer: &sluicev1.ResubmitDeadLettersResponse{}},
	{path: "/sluice.v1.StatsService/GetEntityHistory", answer: &sluicev1.GetEntityHistoryResponse{}},
	{path: "/sluice.v1.StatsService/GetStreamLagHistory", answer: &sluicev1.GetStreamLagHistoryResponse{}},
}

// FuzzDashboard makes the dashboard's requests, with arbitrary query
// parameters and bodies, to a server over a SQLite-backed client that
// holds a queue with dead letters and a topic with a subscription. No
// answer is a server error (5xx, or a Connect error coded internal,
// unknown or data loss): bad input is the client's error (4xx), and an
// answer that succeeds is what the dashboard reads (the page's files
// with their security headers; the API's answer in its JSON form).
func FuzzDashboard(f *testing.F) {
	for i, c := range dashboardCalls {
		if c.raw {
			for _, body := range []string{"", "\x00", "\x00\x00\x00\x00\x10{}", "\x01\x00\x00\x00\x02{}",
				"\x00\x00\x00\x00\x02{}\x00\x00", "\x02\x00\x00\x00\x02{}"} {
				f.Add(uint8(i), "", []byte(body))
			}
			continue
		}
		for _, body := range dashboardBodies(c.path) {
			f.Add(uint8(i), "", []byte(body))
			f.Add(uint8(i), "connect=v1&encoding=json&message="+url.QueryEscape(body), []byte(body))
		}
	}
	base := startDashboardServer(f)
	hc := &http.Client{Timeout: time.Minute}
	f.Cleanup(hc.CloseIdleConnections)
	f.Fuzz(func(t *testing.T, call uint8, query string, body []byte) {
		c := dashboardCalls[int(call)%len(dashboardCalls)]
		method, ctype := http.MethodPost, "application/json"
		switch {
		case c.answer == nil:
			method, ctype = http.MethodGet, ""
		case c.stream && c.raw:
			ctype = "application/connect+json"
		case c.stream:
			ctype, body = "application/connect+json", envelope(body)
		}
		if strings.ContainsFunc(query, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '#' }) {
			return // a browser escapes these: HTTP refuses them before the server's handlers
		}
		req, err := http.NewRequestWithContext(t.Context(), method, base+c.path+"?"+query, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, req.URL, err)
		}
		defer res.Body.Close()
		got, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("%s %s: reading the answer: %v", method, req.URL, err)
		}
		checkDashboardAnswer(t, c, req, res, got)
	})
}

// dashboardBodies are the bodies the dashboard sends to path, and a few
// it does not.
func dashboardBodies(path string) []string {
	bodies := map[string][]string{
		"/sluice.v1.EntityService/ListEntityStats":        {`{"after": "", "max": 1000}`, `{"after": "q", "max": 1}`, `{"max": -1}`},
		"/sluice.v1.EntityService/ListTopics":             {`{"max": 1000}`, `{"after": "-", "max": 0}`},
		"/sluice.v1.EntityService/ListSubscriptions":      {`{"topic": "t"}`, `{"topic": "missing"}`, `{"topic": ""}`},
		"/sluice.v1.ClusterService/GetClusterStatus":      {`{}`},
		"/sluice.v1.StatsService/GetThroughput":           {`{}`},
		"/sluice.v1.MessagingService/Peek":                {`{"entity": "q", "maxMessages": 250, "subQueue": "SUB_QUEUE_DEAD_LETTER"}`, `{"entity": "q", "fromSequenceNumber": "-1"}`, `{"entity": "q", "subQueue": 7}`},
		"/sluice.v1.MessagingService/ResubmitDeadLetters": {`{"entity": "q", "sequenceNumbers": ["1", "2"]}`, `{"entity": "q"}`, `{"entity": "nope"}`},
		"/sluice.v1.StatsService/GetEntityHistory":        {`{"entity": "q"}`, `{"entity": "t/Subscriptions/s"}`, `{"entity": "nope"}`, `{"entity": "bad name"}`},
		"/sluice.v1.StatsService/GetStreamLagHistory":     {`{"max": 20}`, `{"consumer": "c"}`, `{"subscription": "nope"}`, `{"max": -1}`, `{"consumer": "c", "subscription": "x"}`},
	}[path]
	return append(bodies, `{}`, ``, `{"unknown": 1}`, `[`)
}

// startDashboardServer starts a server on loopback over a SQLite-backed
// client with a queue "q" holding dead letters and a topic "t" with a
// subscription "s", and returns its URL.
func startDashboardServer(f *testing.F) string {
	ctx := f.Context()
	c, err := sluice.Open(ctx, "sqlite://"+f.TempDir()+"/fuzz.db", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	seedDashboard(f, c)
	srv, err := server.New(server.Config{Client: c, Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			f.Errorf("Shutdown: %v", err)
		}
	})
	return "http://" + srv.Addr().String()
}

func seedDashboard(f *testing.F, c *sluice.Client) {
	ctx := f.Context()
	if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
		f.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "t", nil); err != nil {
		f.Fatal(err)
	}
	if _, err := c.CreateSubscription(ctx, "t", "s", nil); err != nil {
		f.Fatal(err)
	}
	s, err := c.NewSender("q")
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range []string{"one", "two", "\xff\xfe"} {
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte(b)}); err != nil {
			f.Fatal(err)
		}
	}
	r, err := c.NewReceiver("q", nil)
	if err != nil {
		f.Fatal(err)
	}
	ms, err := r.Receive(ctx, 3)
	if err != nil || len(ms) != 3 {
		f.Fatalf("receive: %d messages, %v", len(ms), err)
	}
	for _, m := range ms {
		if err := r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: "fuzz"}); err != nil {
			f.Fatal(err)
		}
	}
}

// envelope frames a message as the Connect protocol's streaming requests
// carry it, as the dashboard does.
func envelope(msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// serverFaults are the Connect codes that say the server failed.
var serverFaults = map[string]bool{"internal": true, "unknown": true, "data_loss": true}

func checkDashboardAnswer(t *testing.T, c dashboardCall, req *http.Request, res *http.Response, body []byte) {
	t.Helper()
	what := req.Method + " " + req.URL.String()
	if res.StatusCode >= 500 {
		t.Fatalf("%s: %d %s", what, res.StatusCode, body)
	}
	switch {
	case c.answer == nil:
		checkFile(t, what, res)
	case res.StatusCode != http.StatusOK:
		checkClientError(t, what, res, body)
	case c.stream:
		checkStream(t, what, c.answer, body)
	default:
		if err := protojson.Unmarshal(body, proto.Clone(c.answer)); err != nil {
			t.Fatalf("%s: answer %s is not a %T: %v", what, body, c.answer, err)
		}
	}
}

// checkFile checks the answer for one of the page's files.
func checkFile(t *testing.T, what string, res *http.Response) {
	t.Helper()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d", what, res.StatusCode)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options"} {
		if res.Header.Get(h) == "" {
			t.Fatalf("%s: no %s", what, h)
		}
	}
}

// checkClientError checks a refused call's answer: a 4xx, with a Connect
// error the client caused when it is the API's (HTTP refuses some
// requests before they reach it).
func checkClientError(t *testing.T, what string, res *http.Response, body []byte) {
	t.Helper()
	if res.StatusCode < 400 {
		t.Fatalf("%s: %d %s", what, res.StatusCode, body)
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		return
	}
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(body, &e) != nil || e.Code == "" || serverFaults[e.Code] {
		t.Fatalf("%s: %d %s", what, res.StatusCode, body)
	}
}

// checkStream reads a streaming answer's envelopes: messages of the
// call's answer type, then the end of the stream, whose error, if any,
// is the client's.
func checkStream(t *testing.T, what string, answer proto.Message, body []byte) {
	t.Helper()
	for len(body) > 0 {
		if len(body) < 5 {
			t.Fatalf("%s: %d bytes after the last envelope", what, len(body))
		}
		flags, n := body[0], binary.BigEndian.Uint32(body[1:5])
		if uint64(len(body)-5) < uint64(n) {
			t.Fatalf("%s: an envelope of %d bytes in %d", what, n, len(body)-5)
		}
		msg := body[5 : 5+n]
		body = body[5+n:]
		if flags&2 == 0 {
			if err := protojson.Unmarshal(msg, proto.Clone(answer)); err != nil {
				t.Fatalf("%s: message %s is not a %T: %v", what, msg, answer, err)
			}
			continue
		}
		var end struct {
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(msg, &end); err != nil {
			t.Fatalf("%s: end of stream %s: %v", what, msg, err)
		}
		if end.Error != nil && (end.Error.Code == "" || serverFaults[end.Error.Code]) {
			t.Fatalf("%s: the stream ended with %s", what, msg)
		}
		if len(body) > 0 {
			t.Fatalf("%s: %d bytes after the end of the stream", what, len(body))
		}
		return
	}
	t.Fatalf("%s: the stream has no end", what)
}
