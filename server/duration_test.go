package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
)

// Durations through the API follow the library's rule: protobuf's maximum
// (315576000000s, beyond time.Duration) saturates to sluice.Forever and
// means never; a negative one is refused with nothing written.
func TestAPIDurationEdges(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		ctx := t.Context()
		call := func(procedure, body string) string {
			t.Helper()
			status, raw := postRaw(t, e, procedure, "", body)
			if status != http.StatusOK {
				t.Fatalf("%s %s: %d %s", procedure, body, status, raw)
			}
			return raw
		}
		call("EntityService/CreateQueue", `{"name":"q","properties":{"defaultTtl":"315576000000s","deadLetterRetention":"315576000000s","deadLetterOnExpiry":true}}`)
		q, err := e.lib.GetQueue(ctx, "q")
		if err != nil || q.DefaultTTL != 0 || q.DeadLetterRetention != 0 {
			t.Fatalf("queue created with protobuf's maximum durations: %+v, %v; want 0 (never)", q.QueueProperties, err)
		}
		call("MessagingService/Send", `{"entity":"q","messages":[{"body":"aGk=","timeToLive":"315576000000s"}]}`)
		status, ce := post(t, e, "MessagingService/Send", "", `{"entity":"q","messages":[{"body":"aGk=","timeToLive":"-1s"}]}`)
		wantStatus(t, "Send with a negative TTL", status, ce, http.StatusBadRequest, "invalid_argument", "INVALID_ARGUMENT", "negative")
		raw := call("MessagingService/Receive", `{"entity":"q","maxMessages":10,"maxWait":"315576000000s"}`)
		if strings.Count(raw, `"sequenceNumber"`) != 1 || strings.Contains(raw, `"expiresAt"`) {
			t.Fatalf("Receive after a send with protobuf's maximum TTL: %s; want the one message, expiring never", raw)
		}
		if reasons, err := e.lib.DeadLetterReasons(ctx, "q"); err != nil || len(reasons) != 0 {
			t.Fatalf("dead letters: %v, %v", reasons, err)
		}
		call("StreamService/SetStreamRetention", `{"namespace":"ns","maxAge":"315576000000s"}`)
		// A negative wait is refused before anything is received.
		status, ce = post(t, e, "MessagingService/Receive", "", `{"entity":"q","maxWait":"-1s"}`)
		wantStatus(t, "Receive with a negative wait", status, ce, http.StatusBadRequest, "invalid_argument", "INVALID_ARGUMENT", "negative")
		if st, err := e.lib.GetQueueStats(ctx, "q"); err != nil || st.InFlight != 1 || st.Active != 0 {
			t.Fatalf("stats after a refused receive: %+v, %v", st, err)
		}
	})
}
