package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// Streams through the API: publish, subscriptions, and remote consumers
// that get every stream's events in order; parked events and their
// replay; and two remote processors of one consumer sharing its
// deliveries, the one that stops handing its part to the other.
func TestStreamsAPI(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{StreamNodes: streamNodes})
		c := e.Remote(t, nil)
		ctx := t.Context()

		pos, err := c.Publish(ctx, sluice.StreamID{Namespace: "orders", Key: "o-0"},
			sluice.Event{Body: []byte("a"), Properties: map[string]string{"n": "1"}}, sluice.Event{Body: []byte("b")})
		if err != nil || len(pos) != 2 || pos[1] != pos[0]+1 {
			t.Fatalf("Publish = %v, %v", pos, err)
		}
		audit, err := c.Subscribe(ctx, sluice.StreamID{Namespace: "orders", Key: "o-0"}, "audit", sluice.FromBeginning())
		if err != nil || audit.Consumer != "audit" || audit.Partition != sluice.PartitionOf(audit.Stream, 16) {
			t.Fatalf("Subscribe = %+v, %v", audit, err)
		}
		if got, err := c.GetStreamSubscription(ctx, audit.ID); err != nil || got.ID != audit.ID || got.Stream.Key != "o-0" {
			t.Fatalf("GetStreamSubscription = %+v, %v", got, err)
		}

		got := newEvents()
		var poisoned atomic.Bool
		poisoned.Store(true)
		handler := func(ctx context.Context, ev *sluice.StreamEvent) error {
			if string(ev.Body) == "poison" && poisoned.Load() {
				return errors.New("boom")
			}
			got.Add(ev)
			return nil
		}
		opts := &sluice.ConsumerOptions{Namespace: "orders", MaxAttempts: 2, RetryBackoff: 10 * time.Millisecond}
		first := startRemote(t, c, "", func(p *client.StreamProcessor) {
			if err := p.Handle("billing", handler, opts); err != nil {
				t.Fatal(err)
			}
			if err := p.Handle("audit", handler, nil); err != nil {
				t.Fatal(err)
			}
		})
		waitFor(t, "audit reads o-0 from the beginning", 30*time.Second, func() bool { return len(got.Positions(audit.ID, "o-0")) == 2 })
		if subs, err := c.StreamSubscriptions(ctx, sluice.StreamID{Namespace: "orders", Key: "o-0"}); err != nil || len(subs) != 2 {
			t.Fatalf("StreamSubscriptions = %+v, %v; want audit's and billing's namespace subscription", subs, err)
		}

		const keys, each = 8, 10
		publishAll := func(round int) {
			for k := range keys {
				id := sluice.StreamID{Namespace: "orders", Key: fmt.Sprintf("k-%d", k)}
				for i := range each {
					if _, err := c.Publish(ctx, id, sluice.Event{Body: []byte(fmt.Sprintf("%d-%d", round, i))}); err != nil {
						t.Fatalf("Publish: %v", err)
					}
				}
			}
		}
		publishAll(0)
		const billing = "ns/orders/billing"
		// At least once, in order: a stream's events first arrive in
		// order; a redelivery (a lease lost on a loaded machine) repeats
		// from the last stored progress.
		inOrder := func(n int) bool {
			for k := range keys {
				p := firstSeen(got.Positions(billing, fmt.Sprintf("k-%d", k)))
				if !slices.IsSorted(p) {
					t.Fatalf("stream k-%d first delivered in the order %v", k, p)
				}
				if len(p) < n {
					return false
				}
			}
			return true
		}
		waitFor(t, "billing gets every event, in order", 30*time.Second, func() bool { return inOrder(each) })

		// A second processor of billing shares its deliveries; the first
		// stops, handing its part over.
		second := startRemote(t, e.Remote(t, &client.Options{JSON: true}), "", func(p *client.StreamProcessor) {
			p.Handle("billing", handler, opts)
		})
		publishAll(1)
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := first.Stop(stopCtx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		publishAll(2)
		waitFor(t, "billing gets all three rounds, in order", 30*time.Second, func() bool { return inOrder(3 * each) })
		for k := range keys {
			if p := firstSeen(got.Positions(billing, fmt.Sprintf("k-%d", k))); len(p) != 3*each {
				t.Fatalf("stream k-%d: %d distinct positions, want %d", k, len(p), 3*each)
			}
		}

		// An event that keeps failing is parked, then replayed.
		poison := sluice.StreamID{Namespace: "orders", Key: "poison"}
		if _, err := c.Publish(ctx, poison, sluice.Event{Body: []byte("poison")}, sluice.Event{Body: []byte("after")}); err != nil {
			t.Fatal(err)
		}
		var parked []sluice.ParkedEvent
		waitFor(t, "the poison event is parked", 20*time.Second, func() bool {
			parked, err = c.ParkedEvents(ctx, billing, 10)
			return err == nil && len(parked) == 1
		})
		if p := parked[0]; string(p.Body) != "poison" || !strings.Contains(p.Error, "boom") || p.Attempts != 2 || p.Key != "poison" {
			t.Fatalf("parked %+v, want the poison event after 2 attempts with its error", p)
		}
		waitFor(t, "the event after it is delivered", 10*time.Second, func() bool { return len(got.Positions(billing, "poison")) == 1 })
		poisoned.Store(false)
		if n, err := second.Replay(ctx, billing, 10); err != nil || n != 1 {
			t.Fatalf("Replay = %d, %v; want 1", n, err)
		}
		if p, err := c.ParkedEvents(ctx, billing, 10); err != nil || len(p) != 0 {
			t.Fatalf("parked after the replay: %+v, %v", p, err)
		}

		// The server runs billing's node in a group of its own.
		status, err := c.ClusterStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(status.Nodes, func(n sluice.ClusterNode) bool {
			return n.Alive && n.Group == "billing" && slices.Equal(n.Consumers, []string{"billing"}) && len(n.Partitions) == 16
		}) {
			t.Fatalf("cluster nodes %+v: want billing's node, alive, pulling 16 partitions", status.Nodes)
		}

		_, metrics := scrape(t, e, "")
		for _, want := range []string{`sluice_stream_events_published_total{namespace="orders"} 2`, // at least
			`sluice_stream_deliveries_total{consumer="billing",outcome="ack"}`,
			`sluice_stream_deliveries_total{consumer="billing",outcome="nack"}`,
			`sluice_stream_consume_streams 1`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
		}

		if err := c.Unsubscribe(ctx, audit.ID); err != nil {
			t.Fatalf("Unsubscribe: %v", err)
		}
		_, err = c.GetStreamSubscription(ctx, audit.ID)
		wantErr(t, "GetStreamSubscription after Unsubscribe", err, sluice.ErrSubscriptionNotFound)
	})
}

// A delivery not settled within its ack timeout is delivered again; a
// remote consumer runs in one group at a time, beside the library's
// processors; the last stream to close stops the server's node.
func TestConsumeAckTimeoutAndGroups(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{StreamNodes: streamNodes})
		c := e.Remote(t, nil)
		ctx := t.Context()
		var attempts []int
		var mu sync.Mutex
		p := startRemote(t, c, "", func(p *client.StreamProcessor) {
			p.Handle("slow", func(ctx context.Context, ev *sluice.StreamEvent) error {
				mu.Lock()
				attempts = append(attempts, ev.Attempt)
				mu.Unlock()
				if ev.Attempt == 1 {
					<-ctx.Done() // past the ack timeout
					return ctx.Err()
				}
				return nil
			}, &sluice.ConsumerOptions{Namespace: "jobs", DeliveryTimeout: 300 * time.Millisecond, RetryBackoff: 10 * time.Millisecond})
		})
		if _, err := c.Publish(ctx, sluice.StreamID{Namespace: "jobs", Key: "j"}, sluice.Event{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the second attempt", 30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(attempts, 2) && attempts[0] == 1
		})

		// The library cannot take slow while the server runs it, nor a
		// remote processor take a consumer the library runs.
		lib := e.Lib.NewStreamProcessor(&sluice.StreamProcessorOptions{HeartbeatInterval: 100 * time.Millisecond, FailureTimeout: time.Second})
		lib.Handle("slow", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
		wantErr(t, "a library processor of a consumer the server runs", lib.Start(ctx), sluice.ErrConsumerConflict)
		mine := e.Lib.NewStreamProcessor(&sluice.StreamProcessorOptions{HeartbeatInterval: 100 * time.Millisecond, FailureTimeout: time.Second})
		mine.Handle("local", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
		if err := mine.Start(ctx); err != nil {
			t.Fatalf("library processor: %v", err)
		}
		defer mine.Stop(context.Background())
		thief := c.NewStreamProcessor(nil)
		thief.Handle("local", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
		wantErr(t, "a remote processor of a consumer the library runs", thief.Start(ctx), sluice.ErrConsumerConflict)
		other := c.NewStreamProcessor(&sluice.StreamProcessorOptions{Group: "elsewhere"})
		other.Handle("slow", func(context.Context, *sluice.StreamEvent) error { return nil }, &sluice.ConsumerOptions{Namespace: "jobs"})
		wantErr(t, "a second stream of slow in another group", other.Start(ctx), sluice.ErrConsumerConflict)
		differs := c.NewStreamProcessor(nil)
		differs.Handle("slow", func(context.Context, *sluice.StreamEvent) error { return nil },
			&sluice.ConsumerOptions{Namespace: "jobs", DeliveryTimeout: time.Minute})
		err := differs.Start(ctx)
		wantErr(t, "a second stream of slow with other options", err, sluice.ErrConsumerConflict)
		if !strings.Contains(err.Error(), "ack timeout 300ms") {
			t.Errorf("the conflict does not name the options slow runs with: %v", err)
		}

		// The last stream closes: the server's node of slow leaves.
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := p.Stop(stopCtx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		waitFor(t, "slow's node leaves the cluster", 10*time.Second, func() bool {
			s, err := e.Lib.ClusterStatus(ctx)
			return err == nil && !slices.ContainsFunc(s.Nodes, func(n sluice.ClusterNode) bool { return n.Group == "slow" })
		})
	})
}

// A consumer whose failure policy faults stops its subscription on an
// event that keeps failing; ClearFault over the API resumes it with that
// event.
func TestConsumeFaultAndClear(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{StreamNodes: streamNodes})
		c := e.Remote(t, nil)
		ctx := t.Context()
		var broken atomic.Bool
		broken.Store(true)
		got := newEvents()
		startRemote(t, c, "", func(p *client.StreamProcessor) {
			p.Handle("ledger", func(ctx context.Context, ev *sluice.StreamEvent) error {
				if broken.Load() {
					return errors.New("ledger offline")
				}
				got.Add(ev)
				return nil
			}, &sluice.ConsumerOptions{Namespace: "payments", MaxAttempts: 2, RetryBackoff: 10 * time.Millisecond,
				OnFailure: sluice.FaultOnFailure})
		})
		id := sluice.StreamID{Namespace: "payments", Key: "p-1"}
		if _, err := c.Publish(ctx, id, sluice.Event{Body: []byte("one")}, sluice.Event{Body: []byte("two")}); err != nil {
			t.Fatal(err)
		}
		const sub = "ns/payments/ledger"
		waitFor(t, "the subscription faults", 10*time.Second, func() bool {
			s, err := c.GetStreamSubscription(ctx, sub)
			return err == nil && strings.Contains(s.Fault, "ledger offline")
		})
		broken.Store(false)
		if err := c.ClearFault(ctx, sub); err != nil {
			t.Fatalf("ClearFault: %v", err)
		}
		waitFor(t, "both events after the fault is cleared", 10*time.Second, func() bool { return len(got.Positions(sub, "p-1")) == 2 })
		if s, err := c.GetStreamSubscription(ctx, sub); err != nil || s.Fault != "" {
			t.Fatalf("subscription after ClearFault: %+v, %v", s, err)
		}
		wantErr(t, "ClearFault of a missing subscription", c.ClearFault(ctx, "missing"), sluice.ErrSubscriptionNotFound)
	})
}

// A remote consumer that stops while a delivery is in progress cuts it
// short: the event is delivered again to the next stream of the
// consumer, and is not counted as a failure (with one attempt allowed, a
// failure would park it).
func TestConsumeStopCutsShort(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{StreamNodes: streamNodes})
		c := e.Remote(t, nil)
		ctx := t.Context()
		opts := &sluice.ConsumerOptions{Namespace: "jobs", MaxAttempts: 1}
		started := make(chan struct{}, 1)
		first := c.NewStreamProcessor(nil)
		first.Handle("worker", func(ctx context.Context, ev *sluice.StreamEvent) error {
			started <- struct{}{}
			<-ctx.Done() // held until Stop gives up on it
			return ctx.Err()
		}, opts)
		if err := first.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Publish(ctx, sluice.StreamID{Namespace: "jobs", Key: "j"}, sluice.Event{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("no delivery")
		}
		stopCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		wantErr(t, "Stop with a delivery held past its context", first.Stop(stopCtx), context.DeadlineExceeded)
		// Once the server's node of worker stopped, no stream of worker
		// is left to hand the delivery to: it is cut short.
		waitFor(t, "worker's node leaves the cluster", 10*time.Second, func() bool {
			s, err := e.Lib.ClusterStatus(ctx)
			return err == nil && !slices.ContainsFunc(s.Nodes, func(n sluice.ClusterNode) bool { return n.Group == "worker" })
		})

		got := make(chan int, 1)
		startRemote(t, c, "", func(p *client.StreamProcessor) {
			p.Handle("worker", func(ctx context.Context, ev *sluice.StreamEvent) error {
				got <- ev.Attempt
				return nil
			}, opts)
		})
		select {
		case attempt := <-got:
			if attempt != 1 {
				t.Errorf("delivered again as attempt %d, want 1", attempt)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the event cut short was not delivered again")
		}
		if parked, err := c.ParkedEvents(ctx, "ns/jobs/worker", 10); err != nil || len(parked) != 0 {
			t.Fatalf("parked: %+v, %v; want none", parked, err)
		}
		_, metrics := scrape(t, e, "")
		if !strings.Contains(metrics, `sluice_stream_deliveries_total{consumer="worker",outcome="cut_short"} 1`) ||
			strings.Contains(metrics, `outcome="expired"`) || strings.Contains(metrics, `outcome="nack"`) {
			t.Errorf("the delivery cut short is not counted as such:\n%s", grepLines(metrics, "sluice_stream_deliveries_total"))
		}
	})
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// Bad stream calls are refused with the right status and a clear
// message, and write nothing.
func TestStreamsAPIBadRequests(t *testing.T) {
	e := start(t, "sqlite", server.Config{StreamNodes: streamNodes})
	c := e.Remote(t, nil)
	ctx := t.Context()
	_, err := c.Publish(ctx, sluice.StreamID{Namespace: "bad name", Key: "k"}, sluice.Event{Body: []byte("x")})
	wantErr(t, "Publish to a bad namespace", err, sluice.ErrInvalidName)
	_, err = c.Publish(ctx, sluice.StreamID{Namespace: "orders", Key: "k"})
	wantErr(t, "Publish of nothing", err, sluice.ErrInvalidArgument)
	_, err = c.Subscribe(ctx, sluice.StreamID{Namespace: "orders", Key: "k"}, "-bad", sluice.FromNow())
	wantErr(t, "Subscribe of a bad consumer", err, sluice.ErrInvalidName)
	_, err = c.Subscribe(ctx, sluice.StreamID{Namespace: "orders", Key: "k"}, "c", sluice.FromPosition(0))
	wantErr(t, "Subscribe from position 0", err, sluice.ErrInvalidArgument)
	// An empty key subscribes to the namespace: once, and not from a
	// position.
	whole, err := c.Subscribe(ctx, sluice.StreamID{Namespace: "orders"}, "c", sluice.FromBeginning())
	if err != nil || whole.ID != "ns/orders/c" || whole.Partition != -1 {
		t.Fatalf("Subscribe to a namespace = %+v, %v", whole, err)
	}
	_, err = c.Subscribe(ctx, sluice.StreamID{Namespace: "orders"}, "c", sluice.FromNow())
	wantErr(t, "Subscribe to a namespace twice", err, sluice.ErrEntityExists)
	_, err = c.Subscribe(ctx, sluice.StreamID{Namespace: "orders"}, "d", sluice.FromPosition(3))
	wantErr(t, "Subscribe to a namespace from a position", err, sluice.ErrInvalidArgument)
	if err := c.Unsubscribe(ctx, whole.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetStreamSubscription(ctx, "missing")
	wantErr(t, "GetStreamSubscription of a missing one", err, sluice.ErrSubscriptionNotFound)
	wantErr(t, "Tail of a bad namespace", c.TailStream(ctx, "a b", "", func(*sluice.StreamEvent) error { return nil }, nil), sluice.ErrInvalidName)
	wantErr(t, "Tail of a bad key", c.TailStream(ctx, "orders", strings.Repeat("k", 2000), func(*sluice.StreamEvent) error { return nil }, nil),
		sluice.ErrInvalidName)

	for _, tc := range []struct {
		what, procedure, body string
		status                int
		code, reason, message string
	}{
		{"unknown field", "StreamService/Publish", `{"stream":{"namespace":"orders","key":"k"},"events":[{"body":"eA=="}],"evnts":1}`,
			http.StatusBadRequest, "invalid_argument", "", "evnts"},
		{"malformed JSON", "StreamService/Publish", `{"stream":`, http.StatusBadRequest, "invalid_argument", "", ""},
		{"an empty key", "StreamService/Publish", `{"stream":{"namespace":"orders"},"events":[{"body":"eA=="}]}`,
			http.StatusBadRequest, "invalid_argument", "INVALID_NAME", "key"},
		{"too many parked events", "StreamService/ListParkedEvents", `{"subscription":"ns/orders/c","max":5000}`,
			http.StatusNotFound, "not_found", "SUBSCRIPTION_NOT_FOUND", ""},
		{"an ack of nothing", "StreamService/Ack", `{}`, http.StatusBadRequest, "invalid_argument", "INVALID_ARGUMENT", "delivery ids"},
		{"a nack of an unknown delivery", "StreamService/Nack", `{"deliveryId":"00ff"}`, http.StatusNotFound, "not_found", "DELIVERY_NOT_FOUND", ""},
		{"a nack with a huge error", "StreamService/Nack", `{"deliveryId":"00ff","error":"` + strings.Repeat("x", 5000) + `"}`,
			http.StatusBadRequest, "invalid_argument", "INVALID_ARGUMENT", "at most"},
		{"a replay without a consumer", "StreamService/ReplayParkedEvents", `{"subscription":"missing"}`,
			http.StatusNotFound, "not_found", "SUBSCRIPTION_NOT_FOUND", ""},
		{"negative retention", "StreamService/SetStreamRetention", `{"namespace":"orders","maxBytes":"-1"}`,
			http.StatusBadRequest, "invalid_argument", "INVALID_ARGUMENT", "negative"},
	} {
		status, ce := post(t, e, tc.procedure, "", tc.body)
		wantStatus(t, tc.what, status, ce, tc.status, tc.code, tc.reason, tc.message)
	}
	if res, err := e.Lib.ClusterStatus(ctx); err != nil || slices.ContainsFunc(res.Partitions, func(p sluice.PartitionStatus) bool { return p.Head != 0 }) {
		t.Fatalf("partitions after the refused publishes: %+v, %v", res.Partitions, err)
	}
	// Acks report the deliveries they do not know.
	status, ce := post(t, e, "StreamService/Ack", "", `{"deliveryIds":["00ff"]}`)
	wantStatus(t, "an ack of an unknown delivery", status, ce, http.StatusOK, "", "", "")

	// Consume options out of range, on a real parked subscription.
	sub, err := c.Subscribe(ctx, sluice.StreamID{Namespace: "orders", Key: "k"}, "c", sluice.FromNow())
	if err != nil {
		t.Fatal(err)
	}
	status, ce = post(t, e, "StreamService/ListParkedEvents", "", `{"subscription":"`+sub.ID+`","max":5000}`)
	wantStatus(t, "too many parked events", status, ce, http.StatusBadRequest, "invalid_argument", "INVALID_ARGUMENT", "max 5000")
	status, ce = post(t, e, "StreamService/ReplayParkedEvents", "", `{"subscription":"`+sub.ID+`"}`)
	wantStatus(t, "a replay without a consume stream", status, ce, http.StatusBadRequest, "failed_precondition", "NO_CONSUMER", "no Consume stream")
	for _, tc := range []struct {
		what string
		opts sluice.ConsumerOptions
		want error
	}{
		{"an ack timeout of two hours", sluice.ConsumerOptions{DeliveryTimeout: 2 * time.Hour}, sluice.ErrInvalidArgument},
		{"a million attempts", sluice.ConsumerOptions{MaxAttempts: 1e6}, sluice.ErrInvalidArgument},
		{"a bad namespace", sluice.ConsumerOptions{Namespace: "a b"}, sluice.ErrInvalidName},
	} {
		p := c.NewStreamProcessor(nil)
		p.Handle("c", func(context.Context, *sluice.StreamEvent) error { return nil }, &tc.opts)
		wantErr(t, "Consume with "+tc.what, p.Start(ctx), tc.want)
		if err := p.Stop(ctx); err != nil { // after a failed Start: nothing to stop, and no panic
			t.Fatalf("Stop after a failed Start: %v", err)
		}
	}
	// One consumer more than the server runs at once is refused.
	small := start(t, "sqlite", server.Config{StreamNodes: streamNodes, MaxConsumers: 1})
	sc := small.Remote(t, nil)
	startRemote(t, sc, "", func(p *client.StreamProcessor) {
		p.Handle("one", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	})
	two := sc.NewStreamProcessor(nil)
	two.Handle("two", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	if err := two.Start(ctx); connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "at most 1") {
		t.Fatalf("a second consumer on a server that runs one: %v, want RESOURCE_EXHAUSTED", err)
	}
	p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{Group: "bad group"})
	p.Handle("c", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	wantErr(t, "Consume in a bad group", p.Start(ctx), sluice.ErrInvalidName)
}

func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("%s: got %v, want PERMISSION_DENIED", what, err)
	}
}

// Stream calls need their permissions: a producer's key publishes but
// cannot consume or settle; a consumer's key consumes its own consumer
// only.
func TestStreamsAPIPermissions(t *testing.T) {
	const admin, producer, consumer = "admin-token-0123456789", "producer-token-0123456789", "consumer-token-0123456789"
	e := start(t, "sqlite", server.Config{StreamNodes: streamNodes, Keys: []server.Key{
		{Name: "admin", Token: admin, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
		{Name: "producer", Token: producer, Grants: []server.Grant{{Actions: server.Send, Entities: []string{"orders"}}}},
		{Name: "consumer", Token: consumer, Grants: []server.Grant{{Actions: server.Receive, Entities: []string{"billing", "orders"}}}},
	}})
	ctx := t.Context()
	prod := e.Remote(t, &client.Options{Token: producer})
	cons := e.Remote(t, &client.Options{Token: consumer})
	if _, err := prod.Publish(ctx, sluice.StreamID{Namespace: "orders", Key: "k"}, sluice.Event{Body: []byte("x")}); err != nil {
		t.Fatalf("the producer's Publish: %v", err)
	}
	_, err := prod.Publish(ctx, sluice.StreamID{Namespace: "users", Key: "k"}, sluice.Event{Body: []byte("x")})
	wantDenied(t, "the producer's Publish to users", err)
	_, err = cons.Publish(ctx, sluice.StreamID{Namespace: "orders", Key: "k"}, sluice.Event{Body: []byte("x")})
	wantDenied(t, "the consumer's Publish", err)
	wantDenied(t, "the producer's Tail", prod.TailStream(ctx, "orders", "", func(*sluice.StreamEvent) error { return nil }, nil))
	p := prod.NewStreamProcessor(nil)
	p.Handle("billing", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	wantDenied(t, "the producer's Consume", p.Start(ctx))
	p = cons.NewStreamProcessor(nil)
	p.Handle("audit", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	wantDenied(t, "the consumer's Consume of audit", p.Start(ctx))

	// The consumer's deliveries cannot be settled with the producer's
	// key: a raw Consume stream shows the delivery's id.
	raw := sluicev1connect.NewStreamServiceClient(connect.NewClient(connecthttp.NewTransport(http.DefaultClient, e.URL)))
	cctx, info := connect.NewClientContext(ctx)
	info.RequestHeader().Set("Authorization", "Bearer "+consumer)
	cctx, stopConsume := context.WithCancel(cctx)
	defer stopConsume()
	stream, err := raw.Consume(cctx, &sluicev1.ConsumeRequest{Consumer: "billing", Namespace: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := stream.Receive(); err != nil || msg.GetStarted() == nil {
		t.Fatalf("Consume's first message: %v, %v", msg, err)
	}
	if _, err := prod.Publish(ctx, sluice.StreamID{Namespace: "orders", Key: "k"}, sluice.Event{Body: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	var id string
	for id == "" {
		msg, err := stream.Receive()
		if err != nil {
			t.Fatalf("no delivery: %v", err)
		}
		id = msg.GetDelivery().GetDeliveryId()
	}
	status, ce := post(t, e, "StreamService/Ack", producer, `{"deliveryIds": ["`+id+`"]}`)
	wantStatus(t, "the producer's Ack", status, ce, http.StatusForbidden, "permission_denied", "", `"producer" may not receive anything`)
	status, ce = post(t, e, "StreamService/Nack", producer, `{"deliveryId": "`+id+`", "error": "no"}`)
	wantStatus(t, "the producer's Nack", status, ce, http.StatusForbidden, "permission_denied", "", `"producer" may not receive anything`)
	if status, ce := post(t, e, "StreamService/Ack", consumer, `{"deliveryIds": ["`+id+`"]}`); status != http.StatusOK {
		t.Fatalf("the consumer's Ack: %d %+v", status, ce)
	}
	sub, err := prod.GetStreamSubscription(ctx, "ns/orders/billing")
	wantDenied(t, "the producer's GetStreamSubscription", err)
	if sub, err = cons.GetStreamSubscription(ctx, "ns/orders/billing"); err != nil || sub.Consumer != "billing" {
		t.Fatalf("the consumer's GetStreamSubscription = %+v, %v", sub, err)
	}
	admins := e.Remote(t, &client.Options{Token: admin})
	if err := admins.SetStreamRetention(ctx, "orders", sluice.StreamRetention{MaxAge: time.Hour}); err != nil {
		t.Fatalf("the admin's SetStreamRetention: %v", err)
	}
	wantDenied(t, "the consumer's SetStreamRetention", cons.SetStreamRetention(ctx, "orders", sluice.StreamRetention{}))

	// Operators' calls need manage on the consumer.
	wantDenied(t, "the consumer's ClearFault", cons.ClearFault(ctx, "ns/orders/billing"))
	_, err = cons.NewStreamProcessor(nil).Replay(ctx, "ns/orders/billing", 10)
	wantDenied(t, "the consumer's Replay", err)
	if n, err := admins.NewStreamProcessor(nil).Replay(ctx, "ns/orders/billing", 10); n != 0 || err != nil {
		t.Fatalf("the admin's Replay of no parked events = %d, %v", n, err)
	}

	// A listing shows only the subscriptions of consumers the key may
	// receive for.
	sid := sluice.StreamID{Namespace: "orders", Key: "k"}
	if _, err := admins.Subscribe(ctx, sid, "audit", sluice.FromNow()); err != nil {
		t.Fatal(err)
	}
	listed := func(c *client.Client) []string {
		t.Helper()
		subs, err := c.StreamSubscriptions(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		var consumers []string
		for _, s := range subs {
			consumers = append(consumers, s.Consumer)
		}
		slices.Sort(consumers)
		return consumers
	}
	if got := listed(admins); !slices.Equal(got, []string{"audit", "billing"}) {
		t.Fatalf("the admin lists %v", got)
	}
	if got := listed(cons); !slices.Equal(got, []string{"billing"}) {
		t.Fatalf("the consumer lists %v, want only billing", got)
	}
	if err := admins.Unsubscribe(ctx, "ns/orders/billing"); err != nil {
		t.Fatalf("the admin's Unsubscribe: %v", err)
	}
}

// TestStreamsPerKey checks the bound on the Consume and Tail streams one
// key holds open: one more fails with RESOURCE_EXHAUSTED, and each that
// closes makes room.
func TestStreamsPerKey(t *testing.T) {
	const small, other = "small-token-0123456789", "other-token-0123456789"
	e := start(t, "sqlite", server.Config{StreamNodes: streamNodes, Keys: []server.Key{
		{Name: "small", Token: small, MaxStreams: 2, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
		{Name: "other", Token: other, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
	}})
	ctx := t.Context()
	c := e.Remote(t, &client.Options{Token: small})
	tailCtx, stopTail := context.WithCancel(ctx)
	tailed := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		tailed <- c.TailStream(tailCtx, "orders", "", func(*sluice.StreamEvent) error { return nil },
			&sluice.TailOptions{Started: func(int) { close(started) }})
	}()
	<-started
	startRemote(t, c, "", func(p *client.StreamProcessor) {
		p.Handle("billing", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	})
	// Two streams are open with the key: a third is refused.
	p := c.NewStreamProcessor(nil)
	p.Handle("audit", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	err := p.Start(ctx)
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("a third stream: %v, want RESOURCE_EXHAUSTED naming the bound", err)
	}
	err = c.TailStream(ctx, "orders", "", func(*sluice.StreamEvent) error { return nil }, nil)
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a third stream (a tail): %v, want RESOURCE_EXHAUSTED", err)
	}
	// Another key has its own bound.
	q := startRemote(t, e.Remote(t, &client.Options{Token: other}), "", func(p *client.StreamProcessor) {
		p.Handle("audit", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	})
	if err := q.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// A stream that closes gives its room back.
	stopTail()
	if err := <-tailed; !errors.Is(err, context.Canceled) {
		t.Fatalf("the tail ended with %v", err)
	}
	waitFor(t, "room for a stream", 10*time.Second, func() bool {
		p := c.NewStreamProcessor(nil)
		p.Handle("audit", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
		if err := p.Start(ctx); err != nil {
			return false
		}
		return p.Stop(ctx) == nil
	})
}

// A replay reports the event that failed again, with the count before
// it, and ends as soon as the consumer's last stream on the server
// closes, leaving the event in delivery parked as it was.
func TestReplayFailureAndStop(t *testing.T) {
	e := start(t, "sqlite", server.Config{StreamNodes: streamNodes})
	c := e.Remote(t, nil)
	ctx := t.Context()
	var mode atomic.Value // "fail", "replay" or "hang"
	mode.Store("fail")
	hung := make(chan struct{}, 1)
	p := startRemote(t, c, "", func(p *client.StreamProcessor) {
		p.Handle("ledger", func(ctx context.Context, ev *sluice.StreamEvent) error {
			switch mode.Load() {
			case "replay":
				if string(ev.Body) == "p1" {
					return nil
				}
				return errors.New("still broken")
			case "hang":
				hung <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}
			return errors.New("broken")
		}, &sluice.ConsumerOptions{Namespace: "books", MaxAttempts: 1, DeliveryTimeout: time.Minute})
	})
	if _, err := c.Publish(ctx, sluice.StreamID{Namespace: "books", Key: "b"},
		sluice.Event{Body: []byte("p1")}, sluice.Event{Body: []byte("p2")}, sluice.Event{Body: []byte("p3")}); err != nil {
		t.Fatal(err)
	}
	const sub = "ns/books/ledger"
	waitFor(t, "three parked events", 20*time.Second, func() bool {
		parked, err := c.ParkedEvents(ctx, sub, 10)
		return err == nil && len(parked) == 3
	})

	mode.Store("replay")
	n, err := p.Replay(ctx, sub, 10)
	if n != 1 || err == nil || !strings.Contains(err.Error(), "still broken") {
		t.Fatalf("Replay = %d, %v; want 1 and the error of the event that failed again", n, err)
	}
	parked, err := c.ParkedEvents(ctx, sub, 10)
	if err != nil || len(parked) != 2 || string(parked[0].Body) != "p2" || parked[0].Attempts != 2 || parked[0].Error != "still broken" {
		t.Fatalf("parked after the replay: %+v, %v; want p2 (2 attempts, its new error) and p3", parked, err)
	}

	mode.Store("hang")
	replayed := make(chan error, 1)
	go func() {
		_, err := p.Replay(ctx, sub, 10)
		replayed <- err
	}()
	<-hung
	stopCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	p.Stop(stopCtx) // the delivery is held past stopCtx: cut short
	select {
	case err := <-replayed:
		if err == nil || !strings.Contains(err.Error(), "Consume stream on this server closed") {
			t.Fatalf("the replay ended with %v, want it to say the consumer's streams closed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the replay still waits after the consumer stopped")
	}
	parked, err = c.ParkedEvents(ctx, sub, 10)
	if err != nil || len(parked) != 2 || parked[0].Attempts != 2 || parked[0].Error != "still broken" {
		t.Fatalf("parked after the replay was cut short: %+v, %v; want p2 as it was, and p3", parked, err)
	}
}

// Without keys, the server's own bound holds: one more Consume or Tail
// stream than MaxStreams fails with RESOURCE_EXHAUSTED.
func TestStreamsPerServer(t *testing.T) {
	e := start(t, "sqlite", server.Config{StreamNodes: streamNodes, MaxStreams: 1})
	c := e.Remote(t, nil)
	ctx := t.Context()
	tailCtx, stopTail := context.WithCancel(ctx)
	defer stopTail()
	started := make(chan struct{})
	go c.TailStream(tailCtx, "orders", "", func(*sluice.StreamEvent) error { return nil },
		&sluice.TailOptions{Started: func(int) { close(started) }})
	<-started
	p := c.NewStreamProcessor(nil)
	p.Handle("billing", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
	if err := p.Start(ctx); connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "at most 1 allowed") {
		t.Fatalf("a second stream on a server of one: %v, want RESOURCE_EXHAUSTED", err)
	}
}
