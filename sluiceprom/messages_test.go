package sluiceprom_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceprom"
)

// messageFamilies are the counters of what calls did to messages, and
// the wait histogram (its count).
var messageFamilies = []string{"sluice_messages_sent_total", "sluice_messages_received_total",
	"sluice_messages_settled_total", "sluice_lock_lost_total", "sluice_message_wait_seconds"}

// messageSeries gathers reg and returns the series of messageFamilies.
func messageSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	return seriesOf(t, reg, messageFamilies)
}

// seriesOf gathers reg and returns the series of the families named,
// each as `name{label="value",...}` (labels in Prometheus' order), with
// its value; a histogram's as name_count.
func seriesOf(t *testing.T, reg *prometheus.Registry, names []string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, f := range families {
		if !slices.Contains(names, f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			name, v := f.GetName(), m.GetCounter().GetValue()
			if h := m.GetHistogram(); h != nil {
				name, v = name+"_count", float64(h.GetSampleCount())
			}
			out[name+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// expected builds the series messageSeries should return.
type expected map[string]float64

// queue adds the series a queue or subscription starts with, at 0.
func (e expected) queue(entity string) {
	e.topic(entity)
	for _, mode := range []string{"peek_lock", "receive_and_delete"} {
		e[`sluice_messages_received_total{entity="`+entity+`",mode="`+mode+`"}`] = 0
	}
	for _, action := range []string{"complete", "abandon", "dead_letter", "defer"} {
		e[`sluice_messages_settled_total{action="`+action+`",entity="`+entity+`"}`] = 0
	}
	e[`sluice_lock_lost_total{entity="`+entity+`"}`] = 0
}

// topic adds the series a topic starts with, at 0.
func (e expected) topic(entity string) {
	e[`sluice_messages_sent_total{entity="`+entity+`"}`] = 0
}

func (e expected) sent(entity string, n float64) {
	e[`sluice_messages_sent_total{entity="`+entity+`"}`] += n
}

// received adds n received messages, and n waits.
func (e expected) received(entity, mode string, n float64) {
	e[`sluice_messages_received_total{entity="`+entity+`",mode="`+mode+`"}`] += n
	e[`sluice_message_wait_seconds_count{entity="`+entity+`"}`] += n
}

func (e expected) settled(entity, action string, n float64) {
	e[`sluice_messages_settled_total{action="`+action+`",entity="`+entity+`"}`] += n
}

func (e expected) lost(entity string, n float64) {
	e[`sluice_lock_lost_total{entity="`+entity+`"}`] += n
}

// check fails unless reg's message series are exactly e.
func (e expected) check(t *testing.T, what string, reg *prometheus.Registry) {
	t.Helper()
	got := messageSeries(t, reg)
	if maps.Equal(got, e) {
		return
	}
	keys := maps.Clone(got)
	maps.Copy(keys, e)
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		g, gok := got[k]
		w, wok := e[k]
		if g != w || gok != wok {
			diff = append(diff, k+": got "+value(g, gok)+", want "+value(w, wok))
		}
	}
	t.Fatalf("%s: the message series differ:\n%s", what, strings.Join(diff, "\n"))
}

func value(v float64, ok bool) string {
	if !ok {
		return "none"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// A program that embeds the library, with no server, counts what its
// calls do to messages as the server does: sends, receives in both
// modes, every settlement, lost locks, a batch complete, a processor's
// work; each entity's series there at 0 from the first collection, under
// its canonical name; a deleted entity's gone.
func TestCollectorCountsMessages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		_, err := c.CreateQueue(ctx, "Orders", nil)
		must(err)
		_, err = c.CreateTopic(ctx, "News", nil)
		must(err)
		_, err = c.CreateSubscription(ctx, "news", "All", nil)
		must(err)
		reg := prometheus.NewPedanticRegistry()
		m := sluiceprom.New(c, nil)
		defer m.Close()
		reg.MustRegister(m)
		const orders, news, all = "orders", "news", "news/Subscriptions/all"
		want := expected{}
		want.queue(orders)
		want.topic(news)
		want.queue(all)
		want.check(t, "at the start", reg)

		// Sends: a batch to a name spelled otherwise, a scheduled one, one
		// to a topic.
		snd, _ := c.NewSender("ORDERS")
		_, err = snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("1")}, {Body: []byte("2")}, {Body: []byte("3")},
			{Body: []byte("later"), ScheduledEnqueueTime: time.Now().Add(time.Hour)}})
		must(err)
		tsnd, _ := c.NewSender(news)
		_, err = tsnd.Send(ctx, &sluice.Message{Body: []byte("n")})
		must(err)
		want.sent(orders, 4)
		want.sent(news, 1)

		// Peek-lock: every action, and a lock lost on a settle and on a
		// renewal.
		r, _ := c.NewReceiver(orders, nil)
		ms, err := r.Receive(ctx, 3)
		if err != nil || len(ms) != 3 {
			t.Fatalf("Receive = %v, %v", ms, err)
		}
		must(r.Complete(ctx, ms[0]))
		if err := r.Complete(ctx, ms[0]); err == nil {
			t.Fatal("a second Complete succeeded")
		}
		if err := r.RenewLock(ctx, ms[0]); err == nil {
			t.Fatal("RenewLock of a completed message succeeded")
		}
		must(r.Abandon(ctx, ms[1], nil))
		must(r.DeadLetter(ctx, ms[2], &sluice.DeadLetterOptions{Reason: "broken"}))
		again, err := r.Receive(ctx, 1)
		if err != nil || len(again) != 1 {
			t.Fatalf("Receive = %v, %v", again, err)
		}
		must(r.Defer(ctx, again[0], nil))
		want.received(orders, "peek_lock", 4)
		want.settled(orders, "complete", 1)
		want.settled(orders, "abandon", 1)
		want.settled(orders, "dead_letter", 1)
		want.settled(orders, "defer", 1)
		want.lost(orders, 2)

		// Receive-and-delete, from the subscription.
		rd, _ := c.NewReceiver(sluice.SubscriptionPath("NEWS", "all"), &sluice.ReceiverOptions{Mode: sluice.ReceiveAndDelete})
		if got, err := rd.Receive(ctx, 1); err != nil || len(got) != 1 {
			t.Fatalf("Receive = %v, %v", got, err)
		}
		want.received(all, "receive_and_delete", 1)
		want.check(t, "after a send, receives and settlements", reg)

		// A batch complete with a lost lock: it counts what it completed.
		_, err = snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("4")}, {Body: []byte("5")}, {Body: []byte("6")}})
		must(err)
		ms, err = r.Receive(ctx, 3)
		if err != nil || len(ms) != 3 {
			t.Fatalf("Receive = %v, %v", ms, err)
		}
		must(r.Complete(ctx, ms[1]))
		if err := r.CompleteBatch(ctx, ms); err == nil {
			t.Fatal("a batch with a completed message completed")
		}
		want.sent(orders, 3)
		want.received(orders, "peek_lock", 3)
		want.settled(orders, "complete", 3)
		want.lost(orders, 1)
		want.check(t, "after a batch", reg)

		// A processor: it receives and completes.
		_, err = snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("7")}, {Body: []byte("8")}})
		must(err)
		handled := make(chan struct{}, 2)
		p, err := c.NewProcessor(orders, func(context.Context, *sluice.Receiver, *sluice.ReceivedMessage) error {
			handled <- struct{}{}
			return nil
		}, nil)
		must(err)
		must(p.Start(ctx))
		<-handled
		<-handled
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		must(p.Stop(stopCtx)) // the completes are counted once it returns
		want.sent(orders, 2)
		want.received(orders, "peek_lock", 2)
		want.settled(orders, "complete", 2)
		want.check(t, "after a processor", reg)

		problems, err := testutil.CollectAndLint(m)
		must(err)
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}

		// A deleted topic's series go, its subscription's with them.
		must(c.DeleteTopic(ctx, news))
		if dropped := m.ForgetEntity(news, sluice.SubscriptionPath(news, "")); len(dropped) != 2 {
			t.Errorf("ForgetEntity dropped %v, want the topic and its subscription", dropped)
		}
		for k := range want {
			if strings.Contains(k, `entity="news`) {
				delete(want, k)
			}
		}
		want.check(t, "after the topic's deletion", reg)
	})
}
