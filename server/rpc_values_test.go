package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// rpcBadValue is a call with a number or a token out of range, or naming
// what it may not (a session of another queue, a queue without
// sessions), and the refusal it must get.
type rpcBadValue struct {
	procedure, body string
	streaming       bool
	code, reason    string
}

// rpcBadValues are checked by checkBadValues; placeholders as in
// rpcTable.
var rpcBadValues = []rpcBadValue{
	{procedure: "MessagingService/Peek", body: `{"entity":"orders","fromSequenceNumber":"-1"}`, code: "invalid_argument"},
	{procedure: "MessagingService/Peek", body: `{"entity":"orders","maxMessages":-1}`, code: "invalid_argument"},
	{procedure: "MessagingService/Peek", body: `{"entity":"orders","maxMessages":100000}`, code: "invalid_argument"},
	{procedure: "MessagingService/Receive", body: `{"entity":"orders","maxMessages":-1}`, code: "invalid_argument"},
	{procedure: "MessagingService/Receive", body: `{"entity":"orders","maxMessages":100000}`, code: "invalid_argument"},
	{procedure: "MessagingService/CancelScheduled", body: `{"entity":"orders","sequenceNumbers":["-5"]}`, code: "invalid_argument"},
	{procedure: "MessagingService/CancelScheduled", body: `{"entity":"orders","sequenceNumbers":["0"]}`, code: "invalid_argument"},
	{procedure: "MessagingService/ReceiveDeferred", body: `{"entity":"orders","sequenceNumbers":["-5"]}`, code: "invalid_argument"},
	{procedure: "MessagingService/ResubmitDeadLetters", body: `{"entity":"orders","sequenceNumbers":["-5"]}`, streaming: true,
		code: "invalid_argument"},
	{procedure: "MessagingService/AcceptSession", body: `{"entity":"orders","sessionId":"s9"}`, code: "invalid_argument"},
	{procedure: "MessagingService/AcceptSession", body: `{"entity":"orders"}`, code: "invalid_argument"},
	{procedure: "MessagingService/AcceptSession", body: `{"entity":"orders","maxWait":"1s"}`, code: "invalid_argument"},
	{procedure: "MessagingService/CloseSession", body: `{"entity":"orders","session":{"sessionId":"s1","lockToken":"$SESSION"}}`,
		code: "invalid_argument"},
	{procedure: "MessagingService/CloseSession", body: `{"entity":"sessions-b","session":{"sessionId":"s1","lockToken":"$SESSION"}}`,
		code: "failed_precondition", reason: "SESSION_LOCK_LOST"},
	{procedure: "MessagingService/CloseSession", body: `{"entity":"sessions","session":{"sessionId":"s2","lockToken":"$SESSION"}}`,
		code: "failed_precondition", reason: "SESSION_LOCK_LOST"},
	{procedure: "MessagingService/GetSessionState", body: `{"entity":"sessions-b","session":{"sessionId":"s1","lockToken":"$SESSION"}}`,
		code: "failed_precondition", reason: "SESSION_LOCK_LOST"},
	{procedure: "MessagingService/Complete", body: `{"entity":"vault","lockToken":"$LOCK"}`, code: "failed_precondition", reason: "LOCK_LOST"},
	{procedure: "MessagingService/Abandon", body: `{"entity":"orders-own","lockToken":"$LOCK"}`, code: "failed_precondition",
		reason: "LOCK_LOST"},
	{procedure: "MessagingService/Abandon", body: `{"entity":"orders","lockToken":"$LOCK","delay":"-1s"}`, code: "invalid_argument"},
	{procedure: "MessagingService/RenewLock", body: `{"entity":"vault","lockToken":"$LOCK"}`, code: "failed_precondition", reason: "LOCK_LOST"},
	{procedure: "StreamService/ListParkedEvents", body: `{"subscription":"$SUB","max":-1}`, code: "invalid_argument"},
	{procedure: "StreamService/ReplayParkedEvents", body: `{"subscription":"$SUB","max":100000}`, code: "invalid_argument"},
	{procedure: "EntityService/ListQueues", body: `{"max":-1}`, code: "invalid_argument"},
	{procedure: "EntityService/ListTopics", body: `{"max":1001}`, code: "invalid_argument"},
	{procedure: "EntityService/ListEntityStats", body: `{"max":-1}`, code: "invalid_argument"},
	{procedure: "StreamService/ListStreamSubscriptions", body: `{"stream":{"namespace":"ledger","key":"k1"},"max":-1}`,
		code: "invalid_argument"},
	{procedure: "StreamService/ListStreamSubscriptions", body: `{"stream":{"namespace":"ledger","key":"k1"},"max":1001}`,
		code: "invalid_argument"},
	{procedure: "StreamService/ListStreamSubscriptions",
		body: `{"stream":{"namespace":"ledger","key":"k1"},"consumer":"billing","consumerPrefix":"b"}`, code: "invalid_argument"},
}

// checkBadValues checks that each of rpcBadValues is refused with its
// code and changes nothing; and that a streaming call whose request
// envelope is truncated, or flagged compressed without an encoding, is
// the client's error (INVALID_ARGUMENT), which the metrics do not count
// as the server's.
func checkBadValues(t *testing.T, e *env, fx rpcFixtures, fill *strings.Replacer) {
	if _, err := e.Lib.CreateQueue(t.Context(), "sessions-b", &sluice.QueueProperties{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	// The admin acked the held delivery: its progress is stored soon,
	// and must not pass for a change the refused calls made.
	waitFor(t, "the held delivery's ack stored", 30*time.Second, func() bool {
		cs, err := e.Lib.ClusterStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range cs.Partitions {
			for _, s := range p.Subscriptions {
				if s.ID == fx.sub {
					return s.Position >= 1
				}
			}
		}
		return false
	})
	before := rpcSnapshot(t, e, fx)
	for _, c := range rpcBadValues {
		body := fill.Replace(c.body)
		var (
			status int
			ce     connectError
		)
		wantHTTP := map[string]int{"invalid_argument": 400, "failed_precondition": 400}[c.code]
		if c.streaming {
			status, ce = rpcCallStream(t, e, c.procedure, rpcAdmin, body)
			wantHTTP = http.StatusOK
		} else {
			status, ce = post(t, e, c.procedure, rpcAdmin, body)
		}
		if status != wantHTTP || ce.Code != c.code ||
			c.reason != "" && (len(ce.Details) != 1 || ce.Details[0].Debug.Reason != c.reason) {
			t.Errorf("%s %s: %d %+v; want %d %s %s", c.procedure, body, status, ce, wantHTTP, c.code, c.reason)
		}
	}
	if changed := rpcChanged(before, rpcSnapshot(t, e, fx)); changed != "" {
		t.Errorf("the refused calls changed what the tenant holds:\n%s", changed)
	}

	for _, m := range everyRPC() {
		if !m.streaming {
			continue
		}
		for _, env := range []string{
			"\x00\x00\x00\x00\x10{}", // promises 16 bytes, sends 2
			"\x00\x00",               // half a header
			"\x01\x00\x00\x00\x02{}", // compressed, no encoding
		} {
			status, raw := postEnvelope(t, e, m.name, env)
			if status != http.StatusOK || !strings.Contains(raw, `"code":"invalid_argument"`) {
				t.Errorf("%s with the envelope %q: %d %q; want the stream to end with invalid_argument", m.name, env, status, raw)
			}
		}
	}
	status, metrics := scrape(t, e, rpcAdmin)
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", status, metrics)
	}
	for line := range strings.SplitSeq(metrics, "\n") {
		if strings.HasPrefix(line, "sluice_api_calls_total") && strings.Contains(line, `code="internal"`) {
			t.Errorf("/metrics counts a client's error as the server's: %s", line)
		}
	}
}

// postEnvelope sends a server-streaming call whose request body is
// given raw, and returns its status and response body.
func postEnvelope(t *testing.T, e *env, procedure, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/sluice.v1."+procedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Authorization", "Bearer "+rpcAdmin)
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
