package sluice_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// wantBatchFailures checks that err is a *SettleBatchError of total
// messages whose failures are at the given positions, each a lost lock.
func wantBatchFailures(t *testing.T, what string, err error, total int, want ...int) *sluice.SettleBatchError {
	t.Helper()
	var be *sluice.SettleBatchError
	if !errors.As(err, &be) {
		t.Fatalf("%s: got %v, want a *SettleBatchError", what, err)
	}
	wantErr(t, what, err, sluice.ErrLockLost)
	var got []int
	for _, f := range be.Failed {
		got = append(got, f.Index)
		wantErr(t, fmt.Sprintf("%s: failure #%d", what, f.Index), f.Err, sluice.ErrLockLost)
	}
	if be.Total != total || !slices.Equal(got, want) {
		t.Fatalf("%s: %d failed of %d at %v, want %v of %d", what, len(be.Failed), be.Total, got, want, total)
	}
	for _, f := range be.Failed {
		if f.Message == nil {
			t.Fatalf("%s: failure #%d names no message", what, f.Index)
		}
	}
	return be
}

// wantEmpty checks that a queue holds no message.
func wantEmpty(t *testing.T, c *sluice.Client, q string) {
	t.Helper()
	st, err := c.GetQueueStats(t.Context(), q)
	if err != nil || st.Active+st.InFlight+st.Deferred+st.Scheduled != 0 {
		t.Fatalf("queue %s: %+v, %v; want it empty", q, st, err)
	}
}

// CompleteBatch completes the messages whose locks hold, in one call, and
// reports each of the others (expired, received again, settled already)
// as a lost lock.
func TestCompleteBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: time.Second})
		s := newSender(t, c, q)
		r := newReceiver(t, c, q, sluice.PeekLock)

		send(t, s, "1", "2", "3", "4", "5")
		ms := receive(t, r, 5)
		if len(ms) != 5 {
			t.Fatalf("received %v", bodies(ms))
		}
		if err := r.CompleteBatch(ctx, ms); err != nil {
			t.Fatalf("CompleteBatch of 5 held messages: %v", err)
		}
		wantEmpty(t, c, q)
		wantErr(t, "Complete after CompleteBatch", r.Complete(ctx, ms[0]), sluice.ErrLockLost)
		if err := r.CompleteBatch(ctx, nil); err != nil {
			t.Fatalf("CompleteBatch of none: %v", err)
		}

		// An expired lock, the same message's new lock, and a message
		// settled already, among held ones.
		send(t, s, "a", "b", "c")
		old := receive(t, r, 1)[0]
		time.Sleep(1300 * time.Millisecond)
		ms = receive(t, r, 3)
		if !slices.Equal(bodies(ms), []string{"a", "b", "c"}) || ms[0].DeliveryCount != 2 {
			t.Fatalf("after the lock ended: received %v", bodies(ms))
		}
		if err := r.Complete(ctx, ms[2]); err != nil {
			t.Fatal(err)
		}
		batch := []*sluice.ReceivedMessage{ms[1], old, ms[2], ms[0]}
		err := r.CompleteBatch(ctx, batch)
		be := wantBatchFailures(t, "CompleteBatch with an expired and a settled lock", err, 4, 1, 2)
		if be.Failed[0].Message != old || be.Failed[1].Message != ms[2] {
			t.Fatalf("failures name %+v", be.Failed)
		}
		if msg := err.Error(); !strings.Contains(msg, "2 of 4 messages not settled") || !strings.Contains(msg, "lock lost") {
			t.Fatalf("the error says %q", msg)
		}
		wantEmpty(t, c, q)
	})
}

// Before it writes anything, CompleteBatch refuses with
// ErrInvalidArgument a batch beyond the limit, a lock given twice, and
// messages it cannot settle.
func TestCompleteBatchInvalid(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "1", "2")
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 2)
		if len(ms) != 2 {
			t.Fatalf("received %v", bodies(ms))
		}
		peeked, err := r.Peek(ctx, 1, &sluice.PeekOptions{FromSequenceNumber: 1})
		if err != nil {
			t.Fatal(err)
		}
		otherQueue := createQueue(t, c, nil)
		send(t, newSender(t, c, otherQueue), "elsewhere")
		foreign := receive(t, newReceiver(t, c, otherQueue, sluice.PeekLock), 1)[0]

		tooMany := slices.Clone(ms)
		for i := range 1000 - 1 {
			tooMany = append(tooMany, &sluice.ReceivedMessage{LockToken: fmt.Sprintf("%016x%016x", 1000+i, 1)})
		}
		for _, bad := range []struct {
			what  string
			batch []*sluice.ReceivedMessage
			say   string
		}{
			{"1,001 messages", tooMany, "at most 1000"},
			{"a message twice", []*sluice.ReceivedMessage{ms[0], ms[1], ms[0]}, "#0 and #2 hold the same lock"},
			{"a lock twice, once by its token", []*sluice.ReceivedMessage{ms[1], {LockToken: ms[1].LockToken}}, "same lock"},
			{"a nil message", []*sluice.ReceivedMessage{ms[0], nil}, "#1: nil message"},
			{"a peeked message", []*sluice.ReceivedMessage{ms[0], peeked[0]}, "holds no lock"},
			{"a malformed lock token", []*sluice.ReceivedMessage{ms[0], {LockToken: "nonsense"}}, "lock token"},
			{"a message of another queue", []*sluice.ReceivedMessage{ms[0], foreign}, "is from queue"},
		} {
			err := r.CompleteBatch(ctx, bad.batch)
			wantErr(t, "CompleteBatch of "+bad.what, err, sluice.ErrInvalidArgument)
			if !strings.Contains(err.Error(), bad.say) {
				t.Fatalf("CompleteBatch of %s: %q does not say %q", bad.what, err, bad.say)
			}
		}
		// Nothing was completed: every lock still holds.
		if err := r.CompleteBatch(ctx, ms); err != nil {
			t.Fatalf("CompleteBatch after the refused ones: %v", err)
		}
		wantEmpty(t, c, q)
	})
}

// CompleteBatch completes dead letters, and a session's messages under
// the session lock; once that lock has ended, each failure is a lost
// session lock.
func TestCompleteBatchDeadLettersAndSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		send(t, newSender(t, c, q), "1", "2")
		r := newReceiver(t, c, q, sluice.PeekLock)
		for _, m := range receive(t, r, 2) {
			if err := r.DeadLetter(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		dlq, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		dead := receive(t, dlq, 2)
		if len(dead) != 2 {
			t.Fatalf("dead letters received: %v", bodies(dead))
		}
		wantErr(t, "CompleteBatch of dead letters on the queue's receiver", r.CompleteBatch(ctx, dead), sluice.ErrInvalidArgument)
		if err := dlq.CompleteBatch(ctx, dead); err != nil {
			t.Fatalf("CompleteBatch of dead letters: %v", err)
		}
		if st, _ := c.GetQueueStats(ctx, q); st.DeadLettered != 0 {
			t.Fatalf("after CompleteBatch of the dead letters: %+v", st)
		}

		sq := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
		ss := newSender(t, c, sq)
		for _, b := range []string{"s1", "s2", "s3"} {
			if _, err := ss.Send(ctx, &sluice.Message{Body: []byte(b), SessionID: "s"}); err != nil {
				t.Fatal(err)
			}
		}
		sr, err := c.AcceptSession(ctx, sq, "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := sr.Receive(ctx, 3)
		if err != nil || len(ms) != 3 {
			t.Fatalf("session Receive = %v, %v", bodies(ms), err)
		}
		if err := sr.CompleteBatch(ctx, ms[:2]); err != nil {
			t.Fatalf("session CompleteBatch: %v", err)
		}
		if err := sr.Close(ctx); err != nil {
			t.Fatal(err)
		}
		err = sr.CompleteBatch(ctx, ms[2:])
		wantBatchFailures(t, "session CompleteBatch after Close", err, 1, 0)
		wantErr(t, "session CompleteBatch after Close", err, sluice.ErrSessionLockLost)
	})
}

// A SettleBatchError's text lists the first three failures.
func TestSettleBatchErrorText(t *testing.T) {
	be := &sluice.SettleBatchError{Op: "complete batch", Total: 6}
	for i := range 5 {
		be.Failed = append(be.Failed, sluice.SettleFailure{Index: i, Err: fmt.Errorf("message %d: %w", i+10, sluice.ErrLockLost)})
	}
	want := "sluice: complete batch: 5 of 6 messages not settled: #0: message 10: lock lost; #1: message 11: lock lost; " +
		"#2: message 12: lock lost; and 2 more"
	if got := be.Error(); got != want {
		t.Fatalf("Error() = %q\nwant      %q", got, want)
	}
	wantErr(t, "a SettleBatchError", be, sluice.ErrLockLost)
}
