package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Writes whose reply is lost: a proxy between the backend and its
// database lets a write commit and resets the connection before the
// reply reaches the backend. The call must report ErrOutcomeUnknown (not
// the connection's error, nor the error of a retry), the write must be
// in the database once (no retry wrote it again), and the backend must
// carry on.

// lostReply is a client whose database connections go through a proxy,
// and a second one, straight to the same database, to look at it.
type lostReply struct {
	kind   string
	proxy  *testdb.Proxy
	c      *sluice.Client // through the proxy
	direct *sluice.Client // not
	st     store.Store    // direct's storage, to read stream records
}

// forEachServer runs f, in parallel, on a fresh database of each server
// backend (parallel false: one after the other). SQLite is skipped: it
// runs in the process, so no connection lies between a COMMIT and its
// outcome for a reply to be lost on.
func forEachServer(t *testing.T, parallel bool, f func(t *testing.T, lr *lostReply)) {
	t.Helper()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			if kind == "sqlite" {
				t.Skip("SQLite runs in the process: there is no connection between a COMMIT and its outcome to lose")
			}
			if parallel {
				t.Parallel()
			}
			f(t, newLostReply(t, kind))
		})
	}
}

// committers is how many group commits a lostReply's client runs at once:
// one pipeline, so that every write joins the same groups.
const committers = 1

// stallSlots is how many stalled groups a lostReply's client leaves
// waiting while its pipeline moves on (at least four, on a pool of 16):
// a test that holds the pipeline holds that many groups more.
const stallSlots = 4

func newLostReply(t *testing.T, kind string) *lostReply {
	t.Helper()
	ctx := t.Context()
	var (
		dsn  string
		drop func() error
		err  error
	)
	switch kind {
	case "postgres":
		dsn, drop, err = testdb.Postgres(ctx)
	case "mysql":
		dsn, drop, err = testdb.MySQL(ctx)
	}
	testdb.Check(t, err)
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	proxy, proxied := testdb.NewProxy(t, dsn)
	// A statement Hold holds back may keep its transaction open longer
	// than the 5 s the backends let a transaction idle by default.
	u, err := url.Parse(proxied)
	if err != nil {
		t.Fatal(err)
	}
	params := u.Query()
	params.Set(map[string]string{"postgres": "idle_in_transaction_session_timeout", "mysql": "idle_transaction_timeout"}[kind],
		map[string]string{"postgres": "600000", "mysql": "600"}[kind])
	u.RawQuery = params.Encode()
	opts := sluice.Options{Service: "t-" + randHex(6), Logger: storetest.Logger(t), CommitPipelines: committers}
	c, err := sluice.Open(ctx, u.String(), &opts)
	if err != nil {
		t.Fatalf("open through %v: %v", proxy, err)
	}
	t.Cleanup(func() { c.Close() })
	b, err := sluice.OpenBackend(ctx, dsn, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	direct, err := sluice.NewClient(b, &opts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Store(store.Tenant{Service: opts.Service, Provider: sluice.DefaultProvider})
	if err != nil {
		t.Fatal(err)
	}
	return &lostReply{kind: kind, proxy: proxy, c: c, direct: direct, st: st}
}

// wantUnknown checks that err reports an unknown outcome, and that the
// proxy lost exactly lost replies so far.
func (lr *lostReply) wantUnknown(t *testing.T, what string, err error, lost int) {
	t.Helper()
	if n := lr.proxy.Lost(); n != lost {
		t.Fatalf("%s: the proxy lost %d replies, want %d (did the write's statement carry its marker?); the call returned %v", what, n, lost, err)
	}
	if !errors.Is(err, sluice.ErrOutcomeUnknown) {
		t.Fatalf("%s with its reply lost: got %v, want an error wrapping %q", what, err, sluice.ErrOutcomeUnknown)
	}
}

// peekAll returns every message of a queue (or its dead letters), read
// straight from the database.
func (lr *lostReply) peekAll(t *testing.T, queue string, dead bool) []*sluice.ReceivedMessage {
	t.Helper()
	opts := &sluice.ReceiverOptions{}
	if dead {
		opts.SubQueue = sluice.SubQueueDeadLetter
	}
	r, err := lr.direct.NewReceiver(queue, opts)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.Peek(t.Context(), sluice.MaxPeek, &sluice.PeekOptions{FromSequenceNumber: 1})
	if err != nil {
		t.Fatalf("peek %s: %v", queue, err)
	}
	return ms
}

// countID counts the messages of ms with a message id.
func countID(ms []*sluice.ReceivedMessage, id string) int {
	n := 0
	for _, m := range ms {
		if m.MessageID == id {
			n++
		}
	}
	return n
}

// sendUntil sends a message through lr.c until one is accepted (the
// backend carries on), within 60 s.
func (lr *lostReply) sendUntil(t *testing.T, queue, id string) {
	t.Helper()
	s := newSender(t, lr.c, queue)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.Send(t.Context(), &sluice.Message{MessageID: id, Body: []byte(id)})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backend does not carry on: a send 60 s on: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A send whose commit's reply is lost reports ErrOutcomeUnknown and is
// stored once: to a plain queue (one statement outside a transaction on
// PostgreSQL, a transaction on MariaDB) and to a queue with duplicate
// detection (a transaction on both), where a retry with the same id is
// safe and stores nothing more.
func TestLostReplySend(t *testing.T) {
	forEachServer(t, true, func(t *testing.T, lr *lostReply) {
		ctx := t.Context()
		lost := 0
		for _, dedup := range []bool{false, true} {
			q := createQueue(t, lr.c, &sluice.QueueProperties{RequiresDuplicateDetection: dedup})
			s := newSender(t, lr.c, q)
			id := "lost-" + randHex(8)
			if dedup {
				// Not the statement that finds the queue detects
				// duplicates (one alone, on PostgreSQL): the transaction's.
				lr.proxy.LoseCommit(id)
			} else {
				lr.proxy.LoseReply(id)
			}
			_, err := s.Send(ctx, &sluice.Message{MessageID: id, Body: []byte("once")})
			lost++
			lr.wantUnknown(t, fmt.Sprintf("Send (duplicate detection %v)", dedup), err, lost)
			if n := countID(lr.peekAll(t, q, false), id); n != 1 {
				t.Fatalf("duplicate detection %v: the message is stored %d times, want once", dedup, n)
			}
			if dedup {
				if _, err := s.Send(ctx, &sluice.Message{MessageID: id, Body: []byte("once")}); err != nil {
					t.Fatalf("Send again with the same id: %v", err)
				}
				if n := countID(lr.peekAll(t, q, false), id); n != 1 {
					t.Fatalf("after a retry with duplicate detection: stored %d times, want once", n)
				}
			}
			lr.sendUntil(t, q, "after-"+id)
			if n := countID(lr.peekAll(t, q, false), "after-"+id); n != 1 {
				t.Fatalf("the send after the lost reply is stored %d times, want once", n)
			}
		}
	})
}

// A publish whose commit's reply is lost reports ErrOutcomeUnknown and
// its event is in the log once; the next publish takes the next position.
func TestLostReplyPublish(t *testing.T) {
	forEachServer(t, true, func(t *testing.T, lr *lostReply) {
		ctx := t.Context()
		id := sluice.StreamID{Namespace: "ns", Key: "lost-" + randHex(8)}
		lr.proxy.LoseReply(id.Key)
		_, err := lr.c.Publish(ctx, id, sluice.Event{Body: []byte("once")})
		lr.wantUnknown(t, "Publish", err, 1)
		part := sluice.PartitionOf(id, lr.c.StreamPartitions())
		recs, err := lr.st.Read(ctx, &store.ReadParams{Partition: part, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Key != id.Key || string(recs[0].Payload) != "once" {
			t.Fatalf("partition %d holds %d records (%v), want the lost publish's one", part, len(recs), recs)
		}
		pos := publish(t, lr.c, id, "next")
		if len(pos) != 1 || pos[0] != recs[0].Position+1 {
			t.Fatalf("the next publish is at %v, want %d", pos, recs[0].Position+1)
		}
	})
}

// A settle whose commit's reply is lost reports ErrOutcomeUnknown and
// applied once; a retry is safe: it fails with ErrLockLost. A completion
// is one statement outside a transaction on PostgreSQL; dead-lettering
// and abandoning run in a transaction on both backends. (On MariaDB a
// completion runs the same transaction as those, but its statements name
// messages by sequence number alone, nothing that marks them apart for
// the proxy: it is left out there.)
func TestLostReplySettle(t *testing.T) {
	forEachServer(t, true, func(t *testing.T, lr *lostReply) {
		ctx := t.Context()
		q := createQueue(t, lr.c, &sluice.QueueProperties{LockDuration: 5 * time.Minute})
		s := newSender(t, lr.c, q)
		for _, id := range []string{"complete", "dead-letter", "abandon"} {
			if _, err := s.Send(ctx, &sluice.Message{MessageID: id, Body: []byte(id)}); err != nil {
				t.Fatal(err)
			}
		}
		r := newReceiver(t, lr.c, q, sluice.PeekLock)
		byID := map[string]*sluice.ReceivedMessage{}
		for len(byID) < 3 {
			for _, m := range receive(t, r, 3) {
				byID[m.MessageID] = m
			}
		}
		lost := 0
		settle := func(what, marker string, f func(*sluice.ReceivedMessage) error) {
			t.Helper()
			lr.proxy.LoseReply(marker)
			err := f(byID[what])
			lost++
			lr.wantUnknown(t, what, err, lost)
			wantErr(t, what+" again", f(byID[what]), sluice.ErrLockLost)
		}

		if lr.kind == "postgres" {
			// CompleteMessages carries the receipts as JSON.
			token, err := strconv.ParseUint(byID["complete"].LockToken[16:], 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			settle("complete", fmt.Sprintf(`"t":%d`, token), func(m *sluice.ReceivedMessage) error {
				return r.Complete(ctx, m)
			})
			if n := countID(lr.peekAll(t, q, false), "complete"); n != 0 {
				t.Fatalf("a completed message is still in the queue (%d)", n)
			}
		}

		reason := "lost-" + randHex(8)
		settle("dead-letter", reason, func(m *sluice.ReceivedMessage) error {
			return r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: reason})
		})
		dead := lr.peekAll(t, q, true)
		if countID(dead, "dead-letter") != 1 || countID(lr.peekAll(t, q, false), "dead-letter") != 0 {
			t.Fatalf("dead letters %v, want the dead-lettered message once", bodies(dead))
		}

		mark := "lost-" + randHex(8)
		settle("abandon", mark, func(m *sluice.ReceivedMessage) error {
			return r.Abandon(ctx, m, &sluice.AbandonOptions{PropertiesToModify: map[string]string{"mark": mark}})
		})
		var back []*sluice.ReceivedMessage
		for _, m := range lr.peekAll(t, q, false) {
			if m.MessageID == "abandon" {
				back = append(back, m)
			}
		}
		if len(back) != 1 || back[0].ApplicationProperties["mark"] != mark || back[0].State != sluice.StateActive {
			t.Fatalf("the abandoned message: %+v, want it once, active again with mark %q", back, mark)
		}
		lr.sendUntil(t, q, "after")
	})
}

// A group of sends whose commit's reply is lost is not retried request
// by request: every request of the group reports ErrOutcomeUnknown and
// each message is stored once. The test holds the backend's committers
// on other sends (to other queues) until two sends wait; then it lets one
// committer go, which takes both waiting sends as one group. The two
// sends go to one queue (one statement), or to two (on PostgreSQL, one
// pipeline of two statements that commit together, sent in one write,
// whose reply the proxy loses).
func TestLostReplyGroup(t *testing.T) {
	forEachServer(t, false, func(t *testing.T, lr *lostReply) {
		for _, queues := range []int{1, 2} {
			t.Run(fmt.Sprintf("queues=%d", queues), func(t *testing.T) {
				if queues > 1 && lr.kind != "postgres" {
					t.Skip("only PostgreSQL pipelines a group that spans queues; elsewhere it is a transaction of one statement a queue")
				}
				lostReplyGroup(t, lr, queues)
			})
		}
	})
}

func lostReplyGroup(t *testing.T, lr *lostReply, queues int) {
	ctx := t.Context()
	qs := []string{createQueue(t, lr.c, nil)}
	if queues > 1 {
		qs = append(qs, createQueue(t, lr.c, nil))
	}
	lost := lr.proxy.Lost()
	hold := holdPipeline(t, lr)
	defer hold.releaseAll()
	var wg sync.WaitGroup
	ids := []string{"group-" + randHex(8), "group-" + randHex(8)}
	lr.proxy.LoseReply(ids...)
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = newSender(t, lr.c, qs[i%len(qs)]).Send(ctx, &sluice.Message{MessageID: id})
		}()
	}
	waitUntil(t, "both sends waiting for a committer", func() bool {
		return submitting() == hold.count+len(ids)
	})
	hold.releaseOwner()
	waitUntil(t, "the group's reply lost", func() bool { return lr.proxy.Lost() == lost+1 })
	hold.releaseAll()
	wg.Wait()
	for i, id := range ids {
		q := qs[i%len(qs)]
		if n := countID(lr.peekAll(t, q, false), id); n != 1 {
			t.Errorf("%s is stored %d times in %s, want once", id, n, q)
		}
		if !errors.Is(errs[i], sluice.ErrOutcomeUnknown) {
			t.Errorf("send %s with its group's reply lost: got %v, want an error wrapping %q", id, errs[i], sluice.ErrOutcomeUnknown)
		}
	}
	for _, q := range qs {
		lr.sendUntil(t, q, "after")
	}
}

// heldPipeline is a client's commit pipeline held by sends whose
// statements the proxy holds.
type heldPipeline struct {
	count    int      // held sends
	releases []func() // the proxy's, in the order the sends were held
	sends    sync.WaitGroup
	once     sync.Once
}

// holdPipeline holds the client's commit pipeline (committers is one) on
// sends to queues of their own, one at a time: the pipeline moves on from
// the first stallSlots of them, whose groups wait on their own, and the
// last holds it. Writes submitted next wait in the pipeline together.
func holdPipeline(t *testing.T, lr *lostReply) *heldPipeline {
	t.Helper()
	h := &heldPipeline{count: committers + stallSlots}
	for i := range h.count {
		q, id := createQueue(t, lr.c, nil), "hold-"+randHex(8)
		h.releases = append(h.releases, lr.proxy.Hold(id))
		h.sends.Go(func() {
			if _, err := newSender(t, lr.c, q).Send(context.Background(), &sluice.Message{MessageID: id}); err != nil {
				t.Errorf("held send %d: %v", i, err)
			}
		})
		waitUntil(t, fmt.Sprintf("%d sends held", i+1), func() bool { return lr.proxy.Held() == i+1 })
	}
	return h
}

// releaseOwner lets go of the send that holds the pipeline.
func (h *heldPipeline) releaseOwner() { h.releases[h.count-1]() }

// releaseAll lets go of every held send and waits for them (once).
func (h *heldPipeline) releaseAll() {
	h.once.Do(func() {
		for _, release := range h.releases {
			release()
		}
		h.sends.Wait()
	})
}

// Writes refused before anything was sent (the database refuses
// connections) fail with the connection's error, not ErrOutcomeUnknown,
// and are not stored; the backend carries on once the database is back.
func TestOutcomeKnownWhenRefused(t *testing.T) {
	forEachServer(t, true, func(t *testing.T, lr *lostReply) {
		ctx := t.Context()
		q := createQueue(t, lr.c, nil)
		s := newSender(t, lr.c, q)
		if _, err := s.Send(ctx, &sluice.Message{MessageID: "received"}); err != nil {
			t.Fatal(err)
		}
		r := newReceiver(t, lr.c, q, sluice.PeekLock)
		ms := receive(t, r, 1)
		id := sluice.StreamID{Namespace: "ns", Key: "refused"}
		publish(t, lr.c, id, "first") // the partitions are known

		lr.proxy.Down()
		_, sendErr := s.Send(ctx, &sluice.Message{MessageID: "refused"})
		_, pubErr := lr.c.Publish(ctx, id, sluice.Event{Body: []byte("refused")})
		completeErr := r.Complete(ctx, ms[0])
		for what, err := range map[string]error{"Send": sendErr, "Publish": pubErr, "Complete": completeErr} {
			if err == nil || errors.Is(err, sluice.ErrOutcomeUnknown) {
				t.Errorf("%s with connections refused: got %v, want the connection's error, not %q", what, err, sluice.ErrOutcomeUnknown)
			}
		}
		if n := countID(lr.peekAll(t, q, false), "refused"); n != 0 {
			t.Fatalf("a refused send is stored (%d)", n)
		}
		lr.proxy.Up()
		lr.sendUntil(t, q, "after")
		if err := r.Complete(ctx, ms[0]); err != nil {
			t.Fatalf("Complete once the database is back: %v", err)
		}
	})
}

// submitting counts the goroutines in the engine's group commit: waiting
// for a committer to take their request, or for its outcome.
func submitting() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "engine.(*committer).submit(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A group of a publish and then a topic send (one EnqueueAll) commits
// both: once the group read the EnqueueAll as an append, and the
// committer died on it (PostgreSQL, where appends run as one statement).
// The test holds the committers on other sends so that both wait, in
// that order, and form one group.
func TestGroupOfPublishAndTopicSend(t *testing.T) {
	forEachServer(t, false, func(t *testing.T, lr *lostReply) {
		ctx := t.Context()
		topic := "t-" + randHex(4)
		if _, err := lr.c.CreateTopic(ctx, topic, nil); err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"a", "b"} {
			if _, err := lr.c.CreateSubscription(ctx, topic, sub, nil); err != nil {
				t.Fatal(err)
			}
		}
		id := sluice.StreamID{Namespace: "ns", Key: "k"}
		publish(t, lr.c, id, "first") // the partitions are known
		ts := newSender(t, lr.c, topic)
		if _, err := ts.Send(ctx, &sluice.Message{Body: []byte("first")}); err != nil {
			t.Fatal(err) // the topic's settings are cached
		}
		hold := holdPipeline(t, lr)
		defer hold.releaseAll()
		var wg sync.WaitGroup
		var pubErr, sendErr error
		wg.Go(func() { _, pubErr = lr.c.Publish(ctx, id, sluice.Event{Body: []byte("grouped")}) })
		waitUntil(t, "the publish waiting", func() bool { return submitting() == hold.count+1 })
		wg.Go(func() { _, sendErr = ts.Send(ctx, &sluice.Message{Body: []byte("grouped")}) })
		waitUntil(t, "the topic send waiting", func() bool { return submitting() == hold.count+2 })
		hold.releaseOwner()
		hold.releaseAll()
		wg.Wait()
		if pubErr != nil || sendErr != nil {
			t.Fatalf("publish: %v; topic send: %v", pubErr, sendErr)
		}
		for _, sub := range []string{"a", "b"} {
			if n := len(lr.peekAll(t, topic+"/Subscriptions/"+sub, false)); n != 2 {
				t.Errorf("subscription %s holds %d messages, want 2", sub, n)
			}
		}
	})
}
