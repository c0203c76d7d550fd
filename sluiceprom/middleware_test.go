package sluiceprom_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceprom"
	"github.com/sluicehq/sluice/sluicetest"
)

// handlerFamilies are the handler middleware's series.
var handlerFamilies = []string{"sluice_messages_handled_total", "sluice_message_handler_seconds",
	"sluice_stream_events_handled_total", "sluice_stream_handler_seconds"}

// failFirst fails the first delivery of a body as the body says: "fail"
// with an error, "slow" by waiting for its context to end (a timeout
// inside), "boom" by panicking; any other body, and every later
// delivery, succeeds.
func failFirst(ctx context.Context, body string, first bool) error {
	if !first {
		return nil
	}
	switch body {
	case "fail":
		return errors.New("no pizza")
	case "slow":
		<-ctx.Done()
		return ctx.Err()
	case "boom":
		panic("handler bug")
	}
	return nil
}

// bodies are the messages and events of the tests: one of each result.
var bodies = []string{"ok", "fail", "slow", "boom"}

// waitSeries polls reg's handler series until they are want, for up to
// a minute.
func waitSeries(t *testing.T, reg *prometheus.Registry, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := seriesOf(t, reg, handlerFamilies)
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("handler series\n%v\nwant\n%v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A processor with the collector's MessageMiddleware, outside
// TimeoutMessage, counts each delivery by result (an error, a timeout, a
// panic that the processor recovers, and the redeliveries that
// succeed) and times each, on the registry the collector is on.
func TestMessageMiddleware(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		if _, err := c.CreateQueue(ctx, "Orders", nil); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		m := sluiceprom.New(c, nil)
		defer m.Close()
		reg.MustRegister(m)
		s, _ := c.NewSender("orders")
		for _, b := range bodies {
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte(b)}); err != nil {
				t.Fatal(err)
			}
		}
		p, err := c.MessageProcessor("ORDERS", func(ctx context.Context, _ sluice.MessageReceiver, msg *sluice.ReceivedMessage) error {
			return failFirst(ctx, string(msg.Body), msg.DeliveryCount == 1)
		}, &sluice.ProcessorOptions{MaxConcurrent: 4, Retry: sluice.ExponentialBackoff{Initial: time.Millisecond},
			MessageMiddleware: []sluice.MessageMiddleware{m.MessageMiddleware(), sluice.TimeoutMessage(100 * time.Millisecond)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := p.Stop(stopCtx); err != nil {
				t.Error(err)
			}
		}()
		waitSeries(t, reg, map[string]float64{
			`sluice_messages_handled_total{entity="orders",result="ok"}`:      4,
			`sluice_messages_handled_total{entity="orders",result="error"}`:   1,
			`sluice_messages_handled_total{entity="orders",result="timeout"}`: 1,
			`sluice_messages_handled_total{entity="orders",result="panic"}`:   1,
			`sluice_message_handler_seconds_count{entity="orders"}`:           7,
		})
		problems, err := testutil.CollectAndLint(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	})
}

// A stream processor with the collector's StreamMiddleware, outside
// TimeoutStream, counts each delivery attempt by namespace and result,
// and times each.
func TestStreamMiddleware(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		reg := prometheus.NewPedanticRegistry()
		m := sluiceprom.New(c, nil)
		defer m.Close()
		reg.MustRegister(m)
		p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{
			Middleware: []sluice.StreamMiddleware{m.StreamMiddleware(), sluice.TimeoutStream(100 * time.Millisecond)}})
		err := p.Handle("counter", func(ctx context.Context, ev *sluice.StreamEvent) error {
			return failFirst(ctx, string(ev.Body), ev.Attempt == 1)
		}, &sluice.ConsumerOptions{Namespace: "clicks", RetryBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p.Stop(stopCtx)
		}()
		for i, b := range bodies {
			if _, err := c.Publish(ctx, sluice.StreamID{Namespace: "clicks", Key: fmt.Sprint("user-", i)}, sluice.Event{Body: []byte(b)}); err != nil {
				t.Fatal(err)
			}
		}
		waitSeries(t, reg, map[string]float64{
			`sluice_stream_events_handled_total{namespace="clicks",result="ok"}`:      4,
			`sluice_stream_events_handled_total{namespace="clicks",result="error"}`:   1,
			`sluice_stream_events_handled_total{namespace="clicks",result="timeout"}`: 1,
			`sluice_stream_events_handled_total{namespace="clicks",result="panic"}`:   1,
			`sluice_stream_handler_seconds_count{namespace="clicks"}`:                 7,
		})
	})
}

// entityOnly is a MessageReceiver that names its entity and does
// nothing else.
type entityOnly struct {
	sluice.MessageReceiver
	name string
}

func (e entityOnly) Entity() string { return e.name }

// The results the processors' tests cannot show: a context that passed
// its deadline outside the middleware (a sluice.Timeout in Middleware,
// or a stream's DeliveryTimeout) is a timeout; a *PanicError from a
// Recover inside is a panic; a panic passing through goes on with its
// value. The series of a deleted entity go with ForgetEntity.
func TestMiddlewareResults(t *testing.T) {
	c := sluiceprom.New(sluicetest.Open(t, nil), nil)
	defer c.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	waits := func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	expired, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	r := entityOnly{name: "Orders"}
	mm := c.MessageMiddleware()
	if err := mm(func(ctx context.Context, _ sluice.MessageReceiver, _ *sluice.ReceivedMessage) error {
		return waits(ctx)
	})(expired, r, &sluice.ReceivedMessage{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the handler's error changed to %v", err)
	}
	recovered := sluice.RecoverMessage()(func(context.Context, sluice.MessageReceiver, *sluice.ReceivedMessage) error {
		panic("inside")
	})
	var pe *sluice.PanicError
	if err := mm(recovered)(t.Context(), r, &sluice.ReceivedMessage{}); !errors.As(err, &pe) {
		t.Fatalf("Recover inside: %v, want its *PanicError", err)
	}
	sm := c.StreamMiddleware()
	if err := sm(func(ctx context.Context, _ *sluice.StreamEvent) error { return waits(ctx) })(expired, &sluice.StreamEvent{Namespace: "clicks"}); err == nil {
		t.Fatal("a handler past its deadline succeeded")
	}
	func() {
		defer func() {
			if v := recover(); v != "through" {
				t.Errorf("the panic that went through the middleware: %v, want its own value", v)
			}
		}()
		sm(func(context.Context, *sluice.StreamEvent) error { panic("through") })(t.Context(), &sluice.StreamEvent{Namespace: "clicks"})
	}()
	want := map[string]float64{
		`sluice_messages_handled_total{entity="orders",result="timeout"}`:         1,
		`sluice_messages_handled_total{entity="orders",result="panic"}`:           1,
		`sluice_message_handler_seconds_count{entity="orders"}`:                   2,
		`sluice_stream_events_handled_total{namespace="clicks",result="timeout"}`: 1,
		`sluice_stream_events_handled_total{namespace="clicks",result="panic"}`:   1,
		`sluice_stream_handler_seconds_count{namespace="clicks"}`:                 2,
	}
	if got := seriesOf(t, reg, handlerFamilies); !maps.Equal(got, want) {
		t.Fatalf("handler series\n%v\nwant\n%v", got, want)
	}
	c.ForgetEntity("orders", "")
	maps.DeleteFunc(want, func(k string, _ float64) bool { return !strings.HasPrefix(k, "sluice_stream_") })
	if got := seriesOf(t, reg, handlerFamilies); !maps.Equal(got, want) {
		t.Fatalf("handler series after ForgetEntity\n%v\nwant\n%v", got, want)
	}
}
