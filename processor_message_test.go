package sluice_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
)

// namedMessage is named for a MessageHandler.
func namedMessage(tr *trail, name string) sluice.MessageMiddleware {
	return func(next sluice.MessageHandler) sluice.MessageHandler {
		return func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			tr.add(string(m.Body), name+">")
			err := next(ctx, r, m)
			tr.add(string(m.Body), "<"+name)
			return err
		}
	}
}

// foreign hides the library's receiver behind the interface, as a
// receiver of another kind (the network client's) is seen.
type foreign struct{ sluice.MessageReceiver }

// selfSettling is a handler that dead-letters "dead", completes "done"
// itself and returns nil for the others, counting its calls.
func selfSettling(handled *atomic.Int64) sluice.MessageHandler {
	return func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
		defer handled.Add(1)
		switch string(m.Body) {
		case "dead":
			return r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: "asked"})
		case "done":
			return r.Complete(ctx, m)
		}
		return nil
	}
}

// runToEnd sends bodies to a new queue, runs the processor newProc returns
// over it until every message was handled, and checks that one was
// dead-lettered, none is left and nothing was reported.
func runToEnd(t *testing.T, c *sluice.Client, bodies []string, newProc func(q string, h sluice.MessageHandler, onError func(error)) (*sluice.Processor, error)) {
	t.Helper()
	q := createQueue(t, c, nil)
	s := newSender(t, c, q)
	for _, b := range bodies {
		send(t, s, b)
	}
	var handled atomic.Int64
	var errs errorLog
	p, err := newProc(q, selfSettling(&handled), errs.add)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every message handled", func() bool { return handled.Load() == int64(len(bodies)) })
	stop(t, p)
	if st, err := c.GetQueueStats(t.Context(), q); err != nil || st.Active+st.InFlight != 0 || st.DeadLettered != 1 {
		t.Fatalf("stats: %+v, %v; want empty with one dead letter", st, err)
	}
	errs.mu.Lock()
	defer errs.mu.Unlock()
	if len(errs.errs) != 0 {
		t.Fatalf("errors reported: %v, want none (what the handler settled left alone)", errs.errs)
	}
}

// A MessageHandler runs on the library's receiver (Client.MessageProcessor,
// NewMessageProcessor) and on one the processor does not know: both leave
// alone what the handler settled through the receiver it was given.
func TestMessageProcessor(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		bodies := []string{"a", "dead", "done", "b"}
		t.Run("library", func(t *testing.T) {
			runToEnd(t, c, bodies, func(q string, h sluice.MessageHandler, onError func(error)) (*sluice.Processor, error) {
				return c.MessageProcessor(q, func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
					if _, ok := r.(*sluice.Receiver); !ok {
						t.Errorf("the handler was given a %T, want the library's *sluice.Receiver", r)
					}
					return h(ctx, r, m)
				}, &sluice.ProcessorOptions{MaxConcurrent: 2, OnError: onError})
			})
		})
		t.Run("foreign", func(t *testing.T) {
			runToEnd(t, c, bodies, func(q string, h sluice.MessageHandler, onError func(error)) (*sluice.Processor, error) {
				r := newReceiver(t, c, q, sluice.PeekLock)
				return sluice.NewMessageProcessor(foreign{r}, h, &sluice.ProcessorOptions{MaxConcurrent: 2, OnError: onError})
			})
		})
	})
}

// The library's Middleware wraps MessageMiddleware, both the first of
// their list outermost; a processor of a receiver other than the
// library's refuses Middleware, and NewMessageProcessor refuses a nil
// receiver or handler and a receiver in ReceiveAndDelete mode.
func TestMessageProcessorMiddleware(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "m")
		tr := newTrail()
		var handled atomic.Int64
		p := startProcessor(t, c, q, func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			tr.add(string(m.Body), "handler")
			handled.Add(1)
			return nil
		}, &sluice.ProcessorOptions{
			Middleware:        []sluice.Middleware{named(tr, "a"), named(tr, "b")},
			MessageMiddleware: []sluice.MessageMiddleware{namedMessage(tr, "x"), namedMessage(tr, "y")},
		})
		waitUntil(t, "the message handled", func() bool { return handled.Load() == 1 })
		stop(t, p)
		if got, want := tr.get("m"), []string{"a>", "b>", "x>", "y>", "handler", "<y", "<x", "<b", "<a"}; !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}

		h := func(context.Context, sluice.MessageReceiver, *sluice.ReceivedMessage) error { return nil }
		r := newReceiver(t, c, q, sluice.PeekLock)
		_, err := sluice.NewMessageProcessor(foreign{r}, h, &sluice.ProcessorOptions{Middleware: []sluice.Middleware{sluice.Recover()}})
		wantErr(t, "Middleware on a foreign receiver", err, sluice.ErrInvalidArgument)
		_, err = sluice.NewMessageProcessor(r, h, &sluice.ProcessorOptions{Middleware: []sluice.Middleware{sluice.Recover()}})
		if err != nil {
			t.Fatalf("Middleware on the library's receiver: %v", err)
		}
		_, err = sluice.NewMessageProcessor(nil, h, nil)
		wantErr(t, "nil receiver", err, sluice.ErrInvalidArgument)
		_, err = sluice.NewMessageProcessor(r, nil, nil)
		wantErr(t, "nil handler", err, sluice.ErrInvalidArgument)
		_, err = sluice.NewMessageProcessor(newReceiver(t, c, q, sluice.ReceiveAndDelete), h, nil)
		wantErr(t, "a ReceiveAndDelete receiver", err, sluice.ErrInvalidArgument)
		_, err = c.MessageProcessor(q, h, &sluice.ProcessorOptions{MessageMiddleware: []sluice.MessageMiddleware{func(sluice.MessageHandler) sluice.MessageHandler { return nil }}})
		wantErr(t, "a message middleware that returns nil", err, sluice.ErrInvalidArgument)
	})
}
