package server_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

// wantMetrics scrapes e until every line of want is in /metrics (the
// database's figures are read at most every few seconds), and returns
// the body.
func wantMetrics(t *testing.T, e *env, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := scrape(t, e, "")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				missing = w
				break
			}
		}
		if missing == "" {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s after 30s:\n%s", missing, grepLines(body, "sluice_messages_dead_lettered_total"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sluice_messages_dead_lettered_total counts every cause, by reason,
// each entity's series there from the start; a restarted server starts
// them again at 0. The exposition passes promlint.
func TestMetricsCountEveryDeadLettering(t *testing.T) {
	file := filepath.Join(t.TempDir(), "metrics.db")
	open := func() *sluice.Client {
		c, err := sluice.Open(t.Context(), file, &sluice.Options{Logger: storetest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	lib := open()
	e := serve(t, lib, server.Config{})
	c := e.Remote(t, nil)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "work", &sluice.QueueProperties{MaxDeliveryCount: 1, LockDuration: time.Second,
		DeadLetterOnExpiry: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSubscription(ctx, "orders", "big", nil,
		sluice.Rule{Name: "big", Filter: sluice.SQLFilter{Expression: "quantity > 10"}}); err != nil {
		t.Fatal(err)
	}
	series := func(entity, reason string, n int) string {
		return `sluice_messages_dead_lettered_total{entity="` + entity + `",reason="` + reason + `"} ` + strconv.Itoa(n)
	}
	big := sluice.SubscriptionPath("orders", "big")
	wantMetrics(t, e, series("work", "MaxDeliveryCountExceeded", 0), series("work", "TTLExpiredException", 0),
		series(big, "FilterEvaluationException", 0), `sluice_messages_sent_total{entity="orders"} 0`,
		`sluice_messages_settled_total{action="complete",entity="work"} 0`)

	snd, _ := c.NewSender("work")
	if _, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("poison")}, {Body: []byte("abandoned")}, {Body: []byte("left")}}); err != nil {
		t.Fatal(err)
	}
	r, _ := c.NewReceiver("work", nil)
	ms, err := r.Receive(ctx, 3)
	if err != nil || len(ms) != 3 {
		t.Fatalf("Receive = %v, %v", ms, err)
	}
	// A receiver's reason, through the API.
	if err := r.DeadLetter(ctx, ms[0], &sluice.DeadLetterOptions{Reason: "Broken"}); err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, e, series("work", "Broken", 1))
	// An abandon of the last delivery.
	if err := r.Abandon(ctx, ms[1], nil); err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, e, series("work", "MaxDeliveryCountExceeded", 1))
	// Receives resolve what has ended: until want shows, receive (and
	// expect nothing).
	resolve := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(scrapeBody(t, e), want+"\n") {
			if time.Now().After(deadline) {
				t.Fatalf("/metrics lacks %s after 30s of receives", want)
			}
			if got, err := r.TryReceive(ctx, 1); err != nil || len(got) != 0 {
				t.Fatalf("TryReceive = %v, %v: want nothing", got, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// A lock that ended on the last delivery.
	resolve(series("work", "MaxDeliveryCountExceeded", 2))
	// A time-to-live run out, before anything received the message.
	if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("stale"), TimeToLive: time.Second}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	resolve(series("work", "TTLExpiredException", 1))
	// A filter that fails on a message.
	tsnd, _ := c.NewSender("orders")
	if _, err := tsnd.Send(ctx, &sluice.Message{Body: []byte("m"), ApplicationProperties: map[string]string{"quantity": "many"}}); err != nil {
		t.Fatal(err)
	}
	body := wantMetrics(t, e, series(big, "FilterEvaluationException", 1),
		`sluice_entity_dead_letters{entity="work",reason="MaxDeliveryCountExceeded"} 2`)
	lint(t, body)
	// However a caller spells a name, its series are the entity's.
	upper, _ := c.NewSender("WORK")
	if _, err := upper.Send(ctx, &sluice.Message{Body: []byte("loud")}); err != nil {
		t.Fatal(err)
	}
	if body := wantMetrics(t, e, `sluice_messages_sent_total{entity="work"} 5`); strings.Contains(body, `entity="WORK"`) {
		t.Errorf("a series labelled with a name as a caller spelled it:\n%s", grepLines(body, `entity="WORK"`))
	}

	// Restarted: the counters start again at 0, every entity's there.
	shutdown(t, e)
	lib.Close()
	again := open()
	t.Cleanup(func() { again.Close() })
	e = serve(t, again, server.Config{})
	body = wantMetrics(t, e, series("work", "MaxDeliveryCountExceeded", 0), series("work", "TTLExpiredException", 0),
		series(big, "FilterEvaluationException", 0), `sluice_entity_dead_letters{entity="work",reason="Broken"} 1`)
	lint(t, body)
}

func scrapeBody(t *testing.T, e *env) string {
	_, body := scrape(t, e, "")
	return body
}

func shutdown(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// lint fails on what promlint finds in an exposition.
func lint(t *testing.T, body string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// Stream lag is summed per consumer and namespace, labelled with the
// consumer's group; a consumer no processor serves shows 0 processors;
// per-subscription series appear only when the server is asked.
func TestMetricsStreamLag(t *testing.T) {
	for _, perSubscription := range []bool{false, true} {
		t.Run(strconv.FormatBool(perSubscription), func(t *testing.T) {
			e := start(t, "sqlite", server.Config{SubscriptionLagMetrics: perSubscription})
			ctx := t.Context()
			sub, err := e.Lib.Subscribe(ctx, sluice.StreamID{Namespace: "shop", Key: "cart-7"}, "audit", sluice.FromBeginning())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Lib.Publish(ctx, sluice.StreamID{Namespace: "shop", Key: "cart-7"},
				sluice.Event{Body: []byte("a")}, sluice.Event{Body: []byte("b")}, sluice.Event{Body: []byte("c")}); err != nil {
				t.Fatal(err)
			}
			body := wantMetrics(t, e, `sluice_stream_consumer_lag{consumer="audit",group="default",namespace="shop"} 3`,
				`sluice_stream_consumer_processors{consumer="audit",group="default"} 0`)
			perSub := `sluice_stream_subscription_lag{consumer="audit",namespace="shop",partition="` +
				strconv.Itoa(int(sluice.PartitionOf(sluice.StreamID{Namespace: "shop", Key: "cart-7"}, 16))) +
				`",subscription="` + sub.ID + `"} 3`
			if got := strings.Contains(body, perSub+"\n"); got != perSubscription {
				t.Errorf("SubscriptionLagMetrics %v: the per-subscription series is there: %v\n%s", perSubscription, got,
					grepLines(body, "sluice_stream_"))
			}
			lint(t, body)
			if perSubscription {
				return
			}
			// Served, it catches up.
			p := e.Lib.NewStreamProcessor(&sluice.StreamProcessorOptions{HeartbeatInterval: 100 * time.Millisecond,
				ProgressInterval: 100 * time.Millisecond})
			p.Handle("audit", func(context.Context, *sluice.StreamEvent) error { return nil }, nil)
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer p.Stop(context.WithoutCancel(ctx))
			wantMetrics(t, e, `sluice_stream_consumer_lag{consumer="audit",group="default",namespace="shop"} 0`,
				`sluice_stream_consumer_processors{consumer="audit",group="default"} 1`)
		})
	}
}
