package sqs

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// Settling by receipt handle. A standard queue's message is settled by
// its lock token; a dead letter on its source's dead-letter queue, once
// the source is found to be the queue's; a FIFO message under its
// group's session lock, after which the group is handed back when none of
// the messages its receive returned is still in flight.

// settler settles the messages of one queue by handle.
type settler struct {
	h *Handler
	q queue
}

// receiver is the receiver a handle's message is settled with, locking
// for lock (0: the queue's).
func (s settler) receiver(ctx context.Context, hd handle, lock time.Duration) (*sluice.Receiver, error) {
	if hd.Source == "" {
		return s.h.c.NewReceiver(s.q.name, &sluice.ReceiverOptions{LockDuration: lock})
	}
	ok, err := s.h.isSource(ctx, s.q.name, hd.Source)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, receiptHandleIsInvalid(hd.String())
	}
	return s.h.c.NewReceiver(hd.Source, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter, LockDuration: lock})
}

// group resumes the session a FIFO handle's message was received under.
func (s settler) group(hd handle, lock time.Duration) (*sluice.SessionReceiver, error) {
	return s.h.c.ResumeSession(s.q.name, hd.Group, hd.SessionToken, &sluice.ReceiverOptions{LockDuration: lock})
}

// delete completes a message. A handle whose lock ended succeeds without
// deleting anything, as SQS documents for a handle that is not the
// message's latest.
func (s settler) delete(ctx context.Context, hd handle) error {
	m := &sluice.ReceivedMessage{LockToken: hd.Token}
	if hd.Group != "" {
		g, err := s.group(hd, 0)
		if err != nil {
			return err
		}
		if err := g.Complete(ctx, m); err != nil {
			return lockLostIsFine(err)
		}
		return s.handBack(ctx, g, hd)
	}
	r, err := s.receiver(ctx, hd, 0)
	if err != nil {
		return err
	}
	return lockLostIsFine(r.Complete(ctx, m))
}

func lockLostIsFine(err error) error {
	if errors.Is(err, sluice.ErrLockLost) || errors.Is(err, sluice.ErrSessionLockLost) {
		return nil
	}
	return err
}

// badHandle reports a settlement sluice refused for its arguments (a
// token no lock of this queue ever had) as the handle's fault.
func badHandle(hd handle, err error) error {
	if errors.Is(err, sluice.ErrInvalidArgument) {
		return receiptHandleIsInvalid(hd.String())
	}
	return err
}

// setVisibility makes a message visible again after seconds: at once (0)
// by abandoning it, otherwise by renewing its lock for that long (a FIFO
// message's by renewing its group's session, which holds all of the
// group's messages in flight).
func (s settler) setVisibility(ctx context.Context, hd handle, seconds int) error {
	m := &sluice.ReceivedMessage{LockToken: hd.Token}
	if hd.Group != "" {
		g, err := s.group(hd, lockFor(seconds))
		if err != nil {
			return err
		}
		if seconds > 0 {
			return notInflight(g.RenewSessionLock(ctx))
		}
		if err := g.Abandon(ctx, m, nil); err != nil {
			return notInflight(err)
		}
		return s.handBack(ctx, g, hd)
	}
	r, err := s.receiver(ctx, hd, lockFor(seconds))
	if err != nil {
		return err
	}
	if seconds == 0 {
		return notInflight(r.Abandon(ctx, m, nil))
	}
	return notInflight(r.RenewLock(ctx, m))
}

// notInflight reports a lost lock as SQS does.
func notInflight(err error) error {
	if errors.Is(err, sluice.ErrLockLost) || errors.Is(err, sluice.ErrSessionLockLost) {
		return messageNotInflight()
	}
	return err
}

// handBack releases a FIFO group's session once no message of the
// receive hd came from is in flight: the group's next messages may go to
// any receive then, as in SQS. A message of that receive is in flight
// while it is locked: no other receive's can be, while this session lock
// holds. Concurrent deletes of a receive's last messages may both
// release: the second finds the lock gone, which is fine.
func (s settler) handBack(ctx context.Context, g *sluice.SessionReceiver, hd handle) error {
	r, err := s.h.c.NewReceiver(s.q.name, nil)
	if err != nil {
		return err
	}
	for _, seq := range hd.Seqs {
		ms, err := r.Peek(ctx, 1, &sluice.PeekOptions{FromSequenceNumber: seq})
		if err != nil {
			return err
		}
		if len(ms) == 1 && ms[0].SequenceNumber == seq && ms[0].SessionID == hd.Group && ms[0].State == sluice.StateLocked {
			return nil // still in flight: its settlement hands the group back
		}
	}
	return lockLostIsFine(g.Close(ctx))
}

type deleteMessageInput struct {
	QueueUrl      string
	ReceiptHandle string
}

func (h *Handler) deleteMessage(ctx context.Context, rq *request, body []byte) (any, error) {
	var in deleteMessageInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Receive)
	if err != nil {
		return nil, err
	}
	hd, err := parseHandle(in.ReceiptHandle)
	if err != nil {
		return nil, err
	}
	if err := badHandle(hd, (settler{h, q}).delete(ctx, hd)); err != nil {
		h.forgetMissing(q.name, err)
		return nil, err
	}
	return empty{}, nil
}

type batchEntry struct {
	Id                string
	ReceiptHandle     string
	VisibilityTimeout *int
}

type batchInput struct {
	QueueUrl string
	Entries  []batchEntry
}

type batchSuccess struct {
	Id string
}

type batchOutput struct {
	Successful []batchSuccess
	Failed     []batchFailure
}

// batch checks a batch of receipt handles and returns its queue.
func (h *Handler) batch(ctx context.Context, rq *request, body []byte) (batchInput, queue, error) {
	var in batchInput
	if err := decode(body, &in); err != nil {
		return in, queue{}, err
	}
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.Id
	}
	if err := checkEntryIDs(ids); err != nil {
		return in, queue{}, err
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Receive)
	return in, q, err
}

// DeleteMessageBatch completes a standard queue's messages in one
// settlement, and others one by one.
func (h *Handler) deleteMessageBatch(ctx context.Context, rq *request, body []byte) (any, error) {
	in, q, err := h.batch(ctx, rq, body)
	if err != nil {
		return nil, err
	}
	s := settler{h, q}
	out := batchOutput{Successful: []batchSuccess{}, Failed: []batchFailure{}}
	var (
		msgs    []*sluice.ReceivedMessage
		entries []int
	)
	for i, e := range in.Entries {
		if e.VisibilityTimeout != nil {
			out.Failed = append(out.Failed, failure(e.Id, invalidParameter("a DeleteMessageBatch entry takes no VisibilityTimeout")))
			continue
		}
		hd, err := parseHandle(e.ReceiptHandle)
		if err != nil {
			out.Failed = append(out.Failed, failure(e.Id, err))
			continue
		}
		if hd.Source != "" || hd.Group != "" || slices.ContainsFunc(msgs, func(m *sluice.ReceivedMessage) bool { return m.LockToken == hd.Token }) {
			// One by one: a dead letter, a FIFO message, or a handle the
			// batch holds twice.
			if err := badHandle(hd, s.delete(ctx, hd)); err != nil {
				out.Failed = append(out.Failed, failure(e.Id, err))
			} else {
				out.Successful = append(out.Successful, batchSuccess{Id: e.Id})
			}
			continue
		}
		msgs, entries = append(msgs, &sluice.ReceivedMessage{LockToken: hd.Token}), append(entries, i)
	}
	if len(msgs) == 0 {
		return out, nil
	}
	r, err := h.c.NewReceiver(q.name, nil)
	if err != nil {
		return nil, err
	}
	failed := map[int]error{}
	if err := r.CompleteBatch(ctx, msgs); err != nil {
		var be *sluice.SettleBatchError
		if !errors.As(err, &be) {
			h.forgetMissing(q.name, err)
			return nil, err
		}
		for _, f := range be.Failed {
			if err := lockLostIsFine(f.Err); err != nil {
				failed[f.Index] = badHandle(handle{Token: msgs[f.Index].LockToken}, err)
			}
		}
	}
	for j, i := range entries {
		if err, ok := failed[j]; ok {
			out.Failed = append(out.Failed, failure(in.Entries[i].Id, err))
		} else {
			out.Successful = append(out.Successful, batchSuccess{Id: in.Entries[i].Id})
		}
	}
	return out, nil
}

type changeVisibilityInput struct {
	QueueUrl          string
	ReceiptHandle     string
	VisibilityTimeout *int
}

func (h *Handler) changeMessageVisibility(ctx context.Context, rq *request, body []byte) (any, error) {
	var in changeVisibilityInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Receive)
	if err != nil {
		return nil, err
	}
	if err := h.changeVisibility(ctx, q, in.ReceiptHandle, in.VisibilityTimeout); err != nil {
		h.forgetMissing(q.name, err)
		return nil, err
	}
	return empty{}, nil
}

// changeVisibility checks a ChangeMessageVisibility's arguments and
// applies it.
func (h *Handler) changeVisibility(ctx context.Context, q queue, handle string, seconds *int) error {
	hd, err := parseHandle(handle)
	if err != nil {
		return err
	}
	if seconds == nil {
		return missingParameter("VisibilityTimeout")
	}
	n, err := intParam("VisibilityTimeout", seconds, 0, 0, maxVisibility)
	if err != nil {
		return err
	}
	return badHandle(hd, settler{h, q}.setVisibility(ctx, hd, n))
}

func (h *Handler) changeMessageVisibilityBatch(ctx context.Context, rq *request, body []byte) (any, error) {
	in, q, err := h.batch(ctx, rq, body)
	if err != nil {
		return nil, err
	}
	out := batchOutput{Successful: []batchSuccess{}, Failed: []batchFailure{}}
	for _, e := range in.Entries {
		if err := h.changeVisibility(ctx, q, e.ReceiptHandle, e.VisibilityTimeout); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			out.Failed = append(out.Failed, failure(e.Id, err))
			continue
		}
		out.Successful = append(out.Successful, batchSuccess{Id: e.Id})
	}
	return out, nil
}
