package sluicetest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// recorder is a testing.TB whose Fatalf ends the goroutine and records
// the message, so that a test can check that a helper fails.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// failure runs f with a recorder and returns what it failed with ("" if
// it did not).
func failure(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return strings.Join(r.failed, "; ")
}

// The code under test: a checkout that sends an order, and a processor
// that ships orders and dead-letters those it cannot.
func checkout(ctx context.Context, c *sluice.Client, item string) error {
	s, err := c.NewSender("orders")
	if err != nil {
		return err
	}
	_, err = s.Send(ctx, &sluice.Message{Body: []byte(item), Subject: "placed", ApplicationProperties: map[string]string{"item": item}})
	return err
}

func TestHelpers(t *testing.T) {
	c := sluicetest.Open(t, nil)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	for _, item := range []string{"pizza", "anvil", "pasta"} {
		if err := checkout(ctx, c, item); err != nil {
			t.Fatal(err)
		}
	}
	got := sluicetest.RequireSent(t, c, "orders", sluice.MessageFilter{Properties: map[string]string{"item": "anvil"}})
	if len(got) != 1 || string(got[0].Body) != "anvil" {
		t.Fatalf("RequireSent found %v", got)
	}
	sluicetest.RequireNotSent(t, c, "orders", sluice.MessageFilter{Properties: map[string]string{"item": "piano"}})
	if msg := failure(t, func(tb testing.TB) {
		sluicetest.RequireSent(tb, c, "orders", sluice.MessageFilter{Subject: "cancelled", Properties: map[string]string{"item": "x"}})
	}); msg != "sluicetest: no message of orders matches subject cancelled, property item=x" {
		t.Errorf("RequireSent of nothing failed with %q", msg)
	}
	if msg := failure(t, func(tb testing.TB) {
		sluicetest.RequireNotSent(tb, c, "orders", sluice.MessageFilter{Subject: "placed"})
	}); msg != "sluicetest: 3 message(s) of orders match subject placed, the first #1" {
		t.Errorf("RequireNotSent of three failed with %q", msg)
	}

	var mu sync.Mutex
	var shipped []string
	p, err := c.NewProcessor("orders", func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
		if string(m.Body) == "anvil" {
			return r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: "TooHeavy"})
		}
		mu.Lock()
		defer mu.Unlock()
		shipped = append(shipped, string(m.Body))
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sluicetest.RunUntil(t, p, 0, sluicetest.Empty(t, c, "orders"))
	mu.Lock()
	if len(shipped) != 2 {
		t.Errorf("shipped %v", shipped)
	}
	mu.Unlock()
	reason := "TooHeavy"
	dead := sluicetest.RequireDeadLettered(t, c, "orders", sluice.MessageFilter{DeadLetterReason: &reason})
	if len(dead) != 1 || string(dead[0].Body) != "anvil" {
		t.Errorf("RequireDeadLettered found %v", dead)
	}
	other := "Lost"
	if msg := failure(t, func(tb testing.TB) {
		sluicetest.RequireDeadLettered(tb, c, "orders", sluice.MessageFilter{DeadLetterReason: &other})
	}); msg != "sluicetest: no dead letter of orders matches reason Lost" {
		t.Errorf("RequireDeadLettered of another reason failed with %q", msg)
	}
	sluicetest.RequireNotSent(t, c, "orders", sluice.MessageFilter{})
}

// RunUntil fails a condition that never holds, and a runner that does
// not start, and stops the runner either way.
func TestRunUntilFails(t *testing.T) {
	c := sluicetest.Open(t, nil)
	if _, err := c.CreateQueue(t.Context(), "q", nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProcessor("q", func(context.Context, *sluice.Receiver, *sluice.ReceivedMessage) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if msg := failure(t, func(tb testing.TB) {
		sluicetest.RunUntil(tb, p, 50*time.Millisecond, func() bool { return false })
	}); msg != "sluicetest: the condition did not hold within 50ms" {
		t.Errorf("RunUntil of a condition that never holds failed with %q", msg)
	}
	if msg := failure(t, func(tb testing.TB) {
		sluicetest.RunUntil(tb, broken{}, 0, func() bool { return true })
	}); msg != "sluicetest: start: no" {
		t.Errorf("RunUntil of a runner that does not start failed with %q", msg)
	}
	if msg := failure(t, func(tb testing.TB) { sluicetest.Empty(tb, c, "missing")() }); !strings.Contains(msg, "counts of missing") {
		t.Errorf("Empty of a missing queue failed with %q", msg)
	}
}

type broken struct{}

func (broken) Start(context.Context) error { return errors.New("no") }
func (broken) Stop(context.Context) error  { return nil }
