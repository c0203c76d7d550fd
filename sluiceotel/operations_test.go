package sluiceotel_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/storetest"
)

// traceparent is the W3C traceparent of a sampled span.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
}

// linked reports whether s links to sc.
func linked(s sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
	for _, l := range s.Links() {
		if l.SpanContext.SpanID() == sc.SpanID() && l.SpanContext.TraceID() == sc.TraceID() {
			return true
		}
	}
	return false
}

// receiveAll receives n messages of q with a receiver of c.
func receiveAll(t *testing.T, c *sluice.Client, q string, n int) (*sluice.Receiver, []*sluice.ReceivedMessage) {
	t.Helper()
	r, err := c.NewReceiver(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*sluice.ReceivedMessage
	waitFor(t, fmt.Sprintf("%d messages", n), func() bool {
		ms, err := r.TryReceive(t.Context(), n-len(got))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
		return len(got) == n
	})
	return r, got
}

// Each message of a batch gets a create span of its own, a producer span
// under the caller's, whose context it carries; the send span, a client
// span then, links them all. A single message's creation context is the
// send span itself, a producer span, with no create span.
func TestTraceBatchCreateSpans(t *testing.T) {
	rec := newRecorder(t)
	c := sluicetest.Open(t, nil)
	c.Instrument(sluiceotel.New(&sluiceotel.Options{TracerProvider: rec}))
	q := createQueue(t, c)
	s, err := c.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := rec.Tracer("test").Start(t.Context(), "checkout")
	if _, err := s.SendBatch(ctx, []*sluice.Message{{MessageID: "a"}, {MessageID: "b"}, {MessageID: "c"}}); err != nil {
		t.Fatal(err)
	}
	root.End()
	send := rec.one(t, "send "+q)
	creates := rec.named("create " + q)
	if len(creates) != 3 {
		t.Fatalf("%d create spans, want 3", len(creates))
	}
	if send.SpanKind() != trace.SpanKindClient || send.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Fatalf("send span of kind %v under %v, want a client span under the caller's", send.SpanKind(), send.Parent())
	}
	wantAttrs(t, send, "messaging.batch.message_count", "3", "messaging.operation.type", "send")
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, cr := range creates {
		if cr.SpanKind() != trace.SpanKindProducer || cr.Parent().SpanID() != root.SpanContext().SpanID() || !linked(send, cr.SpanContext()) {
			t.Fatalf("create span of kind %v under %v, linked %v: want a producer span under the caller's, linked from the send",
				cr.SpanKind(), cr.Parent(), linked(send, cr.SpanContext()))
		}
		wantAttrs(t, cr, "messaging.operation.name", "create", "messaging.operation.type", "create", "messaging.destination.name", q,
			"messaging.system", "sluice")
		byID[attr(cr, "messaging.message.id")] = cr
	}
	_, ms := receiveAll(t, c, q, 3)
	for _, m := range ms {
		cr := byID[m.MessageID]
		if cr == nil || m.ApplicationProperties["traceparent"] != traceparent(cr.SpanContext()) {
			t.Fatalf("message %s carries %q, want its create span's context", m.MessageID, m.ApplicationProperties["traceparent"])
		}
	}

	if _, err := s.Send(t.Context(), &sluice.Message{MessageID: "single"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two send spans", func() bool { return len(rec.named("send "+q)) == 2 })
	single := rec.named("send " + q)[1]
	if single.SpanKind() != trace.SpanKindProducer || len(single.Links()) != 0 || len(rec.named("create "+q)) != 3 {
		t.Fatalf("single send: kind %v, %d links, %d create spans; want a producer span and no create span",
			single.SpanKind(), len(single.Links()), len(rec.named("create "+q)))
	}
	_, ms = receiveAll(t, c, q, 1)
	if ms[0].ApplicationProperties["traceparent"] != traceparent(single.SpanContext()) {
		t.Fatalf("single message carries %q, want the send span's context", ms[0].ApplicationProperties["traceparent"])
	}
}

// A publish of several events gives each its create span, as a batch
// send does.
func TestTracePublishCreateSpans(t *testing.T) {
	rec := newRecorder(t)
	c := sluicetest.Open(t, nil)
	c.Instrument(sluiceotel.New(&sluiceotel.Options{TracerProvider: rec}))
	ns := "ns-" + randHex(3)
	if _, err := c.Publish(t.Context(), sluice.StreamID{Namespace: ns, Key: "k"}, sluice.Event{Body: []byte("a")}, sluice.Event{Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	publish := rec.one(t, "publish "+ns)
	creates := rec.named("create " + ns)
	if len(creates) != 2 || publish.SpanKind() != trace.SpanKindClient {
		t.Fatalf("%d create spans, publish span of kind %v; want 2 and a client span", len(creates), publish.SpanKind())
	}
	for _, cr := range creates {
		if !linked(publish, cr.SpanContext()) {
			t.Fatalf("publish span links %v, not the create span %v", publish.Links(), cr.SpanContext().SpanID())
		}
		wantAttrs(t, cr, "sluice.stream.key", "k", "messaging.operation.type", "create")
	}
}

// A renewal of a message's lock, by RenewLock or by a processor while its
// handler runs, is a client span under the message's producer; a
// renewal of a session's lock one under the caller's, naming the session.
func TestTraceLockRenewals(t *testing.T) {
	rec := newRecorder(t)
	c := sluicetest.Open(t, nil)
	tr := sluiceotel.New(&sluiceotel.Options{TracerProvider: rec})
	c.Instrument(tr)
	q := "q-" + randHex(4)
	if _, err := c.CreateQueue(t.Context(), q, &sluice.QueueProperties{LockDuration: time.Second}); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(t.Context(), &sluice.Message{MessageID: "m1"}); err != nil {
		t.Fatal(err)
	}
	send := rec.one(t, "send "+q)
	r, ms := receiveAll(t, c, q, 1)
	if err := r.RenewLock(t.Context(), ms[0]); err != nil {
		t.Fatal(err)
	}
	renew := rec.one(t, "renew_lock "+q)
	if renew.SpanKind() != trace.SpanKindClient || renew.Parent().SpanID() != send.SpanContext().SpanID() || !linked(renew, send.SpanContext()) {
		t.Fatalf("renew_lock span of kind %v under %v, want a client span under the send span", renew.SpanKind(), renew.Parent())
	}
	wantAttrs(t, renew, "messaging.operation.name", "renew_lock", "messaging.message.id", "m1", "messaging.destination.name", q)
	if err := r.Complete(t.Context(), ms[0]); err != nil {
		t.Fatal(err)
	}

	// The processor's renewal: the handler holds the message until a
	// renewal span has ended.
	if _, err := s.Send(t.Context(), &sluice.Message{MessageID: "m2"}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProcessor(q, func(ctx context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
		deadline := time.Now().Add(30 * time.Second)
		for len(rec.named("renew_lock "+q)) < 2 && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}, &sluice.ProcessorOptions{Middleware: []sluice.Middleware{tr.Middleware()}})
	if err != nil {
		t.Fatal(err)
	}
	sluicetest.RunUntil(t, p, time.Minute, func() bool { return len(rec.named("complete "+q)) == 2 })
	auto := rec.named("renew_lock " + q)[1]
	if attr(auto, "messaging.message.id") != "m2" || auto.SpanContext().TraceID() != rec.named("send " + q)[1].SpanContext().TraceID() {
		t.Fatalf("the processor's renewal span %v, want one of m2 in its send's trace", auto.Attributes())
	}

	sq := "sq-" + randHex(4)
	if _, err := c.CreateQueue(t.Context(), sq, &sluice.QueueProperties{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	ss, err := c.NewSender(sq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Send(t.Context(), &sluice.Message{SessionID: "cart-1"}); err != nil {
		t.Fatal(err)
	}
	sr, err := c.AcceptSession(t.Context(), sq, "cart-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	ctx, root := rec.Tracer("test").Start(t.Context(), "work")
	if err := sr.RenewSessionLock(ctx); err != nil {
		t.Fatal(err)
	}
	root.End()
	sessionRenew := rec.one(t, "renew_session_lock "+sq)
	if sessionRenew.SpanKind() != trace.SpanKindClient || sessionRenew.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Fatalf("renew_session_lock span of kind %v under %v, want a client span under the caller's", sessionRenew.SpanKind(), sessionRenew.Parent())
	}
	wantAttrs(t, sessionRenew, "sluice.session_id", "cart-1", "messaging.operation.name", "renew_session_lock")
}

// A resubmit of dead letters, all of them or some by sequence number, is
// a client span linked to the creation context of each message it moved;
// the messages keep their context, so that their next consumer continues
// the first producer's trace.
func TestTraceResubmit(t *testing.T) {
	rec := newRecorder(t)
	c := sluicetest.Open(t, nil)
	c.Instrument(sluiceotel.New(&sluiceotel.Options{TracerProvider: rec}))
	q := createQueue(t, c)
	s, err := c.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendBatch(t.Context(), []*sluice.Message{{MessageID: "a"}, {MessageID: "b"}}); err != nil {
		t.Fatal(err)
	}
	creates := rec.named("create " + q)
	deadLetterAll := func() []*sluice.ReceivedMessage {
		r, ms := receiveAll(t, c, q, 2)
		for _, m := range ms {
			if err := r.DeadLetter(t.Context(), m, nil); err != nil {
				t.Fatal(err)
			}
		}
		return ms
	}
	first := deadLetterAll()
	if n, err := c.ResubmitDeadLetters(t.Context(), q, nil); err != nil || n != 2 {
		t.Fatalf("ResubmitDeadLetters = %d, %v", n, err)
	}
	resubmit := rec.one(t, "resubmit "+q)
	check := func(span sdktrace.ReadOnlySpan) {
		t.Helper()
		if span.SpanKind() != trace.SpanKindClient || len(span.Links()) != 2 {
			t.Fatalf("resubmit span of kind %v with links %v, want a client span with 2", span.SpanKind(), span.Links())
		}
		for _, cr := range creates {
			if !linked(span, cr.SpanContext()) {
				t.Fatalf("resubmit span links %v, not the create span %v", span.Links(), cr.SpanContext().SpanID())
			}
		}
		wantAttrs(t, span, "messaging.batch.message_count", "2", "messaging.operation.type", "send", "messaging.operation.name", "resubmit")
	}
	check(resubmit)

	second := deadLetterAll()
	for i := range second {
		if second[i].ApplicationProperties["traceparent"] != first[i].ApplicationProperties["traceparent"] {
			t.Fatalf("a resubmitted message carries %q, want its first %q", second[i].ApplicationProperties["traceparent"],
				first[i].ApplicationProperties["traceparent"])
		}
	}
	dead, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	peeked, err := dead.Peek(t.Context(), 2, nil)
	if err != nil || len(peeked) != 2 {
		t.Fatalf("Peek = %v, %v", peeked, err)
	}
	seqs := []int64{peeked[0].SequenceNumber, peeked[1].SequenceNumber}
	if n, err := c.ResubmitDeadLetters(t.Context(), q, &sluice.ResubmitOptions{SequenceNumbers: seqs}); err != nil || n != 2 {
		t.Fatalf("ResubmitDeadLetters(%v) = %d, %v", seqs, n, err)
	}
	waitFor(t, "a second resubmit span", func() bool { return len(rec.named("resubmit "+q)) == 2 })
	check(rec.named("resubmit " + q)[1])
}

// A settlement in the caller's transaction is traced as any settlement.
func TestTraceSettleInTx(t *testing.T) {
	rec := newRecorder(t)
	path := filepath.Join(t.TempDir(), "sluice.db")
	c, err := sluice.Open(t.Context(), "sqlite://"+path, &sluice.Options{Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Instrument(sluiceotel.New(&sluiceotel.Options{TracerProvider: rec}))
	q := createQueue(t, c)
	s, err := c.NewSender(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(t.Context(), &sluice.Message{}); err != nil {
		t.Fatal(err)
	}
	send := rec.one(t, "send "+q)
	r, ms := receiveAll(t, c, q, 1)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := r.CompleteTx(t.Context(), tx, ms[0]); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	complete := rec.one(t, "complete "+q)
	if complete.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Fatalf("complete span in a transaction under %v, want the send span", complete.Parent())
	}
}
