// Package sluicetest helps an application test its own code that uses
// sluice, as rivertest does for River: a client on a temporary SQLite
// file that goes with the test, a processor run until a condition
// holds, and assertions on what was sent and what was dead-lettered.
//
//	func TestCheckout(t *testing.T) {
//		c := sluicetest.Open(t)
//		// ... the code under test sends to "orders" ...
//		got := sluicetest.RequireSent(t, c, "orders", sluice.MessageFilter{Subject: "placed"})
//		...
//	}
//
// Every helper fails the test (tb.Fatalf) rather than returning an
// error, and waits on conditions, never a fixed sleep.
package sluicetest

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	// Open opens SQLite: the helpers link its backend.
	_ "github.com/sluicehq/sluice/store/sqlite"
)

// Open returns a client on a fresh SQLite file in the test's temporary
// directory, migrated; it is closed when the test ends. opts may be nil.
func Open(tb testing.TB, opts *sluice.Options) *sluice.Client {
	tb.Helper()
	c, err := sluice.Open(context.Background(), "sqlite://"+filepath.Join(tb.TempDir(), "sluice.db"), opts)
	if err != nil {
		tb.Fatalf("sluicetest: open: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// DefaultTimeout bounds RunUntil's wait when its options set none.
const DefaultTimeout = 30 * time.Second

// Runner is what RunUntil runs: a *sluice.Processor or a
// *sluice.StreamProcessor.
type Runner interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// RunUntil starts p, waits until cond holds (checked every 10 ms), and
// stops p; it fails the test if p does not start, if cond does not hold
// within timeout (0: DefaultTimeout), or if p does not stop. cond runs in
// the test's goroutine while p runs: it may read what the handlers
// record, under their lock.
func RunUntil(tb testing.TB, p Runner, timeout time.Duration, cond func() bool) {
	tb.Helper()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		tb.Fatalf("sluicetest: start: %v", err)
	}
	held := waitFor(timeout, cond)
	stopCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.Stop(stopCtx); err != nil {
		tb.Errorf("sluicetest: stop: %v", err)
	}
	if !held {
		tb.Fatalf("sluicetest: the condition did not hold within %v", timeout)
	}
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// Empty returns a condition for RunUntil: the entity (a queue or a
// subscription's path) holds no message that is active, locked,
// scheduled or expired (deferred messages and dead letters stay, as a
// processor leaves them). A failure to read the entity's counts fails
// the test.
func Empty(tb testing.TB, c *sluice.Client, entity string) func() bool {
	return func() bool {
		tb.Helper()
		st, err := c.GetQueueStats(context.Background(), entity)
		if err != nil {
			tb.Fatalf("sluicetest: counts of %s: %v", entity, err)
		}
		return st.Active+st.InFlight+st.Scheduled+st.Expired == 0
	}
}

// RequireSent fails the test unless the entity (a queue or a
// subscription's path) holds at least one message that matches f (the
// zero filter matches any), in any state but dead-lettered; it returns
// those that match, in sequence order, without locking or changing
// them.
func RequireSent(tb testing.TB, c *sluice.Client, entity string, f sluice.MessageFilter) []*sluice.ReceivedMessage {
	tb.Helper()
	got := find(tb, c, entity, sluice.SubQueueNone, f)
	if len(got) == 0 {
		tb.Fatalf("sluicetest: no message of %s matches %s", entity, describe(f))
	}
	return got
}

// RequireNotSent fails the test if the entity holds a message that
// matches f, in any state but dead-lettered.
func RequireNotSent(tb testing.TB, c *sluice.Client, entity string, f sluice.MessageFilter) {
	tb.Helper()
	if got := find(tb, c, entity, sluice.SubQueueNone, f); len(got) > 0 {
		tb.Fatalf("sluicetest: %d message(s) of %s match %s, the first #%d", len(got), entity, describe(f), got[0].SequenceNumber)
	}
}

// RequireDeadLettered fails the test unless the entity's dead-letter
// queue holds at least one message that matches f (set
// f.DeadLetterReason to require a reason; f.States must be empty); it
// returns those that match, in sequence order.
func RequireDeadLettered(tb testing.TB, c *sluice.Client, entity string, f sluice.MessageFilter) []*sluice.ReceivedMessage {
	tb.Helper()
	got := find(tb, c, entity, sluice.SubQueueDeadLetter, f)
	if len(got) == 0 {
		tb.Fatalf("sluicetest: no dead letter of %s matches %s", entity, describe(f))
	}
	return got
}

// maxFound bounds the messages find returns: a test's entity is small,
// and a larger one is most likely a test that forgot a filter.
const maxFound = 10000

// find searches an entity (or its dead-letter queue) for the messages
// that match f.
func find(tb testing.TB, c *sluice.Client, entity string, q sluice.SubQueue, f sluice.MessageFilter) []*sluice.ReceivedMessage {
	tb.Helper()
	r, err := c.NewReceiver(entity, &sluice.ReceiverOptions{SubQueue: q})
	if err != nil {
		tb.Fatalf("sluicetest: %s: %v", entity, err)
	}
	var out []*sluice.ReceivedMessage
	opts := &sluice.BrowseOptions{Filter: f}
	for len(out) < maxFound {
		page, err := r.Browse(context.Background(), sluice.MaxPeek, opts)
		if err != nil {
			tb.Fatalf("sluicetest: search of %s: %v", entity, err)
		}
		out = append(out, page.Messages...)
		if page.Next == 0 {
			break
		}
		opts.FromSequenceNumber = page.Next
	}
	return out
}

// describe says what a filter asks for, for a failure's message.
func describe(f sluice.MessageFilter) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	add("message id", f.MessageID)
	add("correlation id", f.CorrelationID)
	add("subject", f.Subject)
	add("session", f.SessionID)
	for _, k := range slices.Sorted(maps.Keys(f.Properties)) {
		parts = append(parts, "property "+k+"="+f.Properties[k])
	}
	for _, s := range f.States {
		parts = append(parts, "state "+s.String())
	}
	if f.DeadLetterReason != nil {
		parts = append(parts, "reason "+*f.DeadLetterReason)
	}
	if len(parts) == 0 {
		return "any message"
	}
	return strings.Join(parts, ", ")
}
