package cli

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// newProcessor returns a stream processor on w's database or server.
func newProcessor(t *testing.T, w where) sluice.StreamEventProcessor {
	t.Helper()
	switch w.flags[0] {
	case "--db":
		c, err := sluice.Open(t.Context(), w.flags[1], nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.NewStreamProcessor(&sluice.StreamProcessorOptions{HeartbeatInterval: 100 * time.Millisecond, FailureTimeout: time.Second})
	default:
		c, err := client.New(w.flags[1], nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.NewStreamProcessor(nil)
	}
}

// The stream subscription commands: subscribe, list, show, the parked
// events and the fault a failing consumer leaves, clear-fault and
// unsubscribe; on a database and through a server alike.
func TestStreamSubscriptionCommands(t *testing.T) {
	t.Parallel()
	both(t, testStreamSubscriptionCommands)
}

func testStreamSubscriptionCommands(t *testing.T, w where) {
	out := w.ok(t, "stream", "subscribe", "orders", "o-1", "audit", "--from", "beginning")
	wantContains(t, "subscribe", out, "ID", "CONSUMER", "audit", "orders/o-1")
	subs := jsonLines(t, w.ok(t, "stream", "subscribe", "orders", "o-1", "ledger", "--json"))
	if len(subs) != 1 || subs[0]["consumer"] != "ledger" || subs[0]["key"] != "o-1" || subs[0]["id"] == "" {
		t.Fatalf("subscribe --json: %v", subs)
	}
	ledger := subs[0]["id"].(string)
	subs = jsonLines(t, w.ok(t, "stream", "subscriptions", "orders", "o-1", "--json"))
	if len(subs) != 2 {
		t.Fatalf("subscriptions --json: %v, want audit's and ledger's", subs)
	}
	var audit string
	for _, s := range subs {
		if s["consumer"] == "audit" {
			audit = s["id"].(string)
		}
	}

	// audit parks what fails, ledger faults.
	var broken atomic.Bool
	broken.Store(true)
	fail := func(context.Context, *sluice.StreamEvent) error {
		if broken.Load() {
			return errors.New("ledger down")
		}
		return nil
	}
	p := newProcessor(t, w)
	p.Handle("audit", fail, &sluice.ConsumerOptions{MaxAttempts: 1})
	p.Handle("ledger", fail, &sluice.ConsumerOptions{MaxAttempts: 1, OnFailure: sluice.FaultOnFailure})
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Stop(ctx)
	})
	w.ok(t, "stream", "publish", "orders", "o-1", "placed")
	deadline := time.Now().Add(20 * time.Second)
	for {
		parked := jsonLines(t, w.ok(t, "stream", "parked", audit, "--json"))
		sub := jsonLines(t, w.ok(t, "stream", "subscription", ledger, "--json"))
		if len(parked) == 1 && sub[0]["fault"] != nil {
			if parked[0]["body"] != "placed" || parked[0]["attempts"] != 1.0 || parked[0]["error"] != "ledger down" || parked[0]["parkedAt"] == nil {
				t.Fatalf("parked --json: %v", parked)
			}
			if !strings.Contains(sub[0]["fault"].(string), "ledger down") || sub[0]["faultedAt"] == nil {
				t.Fatalf("subscription --json: %v", sub)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no parked event and fault after 20s: %v %v", parked, sub)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantContains(t, "parked", w.ok(t, "stream", "parked", audit), "orders/o-1", ": placed\n", "after 1 attempts: ledger down")
	wantContains(t, "subscription", w.ok(t, "stream", "subscription", ledger), "ledger", "ledger down")

	broken.Store(false)
	if out := w.ok(t, "stream", "clear-fault", ledger); out != "cleared "+ledger+"\n" {
		t.Fatalf("clear-fault printed %q", out)
	}
	deadline = time.Now().Add(20 * time.Second)
	for jsonLines(t, w.ok(t, "stream", "subscription", ledger, "--json"))[0]["fault"] != nil {
		if time.Now().After(deadline) {
			t.Fatal("the fault stays after clear-fault")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Reposition ledger to the head, then to a position: recorded, and
	// shown with the subscription.
	moved := jsonLines(t, w.ok(t, "stream", "reposition", ledger, "--to", "head", "--json"))
	if len(moved) != 1 || moved[0]["to"] != "head" || moved[0]["subscription"] != ledger || len(moved[0]["moves"].([]any)) != 1 {
		t.Fatalf("reposition --json: %v", moved)
	}
	// Position 2 follows the one event published: the stream's next one.
	wantContains(t, "reposition", w.ok(t, "stream", "reposition", ledger, "--to", "2"), "repositioned "+ledger+" to position", ": 1 -> 1")
	sub := jsonLines(t, w.ok(t, "stream", "subscription", ledger, "--json"))
	if last, _ := sub[0]["lastReposition"].(map[string]any); sub[0]["repositions"] != 2.0 || last == nil || last["to"] != "position" {
		t.Fatalf("subscription --json after two repositions: %v", sub)
	}
	wantContains(t, "subscription", w.ok(t, "stream", "subscription", ledger), "LAST REPOSITION", "to position")
	w.fails(t, ExitUsage, "--to", "stream", "reposition", ledger, "--to", "later")
	w.fails(t, ExitUsage, "--partition", "stream", "reposition", ledger, "--to", "head", "--partition", "3")
	w.fails(t, ExitError, "head", "stream", "reposition", ledger, "--to", "99")
	w.fails(t, ExitNotFound, "not found", "stream", "reposition", "no-such-subscription", "--to", "head")
	w.fails(t, ExitError, "", "stream", "stats", "nobody")
	if w.flags[0] != "--db" { // a server runs ledger's node
		wantContains(t, "stats", w.ok(t, "stream", "stats", "ledger"), "node ", "PROPOSED CHECKPOINT", "STORED CHECKPOINT",
			"WINDOWS", "RESIDENT", "SPLITS/MERGES", "REHYDRATED", "SUBSCRIPTION", ledger)
		// Through the server, ledger's subscription reads a window of the
		// cache of its partition.
		deadline = time.Now().Add(20 * time.Second)
		for !readsWindow(jsonLines(t, w.ok(t, "stream", "stats", "ledger", "--json")), ledger) {
			if time.Now().After(deadline) {
				t.Fatalf("stream stats --json: no window for %s: %s", ledger, w.ok(t, "stream", "stats", "ledger", "--json"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	if out := w.ok(t, "stream", "unsubscribe", audit, "--json"); !strings.Contains(out, `"deleted":"stream subscription"`) {
		t.Fatalf("unsubscribe --json printed %q", out)
	}
	w.fails(t, ExitNotFound, "not found", "stream", "subscription", audit)
	w.fails(t, ExitNotFound, "not found", "stream", "parked", audit)
	w.fails(t, ExitNotFound, "not found", "stream", "clear-fault", audit)
	w.fails(t, ExitUsage, "--from", "stream", "subscribe", "orders", "o-1", "audit", "--from", "later")
	w.fails(t, ExitUsage, "--max", "stream", "parked", ledger, "--max", "0")
	w.fails(t, ExitUsage, "", "stream", "subscriptions", "orders")
	w.fails(t, ExitError, "", "stream", "subscribe", "orders", "o-1", "bad consumer")
}

// readsWindow says whether stream stats --json shows subscription id
// reading one of its partition's windows.
func readsWindow(parts []map[string]any, id string) bool {
	for _, p := range parts {
		windows, _ := p["windows"].([]any)
		subs, _ := p["subscriptions"].([]any)
		for _, s := range subs {
			s, _ := s.(map[string]any)
			if w, ok := s["window"].(float64); ok && s["id"] == id && s["handled"] == true && int(w) < len(windows) {
				return true
			}
		}
	}
	return false
}
