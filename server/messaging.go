package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
)

// messaging serves MessagingService. It keeps nothing between calls: a
// message's lock and a session's travel in their lock tokens, so any
// node settles what another received.
type messaging struct{ s *Server }

// settler settles messages: an entity's receiver, or a held session's.
type settler interface {
	Complete(ctx context.Context, m *sluice.ReceivedMessage) error
	CompleteBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error
	Abandon(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.AbandonOptions) error
	DeadLetter(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.DeadLetterOptions) error
	Defer(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.DeferOptions) error
	Receive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error)
	TryReceive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error)
	ReceiveDeferred(ctx context.Context, seqs ...int64) ([]*sluice.ReceivedMessage, error)
}

// receiver returns the settler of a call: the session's when it names
// one, else the entity's (or its dead-letter queue's) in mode.
func (h *messaging) receiver(entity string, mode sluicev1.ReceiveMode, sub sluicev1.SubQueue, session *sluicev1.SessionLock,
	lock *durationpb.Duration) (settler, error) {
	m, err := apiconv.Mode(mode)
	if err != nil {
		return nil, h.s.fail("receive", err)
	}
	q, err := apiconv.SubQueue(sub)
	if err != nil {
		return nil, h.s.fail("receive", err)
	}
	opts := &sluice.ReceiverOptions{Mode: m, SubQueue: q, LockDuration: apiconv.Duration(lock)}
	if session != nil {
		if q != sluice.SubQueueNone {
			return nil, apierr.Invalid("a session has no sub-queue")
		}
		r, err := h.s.c.ResumeSession(entity, session.SessionId, session.LockToken, opts)
		if err != nil {
			return nil, h.s.fail("resume session", err)
		}
		return r, nil
	}
	r, err := h.s.c.NewReceiver(entity, opts)
	if err != nil {
		return nil, h.s.fail("receive", err)
	}
	return r, nil
}

// session returns the held session a call names; lock, when set, is
// how long a renewal of it extends its lock.
func (h *messaging) session(entity string, session *sluicev1.SessionLock, lock *durationpb.Duration) (*sluice.SessionReceiver, error) {
	if session == nil {
		return nil, apierr.Invalid("no session: accept one first (AcceptSession)")
	}
	r, err := h.s.c.ResumeSession(entity, session.SessionId, session.LockToken, &sluice.ReceiverOptions{LockDuration: apiconv.Duration(lock)})
	if err != nil {
		return nil, h.s.fail("resume session", err)
	}
	return r, nil
}

// waitEnded reports whether err is only the end of a wait (wctx, of the
// call's ctx), not a failure of its own: an invalid call that the wait
// cut short is still refused.
func waitEnded(ctx, wctx context.Context, err error) bool {
	return err != nil && wctx.Err() != nil && ctx.Err() == nil &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

func (h *messaging) Send(ctx context.Context, req *sluicev1.SendRequest) (*sluicev1.SendResponse, error) {
	if err := h.s.authorize(ctx, Send, req.Entity); err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, apierr.Invalid("no messages to send")
	}
	snd, err := h.s.c.NewSender(req.Entity)
	if err != nil {
		return nil, h.s.fail("send", err)
	}
	msgs := make([]*sluice.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = apiconv.FromMessage(m)
	}
	seqs, err := snd.SendBatch(ctx, msgs)
	if err != nil {
		return nil, h.s.fail("send", err)
	}
	return &sluicev1.SendResponse{SequenceNumbers: seqs}, nil
}

func (h *messaging) CancelScheduled(ctx context.Context, req *sluicev1.CancelScheduledRequest) (*sluicev1.CancelScheduledResponse, error) {
	if err := h.s.authorize(ctx, Send, req.Entity); err != nil {
		return nil, err
	}
	snd, err := h.s.c.NewSender(req.Entity)
	if err != nil {
		return nil, h.s.fail("cancel scheduled", err)
	}
	if err := snd.CancelScheduled(ctx, req.SequenceNumbers...); err != nil {
		return nil, h.s.fail("cancel scheduled", err)
	}
	return &sluicev1.CancelScheduledResponse{}, nil
}

func (h *messaging) Receive(ctx context.Context, req *sluicev1.ReceiveRequest) (*sluicev1.ReceiveResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	if err := checkWait("receive", req.MaxWait); err != nil {
		return nil, err
	}
	r, err := h.receiver(req.Entity, req.Mode, req.SubQueue, req.Session, req.LockDuration)
	if err != nil {
		return nil, err
	}
	max := int(req.MaxMessages)
	if max == 0 {
		max = 1
	}
	var msgs []*sluice.ReceivedMessage
	if wait := apiconv.Duration(req.MaxWait); wait > 0 {
		wctx, cancel, werr := h.s.waitContext(ctx, wait)
		if werr != nil {
			return nil, werr
		}
		msgs, err = r.Receive(wctx, max)
		if waitEnded(ctx, wctx, err) {
			err = nil // the wait ended with nothing to receive
		}
		cancel()
	} else {
		msgs, err = r.TryReceive(ctx, max)
	}
	if err != nil {
		return nil, h.s.fail("receive", err)
	}
	return &sluicev1.ReceiveResponse{Messages: apiconv.ReceivedList(msgs)}, nil
}

func (h *messaging) ReceiveDeferred(ctx context.Context, req *sluicev1.ReceiveDeferredRequest) (*sluicev1.ReceiveDeferredResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	r, err := h.receiver(req.Entity, req.Mode, sluicev1.SubQueue_SUB_QUEUE_UNSPECIFIED, req.Session, req.LockDuration)
	if err != nil {
		return nil, err
	}
	msgs, err := r.ReceiveDeferred(ctx, req.SequenceNumbers...)
	if err != nil {
		return nil, h.s.fail("receive deferred", err)
	}
	return &sluicev1.ReceiveDeferredResponse{Messages: apiconv.ReceivedList(msgs)}, nil
}

func (h *messaging) Peek(ctx context.Context, req *sluicev1.PeekRequest) (*sluicev1.PeekResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	q, err := apiconv.SubQueue(req.SubQueue)
	if err != nil {
		return nil, h.s.fail("peek", err)
	}
	r, err := h.s.c.NewReceiver(req.Entity, &sluice.ReceiverOptions{SubQueue: q})
	if err != nil {
		return nil, h.s.fail("peek", err)
	}
	max := int(req.MaxMessages)
	if max == 0 {
		max = 1
	}
	from := req.FromSequenceNumber
	if from == 0 {
		from = 1
	}
	if req.Filter != nil {
		f, err := apiconv.Filter(req.Filter)
		if err != nil {
			return nil, h.s.fail("peek", err)
		}
		page, err := r.Browse(ctx, max, &sluice.BrowseOptions{FromSequenceNumber: from, Filter: f})
		if err != nil {
			return nil, h.s.fail("peek", err)
		}
		return &sluicev1.PeekResponse{Messages: apiconv.ReceivedList(page.Messages), NextSequenceNumber: page.Next}, nil
	}
	msgs, err := r.Peek(ctx, max, &sluice.PeekOptions{FromSequenceNumber: from})
	if err != nil {
		return nil, h.s.fail("peek", err)
	}
	res := &sluicev1.PeekResponse{Messages: apiconv.ReceivedList(msgs)}
	if len(msgs) == max { // a page short of max is the last there is
		res.NextSequenceNumber = msgs[len(msgs)-1].SequenceNumber + 1
	}
	return res, nil
}

// settle runs a settlement (action, as errors name it) on the message a
// lock token names.
func (h *messaging) settle(ctx context.Context, action, entity string, sub sluicev1.SubQueue, session *sluicev1.SessionLock, token string,
	do func(settler, *sluice.ReceivedMessage) error) error {
	if err := h.s.authorize(ctx, Receive, entity); err != nil {
		return err
	}
	r, err := h.receiver(entity, sluicev1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK, sub, session, nil)
	if err != nil {
		return err
	}
	if err := do(r, &sluice.ReceivedMessage{LockToken: token}); err != nil {
		return h.s.fail(action, err)
	}
	return nil
}

func (h *messaging) Complete(ctx context.Context, req *sluicev1.CompleteRequest) (*sluicev1.CompleteResponse, error) {
	err := h.settle(ctx, "complete", req.Entity, req.SubQueue, req.Session, req.LockToken, func(r settler, m *sluice.ReceivedMessage) error {
		return r.Complete(ctx, m)
	})
	if err != nil {
		return nil, err
	}
	return &sluicev1.CompleteResponse{}, nil
}

func (h *messaging) CompleteBatch(ctx context.Context, req *sluicev1.CompleteBatchRequest) (*sluicev1.CompleteBatchResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	if len(req.LockTokens) == 0 {
		return nil, apierr.Invalid("no lock tokens to complete")
	}
	r, err := h.receiver(req.Entity, sluicev1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK, req.SubQueue, req.Session, nil)
	if err != nil {
		return nil, err
	}
	msgs := make([]*sluice.ReceivedMessage, len(req.LockTokens))
	for i, token := range req.LockTokens {
		msgs[i] = &sluice.ReceivedMessage{LockToken: token}
	}
	err = r.CompleteBatch(ctx, msgs)
	var be *sluice.SettleBatchError
	if err != nil && !errors.As(err, &be) {
		return nil, h.s.fail("complete batch", err)
	}
	res := &sluicev1.CompleteBatchResponse{}
	if be != nil {
		for _, f := range be.Failed {
			res.Failures = append(res.Failures, &sluicev1.SettleFailure{Index: int32(f.Index), LockToken: req.LockTokens[f.Index],
				Reason: apierr.Reason(f.Err), Message: f.Err.Error()})
		}
	}
	return res, nil
}

func (h *messaging) Abandon(ctx context.Context, req *sluicev1.AbandonRequest) (*sluicev1.AbandonResponse, error) {
	err := h.settle(ctx, "abandon", req.Entity, req.SubQueue, req.Session, req.LockToken, func(r settler, m *sluice.ReceivedMessage) error {
		return r.Abandon(ctx, m, &sluice.AbandonOptions{PropertiesToModify: req.PropertiesToModify, Delay: apiconv.Duration(req.Delay)})
	})
	if err != nil {
		return nil, err
	}
	return &sluicev1.AbandonResponse{}, nil
}

func (h *messaging) Release(ctx context.Context, req *sluicev1.ReleaseRequest) (*sluicev1.ReleaseResponse, error) {
	err := h.settle(ctx, "release", req.Entity, req.SubQueue, nil, req.LockToken, func(r settler, m *sluice.ReceivedMessage) error {
		return r.(*sluice.Receiver).Release(ctx, m) // not a session's: settle was given none
	})
	if err != nil {
		return nil, err
	}
	return &sluicev1.ReleaseResponse{}, nil
}

func (h *messaging) DeadLetter(ctx context.Context, req *sluicev1.DeadLetterRequest) (*sluicev1.DeadLetterResponse, error) {
	err := h.settle(ctx, "dead_letter", req.Entity, sluicev1.SubQueue_SUB_QUEUE_UNSPECIFIED, req.Session, req.LockToken,
		func(r settler, m *sluice.ReceivedMessage) error {
			return r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: req.Reason, Description: req.Description,
				PropertiesToModify: req.PropertiesToModify})
		})
	if err != nil {
		return nil, err
	}
	return &sluicev1.DeadLetterResponse{}, nil
}

func (h *messaging) Defer(ctx context.Context, req *sluicev1.DeferRequest) (*sluicev1.DeferResponse, error) {
	err := h.settle(ctx, "defer", req.Entity, sluicev1.SubQueue_SUB_QUEUE_UNSPECIFIED, req.Session, req.LockToken,
		func(r settler, m *sluice.ReceivedMessage) error {
			return r.Defer(ctx, m, &sluice.DeferOptions{PropertiesToModify: req.PropertiesToModify})
		})
	if err != nil {
		return nil, err
	}
	return &sluicev1.DeferResponse{}, nil
}

func (h *messaging) RenewLock(ctx context.Context, req *sluicev1.RenewLockRequest) (*sluicev1.RenewLockResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	q, err := apiconv.SubQueue(req.SubQueue)
	if err != nil {
		return nil, h.s.fail("renew lock", err)
	}
	r, err := h.s.c.NewReceiver(req.Entity, &sluice.ReceiverOptions{SubQueue: q, LockDuration: apiconv.Duration(req.LockDuration)})
	if err != nil {
		return nil, h.s.fail("renew lock", err)
	}
	m := &sluice.ReceivedMessage{LockToken: req.LockToken}
	if err := r.RenewLock(ctx, m); err != nil {
		return nil, h.s.fail("renew lock", err)
	}
	return &sluicev1.RenewLockResponse{LockedUntil: apiconv.Timestamp(m.LockedUntil)}, nil
}

func (h *messaging) AcceptSession(ctx context.Context, req *sluicev1.AcceptSessionRequest) (*sluicev1.AcceptSessionResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	if err := checkWait("accept session", req.MaxWait); err != nil {
		return nil, err
	}
	var (
		r    *sluice.SessionReceiver
		err  error
		opts = &sluice.ReceiverOptions{LockDuration: apiconv.Duration(req.LockDuration)}
	)
	if req.SessionId != "" {
		r, err = h.s.c.AcceptSession(ctx, req.Entity, req.SessionId, opts)
	} else {
		wctx, cancel, werr := h.s.waitContext(ctx, apiconv.Duration(req.MaxWait))
		if werr != nil {
			return nil, werr
		}
		r, err = h.s.c.AcceptNextSession(wctx, req.Entity, opts)
		if waitEnded(ctx, wctx, err) {
			cancel()
			return &sluicev1.AcceptSessionResponse{}, nil // no session free within the wait
		}
		cancel()
	}
	if err != nil {
		return nil, h.s.fail("accept session", err)
	}
	return &sluicev1.AcceptSessionResponse{Session: apiconv.SessionLock(r)}, nil
}

func (h *messaging) RenewSessionLock(ctx context.Context, req *sluicev1.RenewSessionLockRequest) (*sluicev1.RenewSessionLockResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	r, err := h.session(req.Entity, req.Session, req.LockDuration)
	if err != nil {
		return nil, err
	}
	if err := r.RenewSessionLock(ctx); err != nil {
		return nil, h.s.fail("renew session lock", err)
	}
	return &sluicev1.RenewSessionLockResponse{LockedUntil: apiconv.Timestamp(r.LockedUntil())}, nil
}

func (h *messaging) GetSessionState(ctx context.Context, req *sluicev1.GetSessionStateRequest) (*sluicev1.GetSessionStateResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	r, err := h.session(req.Entity, req.Session, nil)
	if err != nil {
		return nil, err
	}
	st, err := r.SessionState(ctx)
	if err != nil {
		return nil, h.s.fail("session state", err)
	}
	return &sluicev1.GetSessionStateResponse{State: st}, nil
}

func (h *messaging) SetSessionState(ctx context.Context, req *sluicev1.SetSessionStateRequest) (*sluicev1.SetSessionStateResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	r, err := h.session(req.Entity, req.Session, nil)
	if err != nil {
		return nil, err
	}
	var st []byte
	if len(req.State) > 0 {
		st = req.State
	}
	if err := r.SetSessionState(ctx, st); err != nil {
		return nil, h.s.fail("set session state", err)
	}
	return &sluicev1.SetSessionStateResponse{}, nil
}

func (h *messaging) CloseSession(ctx context.Context, req *sluicev1.CloseSessionRequest) (*sluicev1.CloseSessionResponse, error) {
	if err := h.s.authorize(ctx, Receive, req.Entity); err != nil {
		return nil, err
	}
	r, err := h.session(req.Entity, req.Session, nil)
	if err != nil {
		return nil, err
	}
	// A lock token that holds nothing (another queue's, one that ended)
	// is refused rather than closed for nothing, as every other session
	// call refuses it.
	held, err := r.Held(ctx)
	if err == nil && !held {
		err = fmt.Errorf("sluice: close session %q of %q: %w", req.Session.SessionId, req.Entity, sluice.ErrSessionLockLost)
	}
	if err != nil {
		return nil, h.s.fail("close session", err)
	}
	if err := r.Close(ctx); err != nil {
		return nil, h.s.fail("close session", err)
	}
	return &sluicev1.CloseSessionResponse{}, nil
}

func (h *messaging) ResubmitDeadLetters(ctx context.Context, req *sluicev1.ResubmitDeadLettersRequest, stream sluicev1connect.MessagingServiceResubmitDeadLettersServerStream) error {
	if err := h.s.authorize(ctx, Manage, req.Entity); err != nil {
		return err
	}
	var sendErr error
	sent := false
	report := func(done, total int) {
		if sendErr == nil {
			sendErr = stream.Send(&sluicev1.ResubmitDeadLettersResponse{Done: int64(done), Total: int64(total)})
			sent = true
		}
	}
	n, err := h.s.c.ResubmitDeadLetters(ctx, req.Entity, &sluice.ResubmitOptions{SequenceNumbers: req.SequenceNumbers, Progress: report})
	if err != nil {
		return h.s.fail("resubmit dead letters", err)
	}
	if !sent {
		report(n, n)
	}
	return sendErr
}

func (h *messaging) PurgeDeadLetters(ctx context.Context, req *sluicev1.PurgeDeadLettersRequest) (*sluicev1.PurgeDeadLettersResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Entity); err != nil {
		return nil, err
	}
	var n int64
	var err error
	if len(req.SequenceNumbers) > 0 {
		n, err = h.s.c.DeleteDeadLetters(ctx, req.Entity, req.SequenceNumbers...)
	} else {
		n, err = h.s.c.PurgeDeadLetters(ctx, req.Entity)
	}
	if err != nil {
		return nil, h.s.fail("purge dead letters", err)
	}
	return &sluicev1.PurgeDeadLettersResponse{Purged: n}, nil
}

func (h *messaging) ListDeadLetterReasons(ctx context.Context, req *sluicev1.ListDeadLetterReasonsRequest) (*sluicev1.ListDeadLetterReasonsResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Entity); err != nil {
		return nil, err
	}
	byReason, err := h.s.c.DeadLetterReasons(ctx, req.Entity)
	if err != nil {
		return nil, h.s.fail("dead-letter reasons", err)
	}
	return &sluicev1.ListDeadLetterReasonsResponse{Reasons: apiconv.ReasonCounts(byReason)}, nil
}

func (h *messaging) DeleteMessages(ctx context.Context, req *sluicev1.DeleteMessagesRequest) (*sluicev1.DeleteMessagesResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Entity); err != nil {
		return nil, err
	}
	n, err := h.s.c.DeleteMessages(ctx, req.Entity, &sluice.DeleteOptions{SequenceNumbers: req.SequenceNumbers,
		Max: int(req.MaxMessages), EnqueuedBefore: apiconv.Time(req.EnqueuedBefore)})
	if err != nil {
		return nil, h.s.fail("delete messages", err)
	}
	return &sluicev1.DeleteMessagesResponse{Deleted: n}, nil
}

func (h *messaging) PurgeMessages(ctx context.Context, req *sluicev1.PurgeMessagesRequest) (*sluicev1.PurgeMessagesResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Entity); err != nil {
		return nil, err
	}
	n, err := h.s.c.PurgeMessages(ctx, req.Entity, apiconv.Time(req.EnqueuedBefore))
	if err != nil {
		return nil, h.s.fail("purge messages", err)
	}
	return &sluicev1.PurgeMessagesResponse{Purged: n}, nil
}

// cluster serves ClusterService.
type cluster struct{ s *Server }

func (h *cluster) GetClusterStatus(ctx context.Context, _ *sluicev1.GetClusterStatusRequest) (*sluicev1.GetClusterStatusResponse, error) {
	if err := h.s.authorize(ctx, Manage, ClusterEntity); err != nil {
		return nil, err
	}
	st, err := h.s.c.ClusterStatus(ctx)
	if err != nil {
		return nil, h.s.fail("cluster status", err)
	}
	return apiconv.ClusterStatus(st), nil
}

// checkWait refuses a negative max_wait (the duration rule, see
// sluice.Forever); a longer one than MaxReceiveWait is capped, not
// refused: it is the most a caller is willing to wait.
func checkWait(op string, d *durationpb.Duration) error {
	if wait := apiconv.Duration(d); wait < 0 {
		return apierr.Invalid(fmt.Sprintf("%s: max wait %v: must not be negative", op, wait))
	}
	return nil
}
