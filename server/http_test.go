package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// connectError is a Connect protocol error as JSON.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type  string `json:"type"`
		Debug struct {
			Reason string `json:"reason"`
		} `json:"debug"`
	} `json:"details"`
}

// post sends a Connect unary call as JSON and returns the HTTP status and
// the error, if the call failed.
func post(t *testing.T, e *env, procedure, token, body string) (int, connectError) {
	t.Helper()
	status, raw := postRaw(t, e, procedure, token, body)
	var ce connectError
	if status != http.StatusOK {
		if err := json.Unmarshal([]byte(raw), &ce); err != nil {
			t.Fatalf("%s: status %d with a body that is not a Connect error: %q", procedure, status, raw)
		}
	}
	return status, ce
}

// postRaw sends a unary call as JSON, with a token when given, and
// returns its status and response body.
func postRaw(t *testing.T, e *env, procedure, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/sluice.v1."+procedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(raw)
}

// wantStatus checks a failed call's status, code, reason and message.
func wantStatus(t *testing.T, what string, status int, ce connectError, wantStatus int, wantCode, wantReason, inMessage string) {
	t.Helper()
	if status != wantStatus || ce.Code != wantCode || !strings.Contains(ce.Message, inMessage) {
		t.Fatalf("%s: status %d, %+v; want %d %s with %q in the message", what, status, ce, wantStatus, wantCode, inMessage)
	}
	if wantReason != "" && (len(ce.Details) != 1 || ce.Details[0].Type != "sluice.v1.ErrorInfo" || ce.Details[0].Debug.Reason != wantReason) {
		t.Fatalf("%s: details %+v, want reason %s", what, ce.Details, wantReason)
	}
}

// nothingWritten checks that the tenant holds no entity.
func nothingWritten(t *testing.T, e *env, what string) {
	t.Helper()
	qs, err := e.Lib.ListQueues(t.Context(), "", 10)
	ts, err2 := e.Lib.ListTopics(t.Context(), "", 10)
	if err != nil || err2 != nil || len(qs)+len(ts) != 0 {
		t.Fatalf("%s wrote %v %v (%v, %v)", what, qs, ts, err, err2)
	}
}

// Bad requests over HTTP/JSON get the right status, a clear message, a
// reason where sluice names the condition, and write nothing.
func TestBadRequests(t *testing.T) {
	e := start(t, "sqlite", server.Config{MaxRequestBytes: 4 << 10})
	status, ce := post(t, e, "EntityService/CreateQueue", "", `{"name": "q1"`)
	wantStatus(t, "malformed JSON", status, ce, 400, "invalid_argument", "", "unmarshal")
	status, ce = post(t, e, "EntityService/CreateQueue", "", `{"name": "q1", "colour": "red"}`)
	wantStatus(t, "an unknown field", status, ce, 400, "invalid_argument", "", "colour")
	status, ce = post(t, e, "EntityService/CreateQueue", "", `{"name": "q1", "properties": {"maxDeliveryCount": "many"}}`)
	wantStatus(t, "a field of the wrong type", status, ce, 400, "invalid_argument", "", "maxDeliveryCount")
	status, ce = post(t, e, "EntityService/CreateQueue", "", `{"name": "a b"}`)
	wantStatus(t, "an invalid name", status, ce, 400, "invalid_argument", "INVALID_NAME", `"a b"`)
	status, ce = post(t, e, "EntityService/CreateQueue", "", `{"name": "q1", "properties": {"lockDuration": "3600s"}}`)
	wantStatus(t, "a lock beyond 5 min", status, ce, 400, "invalid_argument", "INVALID_ARGUMENT", "lock")
	status, ce = post(t, e, "EntityService/CreateQueue", "", `{"name": "`+strings.Repeat("q", 5000)+`"}`)
	wantStatus(t, "an oversized body", status, ce, 429, "resource_exhausted", "", "larger than configured max")
	nothingWritten(t, e, "the bad entity requests")

	status, _ = post(t, e, "EntityService/CreateQueue", "", `{"name": "q1"}`)
	if status != 200 {
		t.Fatalf("CreateQueue: status %d", status)
	}
	status, ce = post(t, e, "MessagingService/Send", "", `{"entity": "q1", "messages": [{"body": "aGk="}, {"body": "`+strings.Repeat("A", 5000)+`"}]}`)
	wantStatus(t, "an oversized batch", status, ce, 429, "resource_exhausted", "", "larger")
	status, ce = post(t, e, "MessagingService/Send", "", `{"entity": "q1", "messages": [{"body": "not base64!"}]}`)
	wantStatus(t, "a body that is not base64", status, ce, 400, "invalid_argument", "", "body")
	status, ce = post(t, e, "MessagingService/Send", "", `{"entity": "q1", "messages": []}`)
	wantStatus(t, "a send of nothing", status, ce, 400, "invalid_argument", "INVALID_ARGUMENT", "no messages")
	status, ce = post(t, e, "MessagingService/Receive", "", `{"entity": "q1", "maxMessages": 100000}`)
	wantStatus(t, "a receive of too many", status, ce, 400, "invalid_argument", "INVALID_ARGUMENT", "max")
	status, ce = post(t, e, "MessagingService/Complete", "", `{"entity": "q1", "lockToken": "nonsense"}`)
	wantStatus(t, "a malformed lock token", status, ce, 400, "invalid_argument", "INVALID_ARGUMENT", "lock token")
	status, ce = post(t, e, "MessagingService/Complete", "", `{"entity": "q1", "lockToken": "00000000000000010000000000000001"}`)
	wantStatus(t, "a lock token that holds nothing", status, ce, 400, "failed_precondition", "LOCK_LOST", "lock lost")
	status, ce = post(t, e, "MessagingService/Receive", "", `{"entity": "q1", "mode": "RECEIVE_MODE_SIDEWAYS"}`)
	wantStatus(t, "an unknown receive mode", status, ce, 400, "invalid_argument", "", "mode")
	status, ce = post(t, e, "MessagingService/Receive", "", `{"entity": "nope"}`)
	wantStatus(t, "a receive from a missing queue", status, ce, 404, "not_found", "ENTITY_NOT_FOUND", `"nope"`)
	if st, err := e.Lib.GetQueueStats(t.Context(), "q1"); err != nil || st != (sluice.QueueStats{}) {
		t.Fatalf("the bad sends left %+v (%v)", st, err)
	}
	status, ce = post(t, e, "EntityService/NoSuchCall", "", `{}`)
	wantStatus(t, "an unknown procedure", status, ce, 501, "unimplemented", "", "not registered")
}

// authEnv is a server with three keys: an admin, a producer of orders-*
// limited to 3 calls in a burst, and a consumer of orders-*.
func authEnv(t *testing.T) *env {
	return start(t, "sqlite", server.Config{Keys: []server.Key{
		{Name: "admin", Token: "admin-token-0123456789", Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
		{Name: "producer", Token: "producer-token-0123456789", RatePerSecond: 0.1, Burst: 3,
			Grants: []server.Grant{{Actions: server.Send, Entities: []string{"orders-*"}}}},
		{Name: "consumer", Token: "consumer-token-0123456789",
			Grants: []server.Grant{{Actions: server.Receive, Entities: []string{"orders-*"}}}},
	}})
}

// With keys, a call needs a known token, a grant for what it does to its
// entity, and room in its key's rate limit; a refused call writes nothing.
func TestAuthentication(t *testing.T) {
	e := authEnv(t)
	const admin, producer, consumer = "admin-token-0123456789", "producer-token-0123456789", "consumer-token-0123456789"
	status, ce := post(t, e, "EntityService/CreateQueue", "", `{"name": "orders-1"}`)
	wantStatus(t, "no credentials", status, ce, 401, "unauthenticated", "", "Authorization")
	status, ce = post(t, e, "EntityService/CreateQueue", "wrong-token-0123456789", `{"name": "orders-1"}`)
	wantStatus(t, "an unknown token", status, ce, 401, "unauthenticated", "", "unknown token")
	status, ce = post(t, e, "EntityService/CreateQueue", consumer, `{"name": "orders-1"}`)
	wantStatus(t, "a consumer creating a queue", status, ce, 403, "permission_denied", "", `"consumer" may not manage anything`)
	nothingWritten(t, e, "the refused calls")
	if status, _ := post(t, e, "EntityService/CreateQueue", admin, `{"name": "orders-1"}`); status != 200 {
		t.Fatalf("the admin's CreateQueue: status %d", status)
	}
	if status, _ := post(t, e, "EntityService/CreateQueue", admin, `{"name": "audit"}`); status != 200 {
		t.Fatalf("the admin's CreateQueue: status %d", status)
	}
	status, ce = post(t, e, "MessagingService/Send", consumer, `{"entity": "orders-1", "messages": [{"body": "aGk="}]}`)
	wantStatus(t, "a consumer sending", status, ce, 403, "permission_denied", "", "may not send")
	status, ce = post(t, e, "MessagingService/Send", producer, `{"entity": "audit", "messages": [{"body": "aGk="}]}`)
	wantStatus(t, "a producer sending to an entity it has no grant for", status, ce, 403, "permission_denied", "", `"audit"`)
	if st, _ := e.Lib.GetQueueStats(t.Context(), "audit"); st.Active != 0 {
		t.Fatalf("a refused send wrote %+v", st)
	}
	if status, _ := post(t, e, "MessagingService/Send", producer, `{"entity": "orders-1", "messages": [{"body": "aGk="}]}`); status != 200 {
		t.Fatalf("the producer's send: status %d", status)
	}
	status, ce = post(t, e, "MessagingService/Receive", producer, `{"entity": "orders-1"}`)
	wantStatus(t, "a producer receiving", status, ce, 403, "permission_denied", "", "may not receive")
	status, ce = post(t, e, "MessagingService/Send", producer, `{"entity": "orders-1", "messages": [{"body": "aGk="}]}`)
	wantStatus(t, "a producer past its rate limit", status, ce, 429, "resource_exhausted", "RATE_LIMITED", "rate limit")
	if st, _ := e.Lib.GetQueueStats(t.Context(), "orders-1"); st.Active != 1 {
		t.Fatalf("after a send and a rate-limited one: %+v", st)
	}

	// The Go client carries the token; listings show what a key may see.
	c := e.Remote(t, &client.Options{Token: consumer})
	r, _ := c.NewReceiver("orders-1", nil)
	ms, err := r.Receive(t.Context(), 1)
	if err != nil || string(ms[0].Body) != "hi" {
		t.Fatalf("the consumer's Receive = %+v, %v", ms, err)
	}
	if err := r.Complete(t.Context(), ms[0]); err != nil {
		t.Fatal(err)
	}
	qs, err := e.Remote(t, &client.Options{Token: admin}).ListQueues(t.Context(), "", 10)
	if err != nil || len(qs) != 2 {
		t.Fatalf("the admin lists %+v, %v", qs, err)
	}
	if qs, err := c.ListQueues(t.Context(), "", 10); err != nil || len(qs) != 1 || qs[0].Name != "orders-1" {
		t.Fatalf("the consumer lists %+v, %v", qs, err)
	}
	_, err = c.ClusterStatus(t.Context())
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("the consumer's ClusterStatus: %v", err)
	}
}

// Configurations that would be unsafe or wrong are refused at New.
func TestConfigRefused(t *testing.T) {
	c, err := sluice.NewClient(shared.Backend(t, "sqlite"), &sluice.Options{Service: "t-" + randHex(6)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"every interface without keys", server.Config{Addr: "0.0.0.0:7070"}, "--insecure"},
		{"an outside address without keys", server.Config{Addr: "192.0.2.1:7070"}, "without authentication"},
		{"a short token", server.Config{Keys: []server.Key{{Name: "k", Token: "short"}}}, "too easy to guess"},
		{"a key without a token", server.Config{Keys: []server.Key{{Name: "k"}}}, "no token"},
		{"a bad digest", server.Config{Keys: []server.Key{{Name: "k", TokenSHA256: "zz"}}}, "64 hex digits"},
		{"two keys with one token", server.Config{Keys: []server.Key{{Name: "a", Token: "same-token-0123456789"},
			{Name: "b", Token: "same-token-0123456789"}}}, "same token"},
	} {
		tc.cfg.Client = c
		if _, err := server.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error about %q", tc.name, err, tc.want)
		}
	}
	if _, err := server.New(server.Config{Client: c, Addr: "0.0.0.0:0", Insecure: true}); err != nil {
		t.Errorf("New on every interface with Insecure: %v", err)
	}
	if _, err := server.New(server.Config{Client: c, Addr: "localhost:0"}); err != nil {
		t.Errorf("New on localhost: %v", err)
	}
}

// /healthz and /readyz; Shutdown ends a waiting receive at once.
func TestHealthAndShutdown(t *testing.T) {
	e := start(t, "sqlite", server.Config{})
	for _, path := range []string{"/healthz", "/readyz"} {
		res, err := http.Get(e.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok" {
			t.Fatalf("GET %s: %d %q", path, res.StatusCode, body)
		}
	}
	if _, err := e.Lib.CreateQueue(t.Context(), "idle", nil); err != nil {
		t.Fatal(err)
	}
	raw := sluicev1connect.NewMessagingServiceClient(connect.NewClient(connecthttp.NewTransport(http.DefaultClient, e.URL)))
	type result struct {
		res *sluicev1.ReceiveResponse
		err error
		in  time.Duration
	}
	done := make(chan result, 1)
	go func() {
		began := time.Now()
		res, err := raw.Receive(context.Background(), &sluicev1.ReceiveRequest{Entity: "idle", MaxWait: durationpb.New(30 * time.Second)})
		done <- result{res, err, time.Since(began)}
	}()
	time.Sleep(300 * time.Millisecond) // the receive waits
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.Srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	r := <-done
	if r.err != nil || len(r.res.Messages) != 0 || r.in > 5*time.Second {
		t.Fatalf("a receive waiting through Shutdown returned %v, %v after %v", r.res, r.err, r.in)
	}
}

// scrape returns the server's /metrics, with a token when given.
func scrape(t *testing.T, e *env, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.URL+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// /metrics counts calls by procedure and code, messages sent, received
// and settled, lost locks and dead letters, and reads the entities'
// depths and the partitions' lag at each scrape.
func TestMetrics(t *testing.T) {
	e := start(t, "sqlite", server.Config{})
	c := e.Remote(t, nil)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "metered", nil); err != nil {
		t.Fatal(err)
	}
	snd, _ := c.NewSender("metered")
	if _, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("1")}, {Body: []byte("2")}, {Body: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	r, _ := c.NewReceiver("metered", nil)
	ms, err := r.Receive(ctx, 2)
	if err != nil || len(ms) != 2 {
		t.Fatalf("Receive = %v, %v", ms, err)
	}
	r.Complete(ctx, ms[0])
	r.Complete(ctx, ms[0]) // lock lost
	r.DeadLetter(ctx, ms[1], &sluice.DeadLetterOptions{Reason: "broken"})
	// A message the queue dead-lettered, in another process (the library
	// here), shows by reason.
	if _, err := e.Lib.CreateQueue(ctx, "poison", &sluice.QueueProperties{MaxDeliveryCount: 1}); err != nil {
		t.Fatal(err)
	}
	psnd, _ := e.Lib.NewSender("poison")
	if _, err := psnd.SendBatch(ctx, []*sluice.Message{{Body: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	pr, _ := e.Lib.NewReceiver("poison", nil)
	if pm, err := pr.Receive(ctx, 1); err != nil || len(pm) != 1 || pr.Abandon(ctx, pm[0], nil) != nil {
		t.Fatalf("poison: %v, %v", pm, err)
	}
	c.GetQueue(ctx, "missing")
	post(t, e, "EntityService/NoSuchCall", "", `{}`)
	status, body := scrape(t, e, "")
	if strings.Contains(body, "NoSuchCall") {
		t.Errorf("/metrics labels a procedure the caller made up")
	}
	if status != 200 {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	for _, want := range []string{
		`sluice_api_calls_total{code="ok",procedure="/sluice.v1.MessagingService/Send"} 1`,
		`sluice_api_calls_total{code="not_found",procedure="/sluice.v1.EntityService/GetQueue"} 1`,
		`sluice_api_calls_total{code="failed_precondition",procedure="/sluice.v1.MessagingService/Complete"} 1`,
		`sluice_messages_sent_total{entity="metered"} 3`,
		`sluice_messages_received_total{entity="metered",mode="peek_lock"} 2`,
		`sluice_messages_settled_total{action="complete",entity="metered"} 1`,
		`sluice_messages_settled_total{action="dead_letter",entity="metered"} 1`,
		`sluice_lock_lost_total{entity="metered"} 1`,
		`sluice_messages_dead_lettered_total{entity="metered",reason="broken"} 1`,
		`sluice_messages_dead_lettered_total{entity="poison",reason="MaxDeliveryCountExceeded"} 1`,
		`sluice_messages_dead_lettered_total{entity="metered",reason="TTLExpiredException"} 0`,
		`sluice_messages_received_total{entity="poison",mode="receive_and_delete"} 0`,
		`sluice_messages_settled_total{action="defer",entity="metered"} 0`,
		`sluice_message_wait_seconds_count{entity="metered"} 2`,
		`sluice_entity_messages{entity="metered",state="active"} 1`,
		`sluice_entity_messages{entity="metered",state="dead_lettered"} 1`,
		`sluice_entity_dead_letters{entity="metered",reason="broken"} 1`,
		`sluice_entity_dead_letters{entity="poison",reason="MaxDeliveryCountExceeded"} 1`,
		`sluice_api_call_duration_seconds_count{procedure="/sluice.v1.MessagingService/Receive"} 1`,
		`sluice_scrape_errors 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// With keys, a key that may manage $metrics reads them.
	a := authEnv(t)
	if status, _ := scrape(t, a, ""); status != 401 {
		t.Errorf("/metrics without a token: %d", status)
	}
	if status, _ := scrape(t, a, "consumer-token-0123456789"); status != 403 {
		t.Errorf("/metrics with the consumer's token: %d", status)
	}
	if status, body := scrape(t, a, "admin-token-0123456789"); status != 200 || !strings.Contains(body, "sluice_api_calls_in_flight") {
		t.Errorf("/metrics with the admin's token: %d", status)
	}
}

// A server without keys answers only requests to a loopback host, so
// that a web page cannot reach it through a name of its own pointed at
// 127.0.0.1; with keys, any host. The dashboard may not be framed.
func TestLoopbackHostsOnly(t *testing.T) {
	t.Parallel()
	get := func(e *env, host, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.URL+path, nil)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	open := start(t, "sqlite", server.Config{})
	port := strings.TrimPrefix(open.URL, "http://127.0.0.1")
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "app.localhost", "[::1]" + port, "LOCALHOST."} {
		if res := get(open, host, "/healthz"); res.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, res.StatusCode)
		}
	}
	for _, host := range []string{"evil.example" + port, "127.0.0.1.evil.example", "localhost.evil.example", "10.0.0.1" + port} {
		if res := get(open, host, "/healthz"); res.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host %s: %d, want 421", host, res.StatusCode)
		}
	}
	res := get(open, "127.0.0.1"+port, "/")
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || res.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the dashboard may be framed: CSP %q, X-Frame-Options %q", csp, res.Header.Get("X-Frame-Options"))
	}
	keyed := start(t, "sqlite", server.Config{Keys: []server.Key{{Name: "k", Token: "k-token-0123456789",
		Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}}}})
	if res := get(keyed, "sluice.example", "/healthz"); res.StatusCode != http.StatusOK {
		t.Errorf("a server with keys, Host sluice.example: %d, want 200", res.StatusCode)
	}
}
