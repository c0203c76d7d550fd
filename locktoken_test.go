package sluice_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A message known by its lock token alone, as a server's client sends it
// back, settles like the received one: properties merge with the stored
// ones, dead letters complete and abandon, and a bad or stale token is
// refused with a typed error.
func TestSettleByLockToken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{MaxDeliveryCount: 5})
		s := newSender(t, c, q)
		for _, b := range []string{"one", "two", "three", "four"} {
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte(b), ApplicationProperties: map[string]string{"keep": b}}); err != nil {
				t.Fatal(err)
			}
		}
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 4)
		if len(ms) != 4 {
			t.Fatalf("received %v", bodies(ms))
		}
		for _, m := range ms {
			if len(m.LockToken) != 32 {
				t.Fatalf("lock token %q, want 32 hex digits", m.LockToken)
			}
		}
		other := newReceiver(t, c, q, sluice.PeekLock) // another receiver, as a server builds one per call
		byToken := func(m *sluice.ReceivedMessage) *sluice.ReceivedMessage {
			return &sluice.ReceivedMessage{LockToken: m.LockToken}
		}

		if err := other.RenewLock(ctx, byToken(ms[0])); err != nil {
			t.Fatalf("RenewLock by token: %v", err)
		}
		if err := other.Complete(ctx, byToken(ms[0])); err != nil {
			t.Fatalf("Complete by token: %v", err)
		}
		wantErr(t, "Complete by token twice", other.Complete(ctx, byToken(ms[0])), sluice.ErrLockLost)
		if err := other.Abandon(ctx, byToken(ms[1]), &sluice.AbandonOptions{PropertiesToModify: map[string]string{"n": "1"}}); err != nil {
			t.Fatalf("Abandon by token: %v", err)
		}
		if err := other.Defer(ctx, byToken(ms[2]), &sluice.DeferOptions{PropertiesToModify: map[string]string{"n": "2"}}); err != nil {
			t.Fatalf("Defer by token: %v", err)
		}
		if err := other.DeadLetter(ctx, byToken(ms[3]), &sluice.DeadLetterOptions{Reason: "r", PropertiesToModify: map[string]string{"n": "3"}}); err != nil {
			t.Fatalf("DeadLetter by token: %v", err)
		}
		again := receive(t, r, 1)
		if len(again) != 1 || string(again[0].Body) != "two" || !reflect.DeepEqual(again[0].ApplicationProperties, map[string]string{"keep": "two", "n": "1"}) {
			t.Fatalf("after abandoning by token: %v %v", bodies(again), again)
		}
		deferred, err := r.ReceiveDeferred(ctx, ms[2].SequenceNumber)
		if err != nil || !reflect.DeepEqual(deferred[0].ApplicationProperties, map[string]string{"keep": "three", "n": "2"}) {
			t.Fatalf("deferred by token: %v, %v", deferred, err)
		}

		dlq, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		dead := receive(t, dlq, 1)
		if dead[0].DeadLetterReason != "r" || !reflect.DeepEqual(dead[0].ApplicationProperties, map[string]string{"keep": "four", "n": "3"}) {
			t.Fatalf("dead-lettered by token: %+v", dead[0])
		}
		otherDLQ, _ := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		wantErr(t, "Defer of a dead letter by token", otherDLQ.Defer(ctx, byToken(dead[0]), nil), sluice.ErrInvalidArgument)
		if err := otherDLQ.Complete(ctx, byToken(dead[0])); err != nil {
			t.Fatalf("Complete of a dead letter by token: %v", err)
		}

		wantErr(t, "Complete with a malformed token", other.Complete(ctx, &sluice.ReceivedMessage{LockToken: "xyz"}), sluice.ErrInvalidArgument)
		wantErr(t, "Complete without a token", other.Complete(ctx, &sluice.ReceivedMessage{}), sluice.ErrInvalidArgument)
		wantErr(t, "Abandon by the token of a completed message", other.Abandon(ctx, byToken(ms[0]), &sluice.AbandonOptions{PropertiesToModify: map[string]string{"x": "y"}}), sluice.ErrLockLost)
		forged := again[0].LockToken[:16] + "0000000000000001"
		wantErr(t, "Complete with a forged token", other.Complete(ctx, &sluice.ReceivedMessage{LockToken: forged}), sluice.ErrLockLost)
		if err := r.Complete(ctx, again[0]); err != nil {
			t.Fatalf("Complete after a forged token: %v", err)
		}
	})
}

// A session locked by one receiver is resumed elsewhere by its lock
// token, until the lock is released.
func TestResumeSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
		s := newSender(t, c, q)
		for _, b := range []string{"a", "b"} {
			if _, err := s.Send(ctx, sessionMsg("s1", b)); err != nil {
				t.Fatal(err)
			}
		}
		held, err := c.AcceptSession(ctx, q, "s1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(held.LockToken()) != 16 {
			t.Fatalf("session lock token %q", held.LockToken())
		}
		resumed, err := c.ResumeSession(q, "s1", held.LockToken(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := resumed.Receive(ctx, 2)
		if err != nil || len(ms) != 2 {
			t.Fatalf("Receive on the resumed session: %v, %v", bodies(ms), err)
		}
		if err := held.Complete(ctx, ms[0]); err != nil {
			t.Fatalf("Complete, by the first receiver, of a message the resumed one received: %v", err)
		}
		if err := resumed.SetSessionState(ctx, []byte("st")); err != nil {
			t.Fatal(err)
		}
		if st, err := held.SessionState(ctx); err != nil || string(st) != "st" {
			t.Fatalf("state %q, %v", st, err)
		}
		if err := resumed.RenewSessionLock(ctx); err != nil || time.Until(resumed.LockedUntil()) < 10*time.Second {
			t.Fatalf("RenewSessionLock on the resumed session: %v, until %v", err, resumed.LockedUntil())
		}
		if err := resumed.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "Receive after the session was closed", held.Complete(ctx, ms[1]), sluice.ErrSessionLockLost)
		stale, err := c.ResumeSession(q, "s1", held.LockToken(), nil)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "SetSessionState with a released lock", stale.SetSessionState(ctx, nil), sluice.ErrSessionLockLost)
		_, err = c.ResumeSession(q, "s1", "not-hex", nil)
		wantErr(t, "ResumeSession with a malformed token", err, sluice.ErrInvalidArgument)
		_, err = c.ResumeSession(q, "", held.LockToken(), nil)
		wantErr(t, "ResumeSession without a session id", err, sluice.ErrInvalidArgument)
	})
}
