package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// rpcBiller may receive as the consumer "billing" and from the
// namespace "payments", not from "ledger", to which billing is
// subscribed.
const rpcBiller = "rpc-biller-token-0123456789"

// checkNamespaceGrants checks that a key that may receive as a consumer
// is refused the consumer's subscriptions to a namespace it may not
// receive, with their parked events: a key never sees events of a
// namespace it has no grant on (TestConsumeNamespaceGrants checks the
// deliveries of a Consume stream).
func checkNamespaceGrants(t *testing.T, e *env, fx rpcFixtures) {
	for _, c := range []struct{ procedure, body string }{
		{"StreamService/ListParkedEvents", `{"subscription":"` + fx.sub + `"}`},
		{"StreamService/GetStreamSubscription", `{"subscription":"` + fx.sub + `"}`},
		{"StreamService/ListParkedEvents", `{"subscription":"ns/ledger/billing"}`},
		{"StreamService/Unsubscribe", `{"subscription":"` + fx.sub + `"}`},
	} {
		status, ce := post(t, e, c.procedure, rpcBiller, c.body)
		if status != http.StatusForbidden || ce.Code != "permission_denied" {
			t.Errorf("%s %s by a key without receive on ledger: %d %+v; want permission_denied", c.procedure, c.body, status, ce)
		}
	}
	if _, err := e.Lib.GetStreamSubscription(t.Context(), fx.sub); err != nil {
		t.Errorf("billing's subscription after the biller's refused Unsubscribe: %v", err)
	}
}

// A Consume stream gets only the deliveries of namespaces its key may
// receive: with a stream of a key that may receive the consumer but not
// the namespace "ledger", and one of a key that may, every ledger event
// goes to the latter, however busy, and the other stream still gets the
// events of its own namespace.
func TestConsumeNamespaceGrants(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		const admin, biller = "ns-admin-token-0123456789", "ns-biller-token-0123456789"
		e := start(t, kind, server.Config{StreamNodes: rpcStreamNodes, Keys: []server.Key{
			{Name: "admin", Token: admin, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
			{Name: "biller", Token: biller, Grants: []server.Grant{{Actions: server.Receive, Entities: []string{"billing", "payments"}}}},
		}})
		ctx := t.Context()
		const ledgerEvents = 4
		var ledger []sluice.StreamID
		for i := range ledgerEvents {
			ledger = append(ledger, sluice.StreamID{Namespace: "ledger", Key: fmt.Sprintf("l%d", i)})
		}
		payments := sluice.StreamID{Namespace: "payments", Key: "p1"}
		for _, id := range append(ledger, payments) {
			if _, err := e.Lib.Subscribe(ctx, id, "billing", sluice.FromBeginning()); err != nil {
				t.Fatal(err)
			}
		}
		sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		body := `{"consumer":"billing","ackTimeout":"600s"}`
		a := consumeStream(t, rpcOpenStream(t, sctx, e, "StreamService/Consume", admin, body))
		defer a.s.close()
		b := consumeStream(t, rpcOpenStream(t, sctx, e, "StreamService/Consume", biller, body))
		defer b.s.close()
		for _, id := range ledger {
			if _, err := e.Lib.Publish(ctx, id, sluice.Event{Body: []byte("secret")}); err != nil {
				t.Fatal(err)
			}
		}
		// The admin's stream gets every ledger event (none is settled, so
		// the biller's, idle, would get some if it might).
		for i := range ledgerEvents {
			if ns := a.next(t); ns != "ledger" {
				t.Fatalf("the admin's stream got an event of %q, want the ledger's %d", ns, i+1)
			}
		}
		if _, err := e.Lib.Publish(ctx, payments, sluice.Event{Body: []byte("bill")}); err != nil {
			t.Fatal(err)
		}
		if ns := b.next(t); ns != "payments" {
			t.Fatalf("the biller's stream got an event of %q; want only the payments' one", ns)
		}
	})
}

// consumeReader reads a Consume stream's deliveries.
type consumeReader struct{ s *rpcStream }

// consumeStream waits for a Consume stream's start.
func consumeStream(t *testing.T, s *rpcStream) consumeReader {
	t.Helper()
	msg, end, err := s.next()
	if err != nil || end != nil || !json.Valid(msg) {
		t.Fatalf("Consume did not start: %s, %v, %+v", msg, err, end)
	}
	var started struct {
		Started *json.RawMessage `json:"started"`
	}
	if json.Unmarshal(msg, &started); started.Started == nil {
		t.Fatalf("Consume began with %s, not started", msg)
	}
	return consumeReader{s}
}

// next returns the namespace of the stream's next delivery.
func (r consumeReader) next(t *testing.T) string {
	t.Helper()
	for {
		msg, end, err := r.s.next()
		if err != nil || end != nil {
			t.Fatalf("the Consume stream ended before a delivery: %v, %+v", err, end)
		}
		var d struct {
			Delivery *struct {
				Event struct {
					Stream struct{ Namespace string } `json:"stream"`
				} `json:"event"`
			} `json:"delivery"`
		}
		if err := json.Unmarshal(msg, &d); err != nil {
			t.Fatal(err)
		}
		if d.Delivery != nil {
			return d.Delivery.Event.Stream.Namespace
		}
	}
}
