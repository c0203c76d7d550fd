package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// opRecord is an operation an Instrumentation saw, with how it ended.
type opRecord struct {
	kind    sluice.OperationKind
	entity  string
	stream  sluice.StreamID
	count   int // messages, events or received messages at the end
	action  sluice.SettleAction
	inTx    bool
	session string
	err     error
	ended   int
}

// opRecorder is an Instrumentation that records what it sees and marks
// each message and event it may change with a property.
type opRecorder struct {
	mu  sync.Mutex
	ops []*opRecord
}

func (r *opRecorder) Start(ctx context.Context, op *sluice.Operation) (context.Context, func(error)) {
	rec := &opRecord{kind: op.Kind, entity: op.Entity, stream: op.Stream, action: op.Action, inTx: op.InTx, session: op.Session}
	for i, m := range op.Messages {
		if m != nil {
			m.ApplicationProperties["marked"] = fmt.Sprint(i)
		}
	}
	for i := range op.Events {
		op.Events[i].Properties["marked"] = fmt.Sprint(i)
	}
	r.mu.Lock()
	r.ops = append(r.ops, rec)
	r.mu.Unlock()
	return ctx, func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		rec.err, rec.ended = err, rec.ended+1
		rec.count = len(op.Messages) + len(op.Events) + len(op.Received)
	}
}

// take returns the operations recorded since the last take.
func (r *opRecorder) take() []opRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]opRecord, len(r.ops))
	for i, op := range r.ops {
		out[i] = *op
	}
	r.ops = nil
	return out
}

// wantOps fails unless got holds one operation of each kind in kinds,
// in order, each ended once.
func wantOps(t *testing.T, what string, got []opRecord, kinds ...sluice.OperationKind) {
	t.Helper()
	if len(got) != len(kinds) {
		t.Fatalf("%s: %d operations %+v, want %v", what, len(got), got, kinds)
	}
	for i, k := range kinds {
		if got[i].kind != k || got[i].ended != 1 {
			t.Fatalf("%s: operation %d is %+v, want a %v ended once", what, i, got[i], k)
		}
	}
}

// An Instrumentation sees each send, receive, settlement and publish,
// with what it acts on and how it ended; what it sets in a send's or
// publish's properties is stored, the caller's messages and events are
// left alone; Instrument(nil) removes it.
func TestInstrumentSeesOperations(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		rec := &opRecorder{}
		c.Instrument(rec)
		q := createQueue(t, c, nil)
		s := newSender(t, c, q)
		caller := &sluice.Message{Body: []byte("a"), ApplicationProperties: map[string]string{"own": "yes"}}
		if _, err := s.SendBatch(ctx, []*sluice.Message{caller, {Body: []byte("b")}}); err != nil {
			t.Fatal(err)
		}
		if len(caller.ApplicationProperties) != 1 {
			t.Fatalf("the caller's properties became %v", caller.ApplicationProperties)
		}
		got := rec.take()
		wantOps(t, "SendBatch", got, sluice.OperationSend)
		if got[0].entity != q || got[0].count != 2 || got[0].err != nil || got[0].inTx {
			t.Fatalf("SendBatch's operation %+v", got[0])
		}

		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 10)
		if len(ms) != 2 || ms[0].ApplicationProperties["marked"] != "0" || ms[0].ApplicationProperties["own"] != "yes" ||
			ms[1].ApplicationProperties["marked"] != "1" {
			t.Fatalf("received %d messages with properties %v, %v: want those the instrumentation set", len(ms),
				ms[0].ApplicationProperties, ms[len(ms)-1].ApplicationProperties)
		}
		if err := r.Complete(ctx, ms[0]); err != nil {
			t.Fatal(err)
		}
		if err := r.Abandon(ctx, ms[1], nil); err != nil {
			t.Fatal(err)
		}
		err := r.Complete(ctx, ms[0]) // settled already
		wantErr(t, "a second Complete", err, sluice.ErrLockLost)
		got = rec.take()
		wantOps(t, "receive and settle", got, sluice.OperationReceive, sluice.OperationSettle, sluice.OperationSettle, sluice.OperationSettle)
		if got[0].count != 2 || got[1].action != sluice.SettleComplete || got[2].action != sluice.SettleAbandon ||
			!errors.Is(got[3].err, sluice.ErrLockLost) || got[3].count != 1 {
			t.Fatalf("receive and settle operations %+v", got)
		}

		// A receive whose ctx ends first ends with ctx's error and no
		// messages; a TryReceive of nothing ends with none and no error.
		ms = receive(t, r, 10) // the abandoned one
		if err := r.CompleteBatch(ctx, ms); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := r.Receive(short, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Receive of an empty queue: %v", err)
		}
		if ms, err := r.TryReceive(ctx, 1); err != nil || len(ms) != 0 {
			t.Fatalf("TryReceive of an empty queue: %v, %v", ms, err)
		}
		got = rec.take()
		wantOps(t, "batch and empty receives", got, sluice.OperationReceive, sluice.OperationSettle, sluice.OperationReceive, sluice.OperationReceive)
		if got[1].count != 1 || got[1].action != sluice.SettleComplete || !errors.Is(got[2].err, context.DeadlineExceeded) ||
			got[2].count != 0 || got[3].err != nil || got[3].count != 0 {
			t.Fatalf("batch and empty receives %+v", got)
		}

		// A send that fails, before or in storage, ends with its error.
		_, err = newSender(t, c, "no-such-queue").Send(ctx, &sluice.Message{})
		wantErr(t, "a send to a missing queue", err, sluice.ErrEntityNotFound)
		_, err = s.SendBatch(ctx, []*sluice.Message{nil})
		wantErr(t, "a send of a nil message", err, sluice.ErrInvalidArgument)
		got = rec.take()
		wantOps(t, "failed sends", got, sluice.OperationSend, sluice.OperationSend)
		if !errors.Is(got[0].err, sluice.ErrEntityNotFound) || got[0].entity != "no-such-queue" || !errors.Is(got[1].err, sluice.ErrInvalidArgument) {
			t.Fatalf("failed sends %+v", got)
		}

		// SendTx is an operation in the caller's transaction.
		tx, err := rawDB(t, kind).BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SendTx(ctx, tx, &sluice.Message{Body: []byte("tx")}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		got = rec.take()
		wantOps(t, "SendTx", got, sluice.OperationSend)
		if !got[0].inTx || got[0].count != 1 {
			t.Fatalf("SendTx's operation %+v", got[0])
		}
		if ms := receive(t, r, 1); ms[0].ApplicationProperties["marked"] != "0" {
			t.Fatalf("SendTx stored properties %v, want those the instrumentation set", ms[0].ApplicationProperties)
		}
		rec.take()

		// Publish and its events.
		id := sluice.StreamID{Namespace: "ins", Key: "k"}
		ev := sluice.Event{Body: []byte("e")}
		if _, err := c.Publish(ctx, id, ev); err != nil {
			t.Fatal(err)
		}
		got = rec.take()
		wantOps(t, "Publish", got, sluice.OperationPublish)
		if got[0].stream != id || got[0].count != 1 || ev.Properties != nil {
			t.Fatalf("Publish's operation %+v, the caller's event's properties %v", got[0], ev.Properties)
		}

		c.Instrument(nil)
		send(t, s, "plain")
		if ms := receive(t, r, 10); len(ms) != 1 || ms[0].ApplicationProperties["marked"] != "" {
			t.Fatalf("after Instrument(nil) received %v", ms)
		}
		if got := rec.take(); len(got) != 0 {
			t.Fatalf("after Instrument(nil) the instrumentation saw %+v", got)
		}
	})
}

// An Instrumentation sees lock renewals (a message's, by RenewLock or a
// processor, and a session's), resubmits of dead letters, with the dead
// letters moved, and settlements in the caller's transaction.
func TestInstrumentSeesRenewalsAndResubmits(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		rec := &opRecorder{}
		c.Instrument(rec)
		if c.Instrumentation() != rec {
			t.Fatalf("Instrumentation() = %v, want the one installed", c.Instrumentation())
		}
		q := createQueue(t, c, nil)
		s := newSender(t, c, q)
		send(t, s, "a", "b")
		r := newReceiver(t, c, q, sluice.PeekLock)
		ms := receive(t, r, 2)
		rec.take()
		if err := r.RenewLock(ctx, ms[0]); err != nil {
			t.Fatal(err)
		}
		got := rec.take()
		wantOps(t, "RenewLock", got, sluice.OperationRenewLock)
		if got[0].entity != q || got[0].count != 1 || got[0].err != nil {
			t.Fatalf("RenewLock's operation %+v", got[0])
		}

		tx, err := rawDB(t, kind).BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CompleteTx(ctx, tx, ms[0]); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		got = rec.take()
		wantOps(t, "CompleteTx", got, sluice.OperationSettle)
		if !got[0].inTx || got[0].action != sluice.SettleComplete || got[0].count != 1 {
			t.Fatalf("CompleteTx's operation %+v", got[0])
		}

		if err := r.DeadLetter(ctx, ms[1], nil); err != nil {
			t.Fatal(err)
		}
		rec.take()
		if n, err := c.ResubmitDeadLetters(ctx, q, nil); err != nil || n != 1 {
			t.Fatalf("ResubmitDeadLetters = %d, %v", n, err)
		}
		got = rec.take()
		wantOps(t, "ResubmitDeadLetters", got, sluice.OperationResubmit)
		if got[0].entity != q || got[0].count != 1 || got[0].err != nil {
			t.Fatalf("ResubmitDeadLetters' operation %+v", got[0])
		}
		ms = receive(t, r, 1)
		if err := r.DeadLetter(ctx, ms[0], nil); err != nil {
			t.Fatal(err)
		}
		dead, err := c.NewReceiver(q, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		peeked, err := dead.Peek(ctx, 1, nil)
		if err != nil || len(peeked) != 1 {
			t.Fatalf("Peek = %v, %v", peeked, err)
		}
		rec.take()
		_, err = c.ResubmitDeadLetters(ctx, q, &sluice.ResubmitOptions{SequenceNumbers: []int64{peeked[0].SequenceNumber, 1 << 40}})
		wantErr(t, "a resubmit naming a missing dead letter", err, sluice.ErrMessageNotFound)
		if n, err := c.ResubmitDeadLetters(ctx, q, &sluice.ResubmitOptions{SequenceNumbers: []int64{peeked[0].SequenceNumber}}); err != nil || n != 1 {
			t.Fatalf("ResubmitDeadLetters by number = %d, %v", n, err)
		}
		got = rec.take()
		wantOps(t, "ResubmitDeadLetters by number", got, sluice.OperationResubmit, sluice.OperationResubmit)
		if !errors.Is(got[0].err, sluice.ErrMessageNotFound) || got[0].count != 0 || got[1].count != 1 || got[1].err != nil {
			t.Fatalf("ResubmitDeadLetters' operations by number %+v", got)
		}

		sq := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
		if _, err := newSender(t, c, sq).Send(ctx, &sluice.Message{SessionID: "s1"}); err != nil {
			t.Fatal(err)
		}
		sr, err := c.AcceptSession(ctx, sq, "s1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sr.Close(context.Background())
		rec.take()
		if err := sr.RenewSessionLock(ctx); err != nil {
			t.Fatal(err)
		}
		got = rec.take()
		wantOps(t, "RenewSessionLock", got, sluice.OperationRenewSessionLock)
		if got[0].entity != sq || got[0].session != "s1" || got[0].err != nil {
			t.Fatalf("RenewSessionLock's operation %+v", got[0])
		}
	})
}
