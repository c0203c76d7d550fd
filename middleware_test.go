package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/libtest"
	"github.com/sluicehq/sluice/sluicetest"
)

// trail records what middleware saw, in order, per delivery.
type trail struct {
	mu   sync.Mutex
	seen map[string][]string // message body -> steps
}

func newTrail() *trail { return &trail{seen: make(map[string][]string)} }

func (tr *trail) add(key, step string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.seen[key] = append(tr.seen[key], step)
}

func (tr *trail) get(key string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.seen[key])
}

// named returns a middleware that records its name before and after the
// handler it wraps.
func named(tr *trail, name string) sluice.Middleware {
	return func(next sluice.Handler) sluice.Handler {
		return func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			tr.add(string(m.Body), name+">")
			err := next(ctx, r, m)
			tr.add(string(m.Body), "<"+name)
			return err
		}
	}
}

// errorLog collects a processor's OnError errors.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

// find returns the first error that errors.As makes a T, or nil.
func findAs[T error](l *errorLog) T {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero T
	for _, err := range l.errs {
		var t T
		if errors.As(err, &t) {
			return t
		}
	}
	return zero
}

// Every delivery passes through the middleware, the first outermost; a
// panic in a middleware (not only in the handler) fails the delivery,
// as a *PanicError, and the message is delivered again.
func TestProcessorMiddleware(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, nil)
		const n = 6
		for i := range n {
			send(t, newSender(t, c, q), fmt.Sprint("m", i))
		}
		send(t, newSender(t, c, q), "boom")
		tr := newTrail()
		var errs errorLog
		panicky := func(next sluice.Handler) sluice.Handler {
			return func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
				if string(m.Body) == "boom" && m.DeliveryCount == 1 {
					panic("middleware bug")
				}
				return next(ctx, r, m)
			}
		}
		h := func(_ context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
			tr.add(string(m.Body), "handler")
			return nil
		}
		p := startProcessor(t, c, q, h, &sluice.ProcessorOptions{MaxConcurrent: 3, OnError: errs.add,
			Middleware: []sluice.Middleware{named(tr, "a"), panicky, named(tr, "b")}})
		defer stop(t, p)
		waitUntil(t, "every message handled", func() bool {
			for i := range n {
				if len(tr.get(fmt.Sprint("m", i))) != 5 {
					return false
				}
			}
			return len(tr.get("boom")) == 6
		})
		want := []string{"a>", "b>", "handler", "<b", "<a"}
		for i := range n {
			if got := tr.get(fmt.Sprint("m", i)); !slices.Equal(got, want) {
				t.Fatalf("message m%d went through %v, want %v", i, got, want)
			}
		}
		// The first delivery of boom panicked below a, which the panic
		// unwound (Recover is outermost); the second went all the way.
		if got, want := tr.get("boom"), []string{"a>", "a>", "b>", "handler", "<b", "<a"}; !slices.Equal(got, want) {
			t.Fatalf("boom went through %v, want %v", got, want)
		}
		pe := findAs[*sluice.PanicError](&errs)
		if pe == nil || pe.Value != "middleware bug" || !strings.Contains(string(pe.Stack), "panic") {
			t.Fatalf("OnError errors %v: want a *sluice.PanicError of the middleware's panic, with its stack", errs.errs)
		}
		waitUntil(t, "queue emptied", sluiceEmpty(t, c, q))
	})
}

// sluiceEmpty reports whether q holds no messages.
func sluiceEmpty(t *testing.T, c *sluice.Client, q string) func() bool {
	return func() bool {
		st, err := c.GetQueueStats(t.Context(), q)
		return err == nil && st.Active+st.InFlight == 0 && st.DeadLettered == 0
	}
}

// Recover placed inside a middleware lets it see a handler's panic as an
// error: the panic does not unwind through it.
func TestRecoverInsideMiddleware(t *testing.T) {
	var seen error
	observe := func(next sluice.Handler) sluice.Handler {
		return func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			seen = next(ctx, r, m)
			return seen
		}
	}
	h := observe(sluice.Recover()(func(context.Context, *sluice.Receiver, *sluice.ReceivedMessage) error {
		panic(errors.New("handler bug"))
	}))
	err := h(t.Context(), nil, &sluice.ReceivedMessage{})
	var pe *sluice.PanicError
	if !errors.As(seen, &pe) || err != seen || pe.Error() != "handler panicked: handler bug" {
		t.Fatalf("observer saw %v (returned %v), want the *PanicError of the handler's panic", seen, err)
	}
}

// Timeout ends the handler's context after d with cause
// ErrHandlerTimeout; the handler's error then wraps it, and a processor
// abandons the message, which is delivered again.
func TestTimeoutMiddleware(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "slow")
		var errs errorLog
		var mu sync.Mutex
		var deliveries []int
		h := func(ctx context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
			mu.Lock()
			deliveries = append(deliveries, m.DeliveryCount)
			mu.Unlock()
			if m.DeliveryCount > 1 {
				return nil
			}
			return libtest.AwaitHandlerTimeout(ctx)
		}
		p := startProcessor(t, c, q, h, &sluice.ProcessorOptions{OnError: errs.add,
			Middleware: []sluice.Middleware{sluice.Timeout(100 * time.Millisecond)}})
		defer stop(t, p)
		waitUntil(t, "the message completed on its second delivery", sluiceEmpty(t, c, q))
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(deliveries, []int{1, 2}) {
			t.Fatalf("deliveries %v, want [1 2]", deliveries)
		}
		errs.mu.Lock()
		defer errs.mu.Unlock()
		if len(errs.errs) != 1 || !errors.Is(errs.errs[0], sluice.ErrHandlerTimeout) || !errors.Is(errs.errs[0], context.DeadlineExceeded) {
			t.Fatalf("OnError errors %v, want one wrapping ErrHandlerTimeout and DeadlineExceeded", errs.errs)
		}
	})
}

// Timeout's edges, alike for TimeoutMessage and TimeoutStream: zero and
// negative durations end the context before the handler runs; a handler
// that returns in time keeps its error unwrapped; a maximal one never
// ends it.
func TestTimeoutEdges(t *testing.T) {
	forms := map[string]func(d time.Duration, h func(context.Context) error) error{
		"Timeout": func(d time.Duration, h func(context.Context) error) error {
			return sluice.Timeout(d)(func(ctx context.Context, _ *sluice.Receiver, _ *sluice.ReceivedMessage) error {
				return h(ctx)
			})(t.Context(), nil, &sluice.ReceivedMessage{})
		},
		"TimeoutMessage": func(d time.Duration, h func(context.Context) error) error {
			return sluice.TimeoutMessage(d)(func(ctx context.Context, _ sluice.MessageReceiver, _ *sluice.ReceivedMessage) error {
				return h(ctx)
			})(t.Context(), nil, &sluice.ReceivedMessage{})
		},
		"TimeoutStream": func(d time.Duration, h func(context.Context) error) error {
			return sluice.TimeoutStream(d)(func(ctx context.Context, _ *sluice.StreamEvent) error {
				return h(ctx)
			})(t.Context(), &sluice.StreamEvent{})
		},
	}
	waits := func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	for name, run := range forms {
		for _, d := range []time.Duration{0, -time.Second} {
			if err := run(d, waits); !errors.Is(err, sluice.ErrHandlerTimeout) {
				t.Fatalf("%s(%v): %v, want ErrHandlerTimeout at once", name, d, err)
			}
		}
		own := errors.New("own error")
		if err := run(time.Hour, func(context.Context) error { return own }); err != own {
			t.Fatalf("%s(1h) around a failing handler: %v, want its own error unchanged", name, err)
		}
		err := run(time.Duration(1<<63-1), func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); ctx.Err() != nil || !ok {
				return errors.New("a maximal timeout ended the context or set no deadline")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TimeoutStream ends a stream handler's context after d with cause
// ErrHandlerTimeout; the attempt's error then wraps it (as a middleware
// outside it sees), and the event is delivered again.
func TestTimeoutStreamMiddleware(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		var mu sync.Mutex
		var attempts []int
		var errs []error
		outer := func(next sluice.StreamHandler) sluice.StreamHandler {
			return func(ctx context.Context, ev *sluice.StreamEvent) error {
				err := next(ctx, ev)
				mu.Lock()
				defer mu.Unlock()
				attempts, errs = append(attempts, ev.Attempt), append(errs, err)
				return err
			}
		}
		h := func(ctx context.Context, ev *sluice.StreamEvent) error {
			if ev.Attempt > 1 {
				return nil
			}
			return libtest.AwaitHandlerTimeout(ctx)
		}
		startStreamProcessor(t, c, &sluice.StreamProcessorOptions{
			Middleware: []sluice.StreamMiddleware{outer, sluice.TimeoutStream(100 * time.Millisecond)},
		}, func(p *sluice.StreamProcessor) {
			if err := p.Handle("slow", h, &sluice.ConsumerOptions{Namespace: "slow", RetryBackoff: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		})
		publish(t, c, sluice.StreamID{Namespace: "slow", Key: "k"}, "slow")
		waitUntil(t, "the event handled on its second attempt", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(attempts) >= 2
		})
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(attempts, []int{1, 2}) || errs[1] != nil {
			t.Fatalf("attempts %v with errors %v, want [1 2], the second without error", attempts, errs)
		}
		if !errors.Is(errs[0], sluice.ErrHandlerTimeout) || !errors.Is(errs[0], context.DeadlineExceeded) {
			t.Fatalf("the first attempt's error %v, want one wrapping ErrHandlerTimeout and DeadlineExceeded", errs[0])
		}
	})
}

// Every delivery attempt of a stream consumer passes through the
// processor's middleware, the first outermost, and a panic below a
// middleware reaches it as a failed delivery, retried.
func TestStreamMiddleware(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		var mu sync.Mutex
		var steps []string
		record := func(name string) sluice.StreamMiddleware {
			return func(next sluice.StreamHandler) sluice.StreamHandler {
				return func(ctx context.Context, ev *sluice.StreamEvent) error {
					mu.Lock()
					steps = append(steps, fmt.Sprintf("%s>%s#%d", name, ev.Body, ev.Attempt))
					mu.Unlock()
					err := next(ctx, ev)
					mu.Lock()
					steps = append(steps, fmt.Sprintf("<%s:%v", name, err))
					mu.Unlock()
					return err
				}
			}
		}
		col := newCollector()
		h := func(ctx context.Context, ev *sluice.StreamEvent) error {
			if string(ev.Body) == "boom" && ev.Attempt == 1 {
				panic("handler bug")
			}
			return col.handle(ctx, ev)
		}
		startStreamProcessor(t, c, &sluice.StreamProcessorOptions{
			Middleware: []sluice.StreamMiddleware{record("a"), sluice.RecoverStream(), record("b")},
		}, func(p *sluice.StreamProcessor) {
			if err := p.Handle("mw", h, &sluice.ConsumerOptions{Namespace: "mw", RetryBackoff: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		})
		publish(t, c, sluice.StreamID{Namespace: "mw", Key: "k"}, "one", "boom")
		want := []string{
			"a>one#1", "b>one#1", "<b:<nil>", "<a:<nil>",
			// b is unwound by the panic; RecoverStream below a turns it
			// into the error a sees.
			"a>boom#1", "b>boom#1", "<a:handler panicked: handler bug",
			"a>boom#2", "b>boom#2", "<b:<nil>", "<a:<nil>",
		}
		waitUntil(t, "both events handled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(steps) >= len(want)
		})
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(steps, want) {
			t.Fatalf("middleware steps\n%v\nwant\n%v", steps, want)
		}
	})
}

// Logging logs a delivery that succeeded at debug level and one that
// failed at warning level with its error; a level the logger leaves out
// is not logged.
func TestLoggingMiddleware(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := &sluice.ReceivedMessage{Message: sluice.Message{MessageID: "order-1"}, SequenceNumber: 7, DeliveryCount: 2}
	c := sluicetest.Open(t, nil)
	r, err := c.NewReceiver("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, *sluice.Receiver, *sluice.ReceivedMessage) error { return nil }
	fail := func(context.Context, *sluice.Receiver, *sluice.ReceivedMessage) error { return errors.New("no pizza") }
	if err := sluice.Logging(log)(ok)(t.Context(), r, m); err != nil {
		t.Fatal(err)
	}
	if err := sluice.Logging(log)(fail)(t.Context(), r, m); err == nil || err.Error() != "no pizza" {
		t.Fatalf("Logging changed the handler's error to %v", err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=DEBUG") || strings.Contains(lines[0], "err=") ||
		!strings.Contains(lines[1], "level=WARN") || !strings.Contains(lines[1], `err="no pizza"`) {
		t.Fatalf("log:\n%s", buf.String())
	}
	for _, want := range []string{"entity=orders", "sequence_number=7", "message_id=order-1", "delivery_count=2", "took="} {
		if !strings.Contains(lines[0], want) {
			t.Fatalf("log line %q lacks %s", lines[0], want)
		}
	}
	buf.Reset()
	quiet := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sluice.Logging(quiet)(ok)(t.Context(), r, m)
	ev := &sluice.StreamEvent{Namespace: "clicks", Key: "u1", Subscription: "ns/clicks/c", Position: 3, Attempt: 1}
	sluice.LoggingStream(quiet)(func(context.Context, *sluice.StreamEvent) error { return errors.New("bad click") })(t.Context(), ev)
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "subscription=ns/clicks/c") ||
		!strings.Contains(lines[0], "position=3") || !strings.Contains(lines[0], `err="bad click"`) {
		t.Fatalf("log at info level:\n%s", buf.String())
	}
}

// A nil middleware, or one that returns a nil handler, is refused when
// the processor is made or the consumer registered, not at the first
// delivery.
func TestMiddlewareRefusesNil(t *testing.T) {
	c := sluicetest.Open(t, nil)
	h := func(context.Context, *sluice.Receiver, *sluice.ReceivedMessage) error { return nil }
	broken := func(sluice.Handler) sluice.Handler { return nil }
	for _, mws := range [][]sluice.Middleware{{nil}, {sluice.Recover(), broken}} {
		_, err := c.NewProcessor("orders", h, &sluice.ProcessorOptions{Middleware: mws})
		wantErr(t, fmt.Sprintf("NewProcessor with middleware %d of them", len(mws)), err, sluice.ErrInvalidArgument)
	}
	sh := func(context.Context, *sluice.StreamEvent) error { return nil }
	sbroken := func(sluice.StreamHandler) sluice.StreamHandler { return nil }
	for _, mws := range [][]sluice.StreamMiddleware{{nil}, {sbroken, sluice.RecoverStream()}} {
		p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{Middleware: mws})
		wantErr(t, "Handle with a broken middleware", p.Handle("c", sh, nil), sluice.ErrInvalidArgument)
	}
	if _, err := sluice.WrapStream(sh, nil); err != nil {
		t.Fatalf("WrapStream without middleware: %v", err)
	}
}
