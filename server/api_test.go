package server_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}

// Entities through the API: every call of EntityService, with the
// library's errors on the client's side.
func TestEntitiesAPI(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		c := e.Remote(t, nil)
		ctx := t.Context()

		q, err := c.CreateQueue(ctx, "orders", &sluice.QueueProperties{LockDuration: 30 * time.Second, MaxDeliveryCount: 3,
			DefaultTTL: time.Hour, DeadLetterOnExpiry: true, RequiresDuplicateDetection: true, UserMetadata: `{"team":"billing"}`})
		if err != nil {
			t.Fatalf("CreateQueue: %v", err)
		}
		if q.Name != "orders" || q.LockDuration != 30*time.Second || q.MaxDeliveryCount != 3 || q.DefaultTTL != time.Hour ||
			!q.DeadLetterOnExpiry || q.DuplicateDetectionWindow != 10*time.Minute || q.MaxMessageSize != 1<<20 ||
			q.UserMetadata != `{"team":"billing"}` {
			t.Fatalf("CreateQueue returned %+v", q)
		}
		_, err = c.CreateQueue(ctx, "orders", nil)
		wantErr(t, "CreateQueue twice", err, sluice.ErrEntityExists)
		_, err = c.CreateQueue(ctx, "bad name", nil)
		wantErr(t, "CreateQueue of a bad name", err, sluice.ErrInvalidName)
		if _, err := c.CreateQueueForwarding(ctx, "inbox", nil, "orders"); err != nil {
			t.Fatalf("CreateQueueForwarding: %v", err)
		}
		if got, err := c.GetQueue(ctx, "inbox"); err != nil || got.ForwardTo != "orders" {
			t.Fatalf("GetQueue(inbox) = %+v, %v", got, err)
		}
		_, err = c.GetQueue(ctx, "missing")
		wantErr(t, "GetQueue of a missing queue", err, sluice.ErrEntityNotFound)
		q.MaxDeliveryCount = 7
		if got, err := c.UpdateQueue(ctx, "orders", q.QueueProperties); err != nil || got.MaxDeliveryCount != 7 {
			t.Fatalf("UpdateQueue = %+v, %v", got, err)
		}
		if lib, _ := e.Lib.GetQueue(ctx, "orders"); lib.MaxDeliveryCount != 7 {
			t.Fatalf("the library sees max delivery count %d after the update", lib.MaxDeliveryCount)
		}
		// An update that does not mention forwarding keeps it.
		if got, err := c.UpdateQueue(ctx, "inbox", sluice.QueueProperties{MaxDeliveryCount: 4}); err != nil || got.ForwardTo != "orders" {
			t.Fatalf("UpdateQueue of a forwarding queue = %+v, %v; want ForwardTo kept", got, err)
		}
		if got, err := c.UpdateQueueForwarding(ctx, "inbox", sluice.QueueProperties{}, ""); err != nil || got.ForwardTo != "" {
			t.Fatalf("UpdateQueueForwarding = %+v, %v", got, err)
		}
		names := func(qs []sluice.QueueInfo) []string {
			var out []string
			for _, q := range qs {
				out = append(out, q.Name)
			}
			return out
		}
		if qs, err := c.ListQueues(ctx, "", 10); err != nil || !slices.Equal(names(qs), []string{"inbox", "orders"}) {
			t.Fatalf("ListQueues = %v, %v", names(qs), err)
		}
		if qs, err := c.ListQueues(ctx, "inbox", 10); err != nil || !slices.Equal(names(qs), []string{"orders"}) {
			t.Fatalf("ListQueues after inbox = %v, %v", names(qs), err)
		}
		_, err = c.ListQueues(ctx, "", 5000)
		wantErr(t, "ListQueues of 5000", err, sluice.ErrInvalidArgument)
		if err := c.DeleteQueue(ctx, "inbox"); err != nil {
			t.Fatalf("DeleteQueue: %v", err)
		}
		wantErr(t, "DeleteQueue twice", c.DeleteQueue(ctx, "inbox"), sluice.ErrEntityNotFound)

		top, err := c.CreateTopic(ctx, "events", &sluice.TopicProperties{DefaultTTL: time.Minute})
		if err != nil || top.DefaultTTL != time.Minute {
			t.Fatalf("CreateTopic = %+v, %v", top, err)
		}
		if got, err := c.GetTopic(ctx, "events"); err != nil || got.Name != "events" {
			t.Fatalf("GetTopic = %+v, %v", got, err)
		}
		if got, err := c.UpdateTopic(ctx, "events", sluice.TopicProperties{DefaultTTL: 2 * time.Minute}); err != nil || got.DefaultTTL != 2*time.Minute {
			t.Fatalf("UpdateTopic = %+v, %v", got, err)
		}
		if ts, err := c.ListTopics(ctx, "", 10); err != nil || len(ts) != 1 || ts[0].Name != "events" {
			t.Fatalf("ListTopics = %+v, %v", ts, err)
		}
		red := sluice.Rule{Name: "red", Filter: sluice.SQLFilter{Expression: "color = 'red'"}}
		sub, err := c.CreateSubscription(ctx, "events", "reds", &sluice.SubscriptionProperties{MaxDeliveryCount: 4}, red)
		if err != nil || sub.MaxDeliveryCount != 4 || len(sub.Rules) != 1 || sub.Rules[0].Filter != red.Filter {
			t.Fatalf("CreateSubscription = %+v, %v", sub, err)
		}
		_, err = c.CreateSubscription(ctx, "events", "broken", nil, sluice.Rule{Name: "x", Filter: sluice.SQLFilter{Expression: "color = = 1"}})
		wantErr(t, "CreateSubscription with a malformed filter", err, sluice.ErrInvalidFilter)
		corr := sluice.Rule{Name: "vip", Filter: sluice.CorrelationFilter{Subject: "vip", Properties: map[string]string{"tier": "gold"}}}
		if err := c.CreateRule(ctx, "events", "reds", corr); err != nil {
			t.Fatalf("CreateRule: %v", err)
		}
		got, err := c.GetSubscription(ctx, "events", "reds")
		if err != nil || len(got.Rules) != 2 || !reflect.DeepEqual(got.Rules[1], corr) {
			t.Fatalf("GetSubscription = %+v, %v", got, err)
		}
		if err := c.DeleteRule(ctx, "events", "reds", "red"); err != nil {
			t.Fatalf("DeleteRule: %v", err)
		}
		if got, err := c.UpdateSubscription(ctx, "events", "reds", sluice.SubscriptionProperties{MaxDeliveryCount: 9}); err != nil ||
			got.MaxDeliveryCount != 9 || len(got.Rules) != 1 {
			t.Fatalf("UpdateSubscription = %+v, %v", got, err)
		}
		// Forwarding is kept by an update that does not set it, and
		// stopped by one that does.
		if _, err := c.CreateQueue(ctx, "red-archive", nil); err != nil {
			t.Fatal(err)
		}
		if got, err := c.UpdateSubscription(ctx, "events", "reds", sluice.SubscriptionProperties{ForwardTo: "red-archive"}); err != nil || got.ForwardTo != "red-archive" {
			t.Fatalf("UpdateSubscription to forward = %+v, %v", got, err)
		}
		if got, err := c.UpdateSubscription(ctx, "events", "reds", sluice.SubscriptionProperties{MaxDeliveryCount: 8}); err != nil || got.ForwardTo != "red-archive" {
			t.Fatalf("UpdateSubscription without forwarding = %+v, %v; want it kept", got, err)
		}
		if got, err := c.UpdateSubscriptionForwarding(ctx, "events", "reds", sluice.SubscriptionProperties{}); err != nil || got.ForwardTo != "" {
			t.Fatalf("UpdateSubscriptionForwarding to nowhere = %+v, %v", got, err)
		}
		if subs, err := c.ListSubscriptions(ctx, "events"); err != nil || len(subs) != 1 || subs[0].Name != "reds" {
			t.Fatalf("ListSubscriptions = %+v, %v", subs, err)
		}
		snd, _ := c.NewSender("events")
		if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("gold"), Subject: "vip", ApplicationProperties: map[string]string{"tier": "gold"}}); err != nil {
			t.Fatal(err)
		}
		if st, err := c.GetQueueStats(ctx, sluice.SubscriptionPath("events", "reds")); err != nil || st.Active != 1 {
			t.Fatalf("GetQueueStats of the subscription = %+v, %v", st, err)
		}
		if err := c.DeleteSubscription(ctx, "events", "reds"); err != nil {
			t.Fatalf("DeleteSubscription: %v", err)
		}
		if err := c.DeleteTopic(ctx, "events"); err != nil {
			t.Fatalf("DeleteTopic: %v", err)
		}
		_, err = c.GetTopic(ctx, "events")
		wantErr(t, "GetTopic after DeleteTopic", err, sluice.ErrEntityNotFound)
	})
}

// Messages through the API: send with every field, receive in both
// modes, settle in every way, renew, peek, defer, schedule and cancel.
func TestMessagingAPI(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		c := e.Remote(t, nil)
		ctx := t.Context()
		if _, err := c.CreateQueue(ctx, "work", &sluice.QueueProperties{MaxDeliveryCount: 2}); err != nil {
			t.Fatal(err)
		}
		snd, _ := c.NewSender("work")
		full := &sluice.Message{Body: []byte{0, 1, 2, 0xff}, MessageID: "m-1", PartitionKey: "pk", CorrelationID: "corr",
			Subject: "subj", ContentType: "application/octet-stream", ReplyTo: "replies", ReplyToSessionID: "rs", To: "to",
			ApplicationProperties: map[string]string{"a": "1"}, TimeToLive: time.Hour}
		seqs, err := snd.SendBatch(ctx, []*sluice.Message{full, {Body: []byte("two")}, {Body: []byte("three")}})
		if err != nil || len(seqs) != 3 {
			t.Fatalf("SendBatch = %v, %v", seqs, err)
		}
		r, _ := c.NewReceiver("work", nil)
		ms, err := r.Receive(ctx, 3)
		if err != nil || len(ms) != 3 {
			t.Fatalf("Receive = %d messages, %v", len(ms), err)
		}
		m := ms[0]
		if !reflect.DeepEqual(m.Message.Body, full.Body) || m.MessageID != "m-1" || m.PartitionKey != "pk" || m.CorrelationID != "corr" ||
			m.Subject != "subj" || m.ContentType != full.ContentType || m.ReplyTo != "replies" || m.ReplyToSessionID != "rs" ||
			m.To != "to" || m.ApplicationProperties["a"] != "1" || m.SequenceNumber != seqs[0] || m.DeliveryCount != 1 ||
			m.EnqueuedTime.IsZero() || m.ExpiresAt.Sub(m.EnqueuedTime) != time.Hour || len(m.LockToken) != 32 || m.LockedUntil.IsZero() {
			t.Fatalf("received %+v", m)
		}
		before := m.LockedUntil
		time.Sleep(10 * time.Millisecond)
		if err := r.RenewLock(ctx, m); err != nil || !m.LockedUntil.After(before) {
			t.Fatalf("RenewLock: %v, until %v (was %v)", err, m.LockedUntil, before)
		}
		if err := r.Complete(ctx, m); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		wantErr(t, "Complete twice", r.Complete(ctx, m), sluice.ErrLockLost)
		if err := r.Abandon(ctx, ms[1], &sluice.AbandonOptions{PropertiesToModify: map[string]string{"tried": "once"}}); err != nil {
			t.Fatalf("Abandon: %v", err)
		}
		if err := r.Defer(ctx, ms[2], nil); err != nil {
			t.Fatalf("Defer: %v", err)
		}
		again, err := r.Receive(ctx, 1)
		if err != nil || string(again[0].Body) != "two" || again[0].ApplicationProperties["tried"] != "once" || again[0].DeliveryCount != 2 {
			t.Fatalf("after Abandon: %+v, %v", again, err)
		}
		if err := r.DeadLetter(ctx, again[0], &sluice.DeadLetterOptions{Reason: "bad", Description: "very"}); err != nil {
			t.Fatalf("DeadLetter: %v", err)
		}
		deferred, err := r.ReceiveDeferred(ctx, seqs[2])
		if err != nil || len(deferred) != 1 || string(deferred[0].Body) != "three" {
			t.Fatalf("ReceiveDeferred = %+v, %v", deferred, err)
		}
		if err := r.Complete(ctx, deferred[0]); err != nil {
			t.Fatal(err)
		}
		_, err = r.ReceiveDeferred(ctx, seqs[2])
		wantErr(t, "ReceiveDeferred of a completed message", err, sluice.ErrMessageNotFound)

		// Nothing there: TryReceive returns none at once, Receive waits for
		// a send, and gives up with the context.
		if none, err := r.TryReceive(ctx, 5); err != nil || len(none) != 0 {
			t.Fatalf("TryReceive of an empty queue = %v, %v", none, err)
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = r.Receive(short, 1)
		cancel()
		wantErr(t, "Receive of an empty queue until the context ends", err, context.DeadlineExceeded)
		go func() {
			time.Sleep(200 * time.Millisecond)
			snd.Send(context.Background(), &sluice.Message{Body: []byte("late")})
		}()
		began := time.Now()
		late, err := r.Receive(ctx, 1)
		if err != nil || string(late[0].Body) != "late" || time.Since(began) < 150*time.Millisecond {
			t.Fatalf("Receive waiting for a send = %+v, %v after %v", late, err, time.Since(began))
		}
		r.Complete(ctx, late[0])

		// Receive-and-delete; peek; scheduling and its cancellation.
		rd, _ := c.NewReceiver("work", &sluice.ReceiverOptions{Mode: sluice.ReceiveAndDelete})
		snd.Send(ctx, &sluice.Message{Body: []byte("gone")})
		if got, err := rd.Receive(ctx, 1); err != nil || string(got[0].Body) != "gone" || got[0].LockToken != "" {
			t.Fatalf("receive-and-delete = %+v, %v", got, err)
		}
		if st, _ := e.Lib.GetQueueStats(ctx, "work"); st.Active+st.InFlight != 0 || st.DeadLettered != 1 {
			t.Fatalf("stats after receive-and-delete: %+v", st)
		}
		at := time.Now().Add(time.Hour)
		sched, err := snd.Send(ctx, &sluice.Message{Body: []byte("later"), ScheduledEnqueueTime: at})
		if err != nil {
			t.Fatal(err)
		}
		peeked, err := r.Peek(ctx, 10, &sluice.PeekOptions{FromSequenceNumber: 1})
		if err != nil || len(peeked) != 1 || peeked[0].SequenceNumber != sched || peeked[0].State != sluice.StateScheduled ||
			peeked[0].ScheduledEnqueueTime.Sub(at).Abs() > time.Second {
			t.Fatalf("Peek = %+v, %v", peeked, err)
		}
		if err := snd.CancelScheduled(ctx, sched); err != nil {
			t.Fatalf("CancelScheduled: %v", err)
		}
		if peeked, _ := r.Peek(ctx, 10, &sluice.PeekOptions{FromSequenceNumber: 1}); len(peeked) != 0 {
			t.Fatalf("Peek after CancelScheduled = %+v", peeked)
		}

		// The dead-letter queue: receive, resubmit with progress, purge.
		dlq, _ := c.NewReceiver("work", &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		dead, err := dlq.Receive(ctx, 1)
		if err != nil || string(dead[0].Body) != "two" || dead[0].DeadLetterReason != "bad" || dead[0].DeadLetterDescription != "very" {
			t.Fatalf("dead letter = %+v, %v", dead, err)
		}
		wantErr(t, "Defer of a dead letter", dlq.Defer(ctx, dead[0], nil), sluice.ErrInvalidArgument)
		if err := dlq.Abandon(ctx, dead[0], nil); err != nil {
			t.Fatalf("Abandon of a dead letter: %v", err)
		}
		var progress [][2]int
		n, err := c.ResubmitDeadLetters(ctx, "work", &sluice.ResubmitOptions{Progress: func(done, total int) {
			progress = append(progress, [2]int{done, total})
		}})
		if err != nil || n != 1 || !reflect.DeepEqual(progress, [][2]int{{1, 1}}) {
			t.Fatalf("ResubmitDeadLetters = %d, %v, progress %v", n, err, progress)
		}
		back, err := r.Receive(ctx, 1)
		if err != nil || string(back[0].Body) != "two" {
			t.Fatalf("resubmitted = %+v, %v", back, err)
		}
		if err := r.DeadLetter(ctx, back[0], nil); err != nil {
			t.Fatal(err)
		}
		if n, err := c.PurgeDeadLetters(ctx, "work"); err != nil || n != 1 {
			t.Fatalf("PurgeDeadLetters = %d, %v", n, err)
		}
		_, err = snd.Send(ctx, &sluice.Message{Body: make([]byte, 2<<20)})
		wantErr(t, "Send of a message beyond the queue's size", err, sluice.ErrMessageTooLarge)
		missing, _ := c.NewSender("missing")
		_, err = missing.Send(ctx, &sluice.Message{Body: []byte("x")})
		wantErr(t, "Send to a missing queue", err, sluice.ErrEntityNotFound)
	})
}

// Sessions through the API.
func TestSessionsAPI(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		c := e.Remote(t, nil)
		ctx := t.Context()
		if _, err := c.CreateQueue(ctx, "sess", &sluice.QueueProperties{RequiresSession: true}); err != nil {
			t.Fatal(err)
		}
		snd, _ := c.NewSender("sess")
		for _, b := range []string{"a1", "a2"} {
			if _, err := snd.Send(ctx, &sluice.Message{Body: []byte(b), SessionID: "a"}); err != nil {
				t.Fatal(err)
			}
		}
		plain, _ := c.NewReceiver("sess", nil)
		_, err := plain.TryReceive(ctx, 1)
		wantErr(t, "a plain receive of a session queue", err, sluice.ErrSessionRequired)

		s, err := c.AcceptNextSession(ctx, "sess", nil)
		if err != nil || s.SessionID() != "a" || len(s.LockToken()) != 16 || s.LockedUntil().IsZero() {
			t.Fatalf("AcceptNextSession = %+v, %v", s, err)
		}
		_, err = c.AcceptSession(ctx, "sess", "a", nil)
		wantErr(t, "AcceptSession of a held session", err, sluice.ErrSessionCannotBeLocked)
		ms, err := s.Receive(ctx, 5)
		if err != nil || len(ms) != 2 || string(ms[0].Body) != "a1" {
			t.Fatalf("session Receive = %+v, %v", ms, err)
		}
		if err := s.SetSessionState(ctx, []byte("halfway")); err != nil {
			t.Fatal(err)
		}
		if st, err := s.SessionState(ctx); err != nil || string(st) != "halfway" {
			t.Fatalf("SessionState = %q, %v", st, err)
		}
		if err := s.RenewSessionLock(ctx); err != nil {
			t.Fatalf("RenewSessionLock: %v", err)
		}
		if err := s.Complete(ctx, ms[0]); err != nil {
			t.Fatal(err)
		}
		if err := s.Defer(ctx, ms[1], nil); err != nil {
			t.Fatal(err)
		}
		if d, err := s.ReceiveDeferred(ctx, ms[1].SequenceNumber); err != nil || len(d) != 1 {
			t.Fatalf("session ReceiveDeferred = %+v, %v", d, err)
		} else if err := s.Abandon(ctx, d[0], nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "SetSessionState after Close", s.SetSessionState(ctx, nil), sluice.ErrSessionLockLost)
		if lib, err := e.Lib.AcceptSession(ctx, "sess", "a", nil); err != nil {
			t.Fatalf("the library cannot accept the closed session: %v", err)
		} else if st, _ := lib.SessionState(ctx); string(st) != "halfway" {
			t.Fatalf("state seen by the library: %q", st)
		} else {
			lib.Close(ctx)
		}
		named, err := c.AcceptSession(ctx, "sess", "fresh", nil)
		if err != nil {
			t.Fatalf("AcceptSession of a new session: %v", err)
		}
		named.Close(ctx)
		if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("b1"), SessionID: "b"}); err != nil {
			t.Fatal(err)
		}
		ended, stop := context.WithCancel(ctx)
		stop()
		if b, err := c.AcceptNextSession(ended, "sess", nil); err != nil || b.SessionID() != "b" {
			t.Fatalf("AcceptNextSession with an ended context and a free session = %v, %v", b, err)
		} else {
			b.Close(ctx)
			lib, _ := e.Lib.AcceptSession(ctx, "sess", "b", nil)
			ms, _ := lib.Receive(ctx, 1)
			lib.Complete(ctx, ms[0])
			lib.Close(ctx)
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err = c.AcceptNextSession(short, "sess", nil)
		wantErr(t, "AcceptNextSession with none free", err, context.DeadlineExceeded)
	})
}

// The cluster's status through the API, with what the node's cache of
// each partition holds once it renewed its leases.
func TestClusterAPI(t *testing.T) {
	e := start(t, "sqlite", server.Config{})
	c := e.Remote(t, nil)
	ctx := t.Context()
	p := e.Lib.NewStreamProcessor(&sluice.StreamProcessorOptions{Name: "n"})
	if err := p.Handle("h", func(context.Context, *sluice.StreamEvent) error { return nil }, &sluice.ConsumerOptions{Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	if _, err := e.Lib.Publish(ctx, sluice.StreamID{Namespace: "ns", Key: "k"}, sluice.Event{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.ClusterStatus(ctx)
		if err != nil {
			t.Fatalf("ClusterStatus: %v", err)
		}
		lib, _ := e.Lib.ClusterStatus(ctx)
		renewed := !slices.ContainsFunc(st.Partitions, func(ps sluice.PartitionStatus) bool {
			return ps.CacheWindows < 1 || len(ps.Leases) != 1 || ps.Leases[0].CacheWindows != ps.CacheWindows
		})
		if len(st.Nodes) == 1 && st.Nodes[0].ID == p.NodeID() && len(st.Partitions) == 16 && len(st.Nodes[0].Partitions) == 16 && renewed {
			if st.Nodes[0].ID != lib.Nodes[0].ID || len(st.Partitions[0].Subscriptions) != len(lib.Partitions[0].Subscriptions) {
				t.Fatalf("ClusterStatus over the API %+v, from the library %+v", st, lib)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ClusterStatus = %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The Go client talks gRPC (over HTTP/2 without TLS) and the Connect
// protocol in JSON as well as in protobuf.
func TestProtocols(t *testing.T) {
	e := start(t, "sqlite", server.Config{})
	for _, opts := range []*client.Options{{GRPC: true}, {JSON: true}, nil} {
		c := e.Remote(t, opts)
		name := "q-" + randHex(3)
		if _, err := c.CreateQueue(t.Context(), name, nil); err != nil {
			t.Fatalf("%+v: CreateQueue: %v", opts, err)
		}
		snd, _ := c.NewSender(name)
		if _, err := snd.Send(t.Context(), &sluice.Message{Body: []byte("hi")}); err != nil {
			t.Fatalf("%+v: Send: %v", opts, err)
		}
		r, _ := c.NewReceiver(name, nil)
		ms, err := r.Receive(t.Context(), 1)
		if err != nil || string(ms[0].Body) != "hi" {
			t.Fatalf("%+v: Receive = %+v, %v", opts, ms, err)
		}
		if err := r.Complete(t.Context(), ms[0]); err != nil {
			t.Fatalf("%+v: Complete: %v", opts, err)
		}
		wantErr(t, "Complete twice over "+protocol(opts), r.Complete(t.Context(), ms[0]), sluice.ErrLockLost)
	}
}

func protocol(o *client.Options) string {
	switch {
	case o == nil:
		return "Connect"
	case o.GRPC:
		return "gRPC"
	default:
		return "Connect JSON"
	}
}

// queues and receivers are what code that runs on the library or on a
// server needs of each: both clients satisfy them.
type queues[S sender, R receiver] interface {
	NewSender(entity string) (S, error)
	NewReceiver(entity string, opts *sluice.ReceiverOptions) (R, error)
}

type sender interface {
	Send(ctx context.Context, m *sluice.Message) (int64, error)
}

type receiver interface {
	Receive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error)
	Complete(ctx context.Context, m *sluice.ReceivedMessage) error
}

var (
	_ queues[*sluice.Sender, *sluice.Receiver] = (*sluice.Client)(nil)
	_ queues[*client.Sender, *client.Receiver] = (*client.Client)(nil)
)

// ListEntityStats lists queues and subscriptions by path with their
// counts, page by page; Throughput reports the server's recent rates.
func TestEntityStatsAndThroughput(t *testing.T) {
	e := start(t, "sqlite", server.Config{})
	c := e.Remote(t, nil)
	ctx := t.Context()
	for _, q := range []string{"b-queue", "a-queue"} {
		if _, err := c.CreateQueue(ctx, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateTopic(ctx, "a-topic", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSubscription(ctx, "a-topic", "all", nil); err != nil {
		t.Fatal(err)
	}
	snd, _ := c.NewSender("a-topic")
	snd.Send(ctx, &sluice.Message{Body: []byte("x")})
	snd, _ = c.NewSender("b-queue")
	snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("1")}, {Body: []byte("2")}})
	var paths []string
	var counts []int64
	after := ""
	for {
		page, err := c.ListEntityStats(ctx, after, 2)
		if err != nil {
			t.Fatalf("ListEntityStats: %v", err)
		}
		for _, s := range page {
			paths, counts = append(paths, s.Entity), append(counts, s.Active)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].Entity
	}
	if want := []string{"a-queue", "a-topic/Subscriptions/all", "b-queue"}; !slices.Equal(paths, want) || !slices.Equal(counts, []int64{0, 1, 2}) {
		t.Fatalf("ListEntityStats pages: %v %v", paths, counts)
	}
	bucket, samples, err := c.Throughput(ctx)
	if err != nil || bucket != 5*time.Second {
		t.Fatalf("Throughput = %v, %v, %v", bucket, samples, err)
	}
}
