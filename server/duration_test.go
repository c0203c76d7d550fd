package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
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
		q, err := e.Lib.GetQueue(ctx, "q")
		if err != nil || q.DefaultTTL != sluice.Forever || q.DeadLetterRetention != sluice.Forever {
			t.Fatalf("queue created with protobuf's maximum durations: %+v, %v; want Forever (never)", q.QueueProperties, err)
		}
		call("MessagingService/Send", `{"entity":"q","messages":[{"body":"aGk=","timeToLive":"315576000000s"}]}`)
		status, ce := post(t, e, "MessagingService/Send", "", `{"entity":"q","messages":[{"body":"aGk=","timeToLive":"-1s"}]}`)
		wantStatus(t, "Send with a negative TTL", status, ce, http.StatusBadRequest, "invalid_argument", "INVALID_ARGUMENT", "negative")
		raw := call("MessagingService/Receive", `{"entity":"q","maxMessages":10,"maxWait":"315576000000s"}`)
		if strings.Count(raw, `"sequenceNumber"`) != 1 || strings.Contains(raw, `"expiresAt"`) {
			t.Fatalf("Receive after a send with protobuf's maximum TTL: %s; want the one message, expiring never", raw)
		}
		if reasons, err := e.Lib.DeadLetterReasons(ctx, "q"); err != nil || len(reasons) != 0 {
			t.Fatalf("dead letters: %v, %v", reasons, err)
		}
		call("StreamService/SetStreamRetention", `{"namespace":"ns","maxAge":"315576000000s"}`)
		// A negative wait is refused before anything is received.
		status, ce = post(t, e, "MessagingService/Receive", "", `{"entity":"q","maxWait":"-1s"}`)
		wantStatus(t, "Receive with a negative wait", status, ce, http.StatusBadRequest, "invalid_argument", "INVALID_ARGUMENT", "negative")
		if st, err := e.Lib.GetQueueStats(ctx, "q"); err != nil || st.InFlight != 1 || st.Active != 0 {
			t.Fatalf("stats after a refused receive: %+v, %v", st, err)
		}
	})
}

// Never reads back as the longest duration through the API, as through
// the library (sluice.Forever, as Service Bus reads back
// TimeSpan.MaxValue): the JSON shows it, the Go client reads it as
// Forever, and an update with what was read back changes nothing.
func TestAPINeverReadsBackAsForever(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		ctx := t.Context()
		const forever = "9223372036.854775807s"
		call := func(procedure, body string) map[string]any {
			t.Helper()
			status, raw := postRaw(t, e, procedure, "", body)
			if status != http.StatusOK {
				t.Fatalf("%s %s: %d %s", procedure, body, status, raw)
			}
			var out map[string]any
			if err := json.Unmarshal([]byte(raw), &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		props := func(res map[string]any, kind string) map[string]any {
			t.Helper()
			ent, _ := res[kind].(map[string]any)
			p, _ := ent["properties"].(map[string]any)
			if p == nil {
				t.Fatalf("no %s properties in %v", kind, res)
			}
			return p
		}
		for _, c := range []struct{ create, get, kind, body, getBody string }{
			{"CreateQueue", "GetQueue", "queue", `{"name":"q"}`, `{"name":"q"}`},
			{"CreateQueue", "GetQueue", "queue", `{"name":"q2","properties":{"defaultTtl":"` + forever + `","deadLetterRetention":"315576000000s"}}`, `{"name":"q2"}`},
			{"CreateTopic", "GetTopic", "topic", `{"name":"t"}`, `{"name":"t"}`},
			{"CreateSubscription", "GetSubscription", "subscription", `{"topic":"t","name":"s"}`, `{"topic":"t","name":"s"}`},
		} {
			for _, res := range []map[string]any{call("EntityService/"+c.create, c.body), call("EntityService/"+c.get, c.getBody)} {
				p := props(res, c.kind)
				if p["defaultTtl"] != forever || c.kind != "topic" && p["deadLetterRetention"] != forever {
					t.Errorf("%s %s: properties %v; want defaultTtl and deadLetterRetention %s", c.create, c.body, p, forever)
				}
			}
		}
		cl := e.Remote(t, nil)
		q, err := cl.GetQueue(ctx, "q")
		if err != nil || q.DefaultTTL != sluice.Forever || q.DeadLetterRetention != sluice.Forever {
			t.Fatalf("the client's GetQueue = %+v, %v; want Forever", q, err)
		}
		if u, err := cl.UpdateQueue(ctx, "q", q.QueueProperties); err != nil || u != q {
			t.Fatalf("the client's UpdateQueue with what it read = %+v, %v; want %+v", u, err, q)
		}
		tp, err := cl.GetTopic(ctx, "t")
		if err != nil || tp.DefaultTTL != sluice.Forever {
			t.Fatalf("the client's GetTopic = %+v, %v; want Forever", tp, err)
		}
		if u, err := cl.UpdateTopic(ctx, "t", tp.TopicProperties); err != nil || u != tp {
			t.Fatalf("the client's UpdateTopic with what it read = %+v, %v; want %+v", u, err, tp)
		}
		sub, err := cl.GetSubscription(ctx, "t", "s")
		if err != nil || sub.DefaultTTL != sluice.Forever || sub.DeadLetterRetention != sluice.Forever {
			t.Fatalf("the client's GetSubscription = %+v, %v; want Forever", sub, err)
		}
		if u, err := cl.UpdateSubscription(ctx, "t", "s", sub.SubscriptionProperties); err != nil || u.SubscriptionProperties != sub.SubscriptionProperties {
			t.Fatalf("the client's UpdateSubscription with what it read = %+v, %v; want %+v", u, err, sub)
		}
		// The JSON read back, sent back, changes nothing either.
		p := props(call("EntityService/GetQueue", `{"name":"q"}`), "queue")
		raw, _ := json.Marshal(map[string]any{"name": "q", "properties": p})
		call("EntityService/UpdateQueue", string(raw))
		if again, err := e.Lib.GetQueue(ctx, "q"); err != nil || again != q {
			t.Fatalf("after an update with the JSON read back: %+v, %v; want %+v", again, err, q)
		}
	})
}
