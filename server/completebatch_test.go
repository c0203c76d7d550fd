package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// failedIndexes returns the positions a *SettleBatchError lists, each a
// lost lock.
func failedIndexes(t *testing.T, what string, err error) []int {
	t.Helper()
	var be *sluice.SettleBatchError
	if !errors.As(err, &be) {
		t.Fatalf("%s: got %v, want a *SettleBatchError", what, err)
	}
	wantErr(t, what, err, sluice.ErrLockLost)
	var out []int
	for _, f := range be.Failed {
		out = append(out, f.Index)
	}
	return out
}

// CompleteBatch through the API, over every protocol: the held messages
// are completed, and an expired or settled lock among them comes back as
// a lost lock of the library's *SettleBatchError; sessions and dead
// letters too.
func TestCompleteBatchAPI(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		ctx := t.Context()
		for _, opts := range []*client.Options{nil, {JSON: true}, {GRPC: true}} {
			c := e.Remote(t, opts)
			name := "q-" + randHex(3)
			if _, err := c.CreateQueue(ctx, name, nil); err != nil {
				t.Fatal(err)
			}
			snd, _ := c.NewSender(name)
			if _, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("1")}, {Body: []byte("2")}, {Body: []byte("3")}}); err != nil {
				t.Fatal(err)
			}
			r, _ := c.NewReceiver(name, nil)
			ms, err := r.Receive(ctx, 3)
			if err != nil || len(ms) != 3 {
				t.Fatalf("%s: Receive = %d, %v", protocol(opts), len(ms), err)
			}
			if err := r.CompleteBatch(ctx, ms); err != nil {
				t.Fatalf("%s: CompleteBatch: %v", protocol(opts), err)
			}
			if st, _ := e.Lib.GetQueueStats(ctx, name); st.Active+st.InFlight != 0 {
				t.Fatalf("%s: after CompleteBatch: %+v", protocol(opts), st)
			}
			err = r.CompleteBatch(ctx, ms)
			if got := failedIndexes(t, "CompleteBatch twice over "+protocol(opts), err); !slices.Equal(got, []int{0, 1, 2}) {
				t.Fatalf("%s: CompleteBatch twice failed %v", protocol(opts), got)
			}
		}

		c := e.Remote(t, nil)
		if _, err := c.CreateQueue(ctx, "short", &sluice.QueueProperties{LockDuration: time.Second}); err != nil {
			t.Fatal(err)
		}
		snd, _ := c.NewSender("short")
		if _, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}); err != nil {
			t.Fatal(err)
		}
		r, _ := c.NewReceiver("short", nil)
		old, err := r.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1300 * time.Millisecond)
		ms, err := r.Receive(ctx, 3)
		if err != nil || len(ms) != 3 || ms[0].SequenceNumber != old[0].SequenceNumber {
			t.Fatalf("Receive after the lock ended = %d, %v", len(ms), err)
		}
		if err := r.Complete(ctx, ms[2]); err != nil {
			t.Fatal(err)
		}
		batch := []*sluice.ReceivedMessage{ms[1], old[0], ms[2], ms[0]}
		err = r.CompleteBatch(ctx, batch)
		if got := failedIndexes(t, "CompleteBatch with an expired and a settled lock", err); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("CompleteBatch with an expired and a settled lock failed %v", got)
		}
		var be *sluice.SettleBatchError
		errors.As(err, &be)
		if be.Total != 4 || be.Failed[0].Message != old[0] || be.Failed[1].Message != ms[2] || !strings.Contains(be.Failed[0].Err.Error(), "lock lost") {
			t.Fatalf("the batch error: %+v", be)
		}
		if st, _ := e.Lib.GetQueueStats(ctx, "short"); st.Active+st.InFlight != 0 {
			t.Fatalf("after CompleteBatch with lost locks: %+v", st)
		}

		// Dead letters, and a session's messages under its lock.
		if _, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("d1")}, {Body: []byte("d2")}}); err != nil {
			t.Fatal(err)
		}
		for _, m := range receiveN(t, r, 2) {
			if err := r.DeadLetter(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		dlq, _ := c.NewReceiver("short", &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		if err := dlq.CompleteBatch(ctx, receiveN(t, dlq, 2)); err != nil {
			t.Fatalf("CompleteBatch of dead letters: %v", err)
		}
		if st, _ := e.Lib.GetQueueStats(ctx, "short"); st.DeadLettered != 0 {
			t.Fatalf("after CompleteBatch of the dead letters: %+v", st)
		}
		if _, err := c.CreateQueue(ctx, "sess", &sluice.QueueProperties{RequiresSession: true}); err != nil {
			t.Fatal(err)
		}
		ss, _ := c.NewSender("sess")
		if _, err := ss.SendBatch(ctx, []*sluice.Message{{Body: []byte("s1"), SessionID: "s"}, {Body: []byte("s2"), SessionID: "s"}}); err != nil {
			t.Fatal(err)
		}
		s, err := c.AcceptSession(ctx, "sess", "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		sm, err := s.Receive(ctx, 2)
		if err != nil || len(sm) != 2 {
			t.Fatalf("session Receive = %d, %v", len(sm), err)
		}
		if err := s.CompleteBatch(ctx, sm[:1]); err != nil {
			t.Fatalf("session CompleteBatch: %v", err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		err = s.CompleteBatch(ctx, sm[1:])
		wantErr(t, "session CompleteBatch after Close", err, sluice.ErrSessionLockLost)
		if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Message != sm[1] {
			t.Fatalf("session CompleteBatch after Close: %v", err)
		}
	})
}

// receiveN receives n messages within 10 s.
func receiveN(t *testing.T, r interface {
	Receive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error)
}, n int) []*sluice.ReceivedMessage {
	t.Helper()
	ms, err := r.Receive(t.Context(), n)
	if err != nil || len(ms) != n {
		t.Fatalf("Receive(%d) = %d messages, %v", n, len(ms), err)
	}
	return ms
}

// Bad CompleteBatch requests get INVALID_ARGUMENT, NOT_FOUND,
// UNAUTHENTICATED or PERMISSION_DENIED and complete nothing; a token that
// holds nothing is a failure in the response, not the call's error.
func TestCompleteBatchBadRequests(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		const admin, producer = "admin-token-0123456789", "producer-token-0123456789"
		e := start(t, kind, server.Config{Keys: []server.Key{
			{Name: "admin", Token: admin, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
			{Name: "producer", Token: producer, Grants: []server.Grant{{Actions: server.Send, Entities: []string{"*"}}}},
		}})
		ctx := t.Context()
		c := e.Remote(t, &client.Options{Token: admin})
		if _, err := c.CreateQueue(ctx, "q1", nil); err != nil {
			t.Fatal(err)
		}
		snd, _ := c.NewSender("q1")
		if _, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("1")}, {Body: []byte("2")}}); err != nil {
			t.Fatal(err)
		}
		r, _ := c.NewReceiver("q1", nil)
		ms := receiveN(t, r, 2)
		tokens := func(ts ...string) string { return `["` + strings.Join(ts, `", "`) + `"]` }
		tooMany := []string{ms[0].LockToken}
		for i := range 1000 {
			tooMany = append(tooMany, fmt.Sprintf("%016x%016x", 1000+i, 1))
		}
		for _, bad := range []struct {
			what, token, body  string
			status             int
			code, reason, says string
		}{
			{"no credentials", "", `{"entity": "q1", "lockTokens": ` + tokens(ms[0].LockToken) + `}`,
				401, "unauthenticated", "", "Authorization"},
			{"a key without receive", producer, `{"entity": "q1", "lockTokens": ` + tokens(ms[0].LockToken) + `}`,
				403, "permission_denied", "", "may not receive"},
			{"no lock tokens", admin, `{"entity": "q1", "lockTokens": []}`, 400, "invalid_argument", "INVALID_ARGUMENT", "no lock tokens"},
			{"1,001 lock tokens", admin, `{"entity": "q1", "lockTokens": ` + tokens(tooMany...) + `}`,
				400, "invalid_argument", "INVALID_ARGUMENT", "at most 1000"},
			{"a malformed lock token", admin, `{"entity": "q1", "lockTokens": ` + tokens(ms[0].LockToken, "nonsense") + `}`,
				400, "invalid_argument", "INVALID_ARGUMENT", "lock token"},
			{"a lock token twice", admin, `{"entity": "q1", "lockTokens": ` + tokens(ms[0].LockToken, ms[1].LockToken, ms[0].LockToken) + `}`,
				400, "invalid_argument", "INVALID_ARGUMENT", "same lock"},
			{"lock tokens as a string", admin, `{"entity": "q1", "lockTokens": "` + ms[0].LockToken + `"}`,
				400, "invalid_argument", "", "unmarshal"},
			{"a missing queue", admin, `{"entity": "nope", "lockTokens": ` + tokens(ms[0].LockToken) + `}`,
				404, "not_found", "ENTITY_NOT_FOUND", `"nope"`},
		} {
			status, ce := post(t, e, "MessagingService/CompleteBatch", bad.token, bad.body)
			wantStatus(t, bad.what, status, ce, bad.status, bad.code, bad.reason, bad.says)
		}
		if st, _ := e.Lib.GetQueueStats(ctx, "q1"); st.InFlight != 2 {
			t.Fatalf("the refused batches completed messages: %+v", st)
		}
		wantErr(t, "the client's CompleteBatch with a nil message", r.CompleteBatch(ctx, []*sluice.ReceivedMessage{ms[0], nil}), sluice.ErrInvalidArgument)
		wantErr(t, "the client's CompleteBatch of a malformed token", r.CompleteBatch(ctx, []*sluice.ReceivedMessage{ms[0], {LockToken: "x"}}),
			sluice.ErrInvalidArgument)

		// A token that holds nothing fails alone; the held ones complete.
		raw := sluicev1connect.NewMessagingServiceClient(connect.NewClient(connecthttp.NewTransport(http.DefaultClient, e.URL)))
		const stale = "00000000000000090000000000000001"
		cctx, info := connect.NewClientContext(ctx)
		info.RequestHeader().Set("Authorization", "Bearer "+admin)
		res, err := raw.CompleteBatch(cctx, &sluicev1.CompleteBatchRequest{Entity: "q1", LockTokens: []string{ms[0].LockToken, stale, ms[1].LockToken}})
		if err != nil || len(res.Failures) != 1 {
			t.Fatalf("CompleteBatch with a stale token = %v, %v", res, err)
		}
		if f := res.Failures[0]; f.Index != 1 || f.LockToken != stale || f.Reason != "LOCK_LOST" || !strings.Contains(f.Message, "lock lost") {
			t.Fatalf("the stale token's failure: %v", f)
		}
		if st, _ := e.Lib.GetQueueStats(ctx, "q1"); st.Active+st.InFlight != 0 {
			t.Fatalf("after CompleteBatch with a stale token: %+v", st)
		}
	})
}

// batchCompleter is CompleteBatch, which the library's receivers and the
// client's share.
type batchCompleter interface {
	CompleteBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error
}

var (
	_ batchCompleter = (*sluice.Receiver)(nil)
	_ batchCompleter = (*sluice.SessionReceiver)(nil)
	_ batchCompleter = (*client.Receiver)(nil)
	_ batchCompleter = (*client.SessionReceiver)(nil)
)
