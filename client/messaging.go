package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
)

// Sender sends to one queue or topic.
type Sender struct {
	c      *Client
	entity string
}

// NewSender returns a sender for a queue or topic.
func (c *Client) NewSender(entity string) (*Sender, error) {
	if entity == "" {
		return nil, fmt.Errorf("sluice: new sender: empty entity name: %w", sluice.ErrInvalidName)
	}
	return &Sender{c: c, entity: entity}, nil
}

// Send sends one message and returns its sequence number.
func (s *Sender) Send(ctx context.Context, m *sluice.Message) (int64, error) {
	seqs, err := s.SendBatch(ctx, []*sluice.Message{m})
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// SendBatch sends messages atomically: all of them or none.
func (s *Sender) SendBatch(ctx context.Context, msgs []*sluice.Message) ([]int64, error) {
	return s.c.traceSend(ctx, s.entity, msgs, s.sendBatch)
}

func (s *Sender) sendBatch(ctx context.Context, msgs []*sluice.Message) ([]int64, error) {
	req := &sluicev1.SendRequest{Entity: s.entity, Messages: make([]*sluicev1.Message, len(msgs))}
	for i, m := range msgs {
		if m == nil {
			return nil, fmt.Errorf("sluice: send: message %d is nil: %w", i, sluice.ErrInvalidArgument)
		}
		req.Messages[i] = apiconv.Message(m)
	}
	res, err := call(ctx, s.c.messaging.Send, req)
	if err != nil {
		return nil, err
	}
	return res.SequenceNumbers, nil
}

// CancelScheduled deletes scheduled messages not yet due.
func (s *Sender) CancelScheduled(ctx context.Context, seqs ...int64) error {
	_, err := call(ctx, s.c.messaging.CancelScheduled, &sluicev1.CancelScheduledRequest{Entity: s.entity, SequenceNumbers: seqs})
	return err
}

// Receiver receives and settles the messages of one queue or
// subscription (or its dead-letter queue).
type Receiver struct {
	c       *Client
	entity  string
	mode    sluicev1.ReceiveMode
	sub     sluicev1.SubQueue
	session *sluicev1.SessionLock // a SessionReceiver's
	// lock is ReceiverOptions.LockDuration, sent with each call that
	// locks (0: the entity's).
	lock time.Duration

	mu       sync.Mutex
	nextPeek int64
}

// NewReceiver returns a receiver; nil opts receive in PeekLock mode.
func (c *Client) NewReceiver(entity string, opts *sluice.ReceiverOptions) (*Receiver, error) {
	if entity == "" {
		return nil, fmt.Errorf("sluice: new receiver: empty entity name: %w", sluice.ErrInvalidName)
	}
	var o sluice.ReceiverOptions
	if opts != nil {
		o = *opts
	}
	if o.Mode != sluice.PeekLock && o.Mode != sluice.ReceiveAndDelete {
		return nil, fmt.Errorf("sluice: new receiver: unknown receive mode %d: %w", o.Mode, sluice.ErrInvalidArgument)
	}
	if o.SubQueue != sluice.SubQueueNone && o.SubQueue != sluice.SubQueueDeadLetter {
		return nil, fmt.Errorf("sluice: new receiver: unknown sub-queue %d: %w", o.SubQueue, sluice.ErrInvalidArgument)
	}
	if d := o.LockDuration; d < 0 {
		return nil, fmt.Errorf("sluice: new receiver: lock duration %v is negative: must be between 1ms and %v (0: the entity's): %w",
			d, sluice.MaxReceiverLockDuration, sluice.ErrInvalidArgument)
	} else if d != 0 && (d < time.Millisecond || d > sluice.MaxReceiverLockDuration) {
		return nil, fmt.Errorf("sluice: new receiver: lock duration %v: must be between 1ms and %v (0: the entity's): %w",
			d, sluice.MaxReceiverLockDuration, sluice.ErrInvalidArgument)
	}
	return &Receiver{c: c, entity: entity, mode: apiconv.WireMode(o.Mode), sub: apiconv.WireSubQueue(o.SubQueue), lock: o.LockDuration}, nil
}

// Entity returns the canonical name (sluice.CanonicalName) of the queue
// or subscription path the receiver receives from, as the library's
// Receiver.Entity does.
func (r *Receiver) Entity() string { return sluice.CanonicalName(r.entity) }

// Receive waits until messages are available or ctx ends, and returns at
// once with up to max of them. When ctx ends first it returns ctx's
// error.
func (r *Receiver) Receive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error) {
	return r.traceReceive(ctx, func(ctx context.Context) ([]*sluice.ReceivedMessage, error) { return r.waitReceive(ctx, max) })
}

// waitReceive does Receive's work.
func (r *Receiver) waitReceive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error) {
	for {
		wait, err := waitFor(ctx)
		if err != nil {
			return nil, fmt.Errorf("sluice: receive: %w", err)
		}
		msgs, err := r.receive(ctx, max, wait)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("sluice: receive: %w", ctx.Err())
		}
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sluice: receive: %w", err)
		}
	}
}

// TryReceive returns at once with up to max of the messages available
// now: none when there are none.
func (r *Receiver) TryReceive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error) {
	return r.traceReceive(ctx, func(ctx context.Context) ([]*sluice.ReceivedMessage, error) { return r.receive(ctx, max, 0) })
}

func (r *Receiver) receive(ctx context.Context, max int, wait time.Duration) ([]*sluice.ReceivedMessage, error) {
	res, err := call(ctx, r.c.messaging.Receive, &sluicev1.ReceiveRequest{Entity: r.entity, MaxMessages: int32(max),
		MaxWait: apiconv.DurationPB(wait), Mode: r.mode, SubQueue: r.sub, Session: r.session, LockDuration: apiconv.DurationPB(r.lock)})
	if err != nil {
		return nil, err
	}
	return fromWire(res.Messages), nil
}

func fromWire(ms []*sluicev1.ReceivedMessage) []*sluice.ReceivedMessage {
	out := make([]*sluice.ReceivedMessage, len(ms))
	for i, m := range ms {
		out[i] = apiconv.FromReceived(m)
	}
	return out
}

// ReceiveDeferred receives deferred messages by sequence number.
func (r *Receiver) ReceiveDeferred(ctx context.Context, seqs ...int64) ([]*sluice.ReceivedMessage, error) {
	return r.traceReceive(ctx, func(ctx context.Context) ([]*sluice.ReceivedMessage, error) {
		res, err := call(ctx, r.c.messaging.ReceiveDeferred, &sluicev1.ReceiveDeferredRequest{Entity: r.entity,
			SequenceNumbers: seqs, Mode: r.mode, Session: r.session, LockDuration: apiconv.DurationPB(r.lock)})
		if err != nil {
			return nil, err
		}
		return fromWire(res.Messages), nil
	})
}

// Peek returns up to max messages in sequence order without locking
// them; nil opts continue after the last peek.
func (r *Receiver) Peek(ctx context.Context, max int, opts *sluice.PeekOptions) ([]*sluice.ReceivedMessage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	from := r.nextPeek
	if opts != nil && opts.FromSequenceNumber > 0 {
		from = opts.FromSequenceNumber
	}
	res, err := call(ctx, r.c.messaging.Peek, &sluicev1.PeekRequest{Entity: r.entity, MaxMessages: int32(max),
		FromSequenceNumber: from, SubQueue: r.sub})
	if err != nil {
		return nil, err
	}
	out := fromWire(res.Messages)
	if len(out) > 0 {
		r.nextPeek = out[len(out)-1].SequenceNumber + 1
	}
	return out, nil
}

// Browse searches the entity's messages (or dead letters) as the
// library's Receiver.Browse does, a bounded page at a time.
func (r *Receiver) Browse(ctx context.Context, max int, opts *sluice.BrowseOptions) (sluice.BrowsePage, error) {
	if opts == nil {
		opts = &sluice.BrowseOptions{}
	}
	if max < 1 || max > sluice.MaxPeek {
		return sluice.BrowsePage{}, fmt.Errorf("sluice: browse: max %d: must be between 1 and %d: %w", max, sluice.MaxPeek, sluice.ErrInvalidArgument)
	}
	res, err := call(ctx, r.c.messaging.Peek, &sluicev1.PeekRequest{Entity: r.entity, MaxMessages: int32(max),
		FromSequenceNumber: opts.FromSequenceNumber, SubQueue: r.sub, Filter: apiconv.WireFilter(opts.Filter)})
	if err != nil {
		return sluice.BrowsePage{}, err
	}
	return sluice.BrowsePage{Messages: fromWire(res.Messages), Next: res.NextSequenceNumber}, nil
}

func lockToken(m *sluice.ReceivedMessage) string {
	if m == nil {
		return ""
	}
	return m.LockToken
}

// Complete removes a message received in PeekLock mode.
func (r *Receiver) Complete(ctx context.Context, m *sluice.ReceivedMessage) error {
	return r.traceSettle(ctx, sluice.SettleComplete, []*sluice.ReceivedMessage{m}, func(ctx context.Context) error {
		_, err := call(ctx, r.c.messaging.Complete, &sluicev1.CompleteRequest{Entity: r.entity, SubQueue: r.sub,
			LockToken: lockToken(m), Session: r.session})
		return err
	})
}

// CompleteBatch removes messages received in PeekLock mode in one call,
// and one transaction on the server. As the library's, it completes every
// message whose lock holds and returns a *sluice.SettleBatchError that
// lists the others (errors.Is(err, sluice.ErrLockLost)); an invalid batch
// fails with sluice.ErrInvalidArgument and completes nothing.
func (r *Receiver) CompleteBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error {
	return r.traceSettle(ctx, sluice.SettleComplete, msgs, func(ctx context.Context) error { return r.completeBatch(ctx, msgs) })
}

func (r *Receiver) completeBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error {
	const op = "complete batch"
	if len(msgs) == 0 {
		return nil
	}
	req := &sluicev1.CompleteBatchRequest{Entity: r.entity, SubQueue: r.sub, Session: r.session, LockTokens: make([]string, len(msgs))}
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("sluice: %s: #%d: nil message: %w", op, i, sluice.ErrInvalidArgument)
		}
		req.LockTokens[i] = m.LockToken
	}
	res, err := call(ctx, r.c.messaging.CompleteBatch, req)
	if err != nil || len(res.Failures) == 0 {
		return err
	}
	be := &sluice.SettleBatchError{Op: op, Total: len(msgs)}
	for _, f := range res.Failures {
		i := int(f.Index)
		if i < 0 || i >= len(msgs) || f.LockToken != req.LockTokens[i] {
			return fmt.Errorf("sluice: %s: the server reported a failure of #%d (lock token %q), not one of the batch's", op, f.Index, f.LockToken)
		}
		be.Failed = append(be.Failed, sluice.SettleFailure{Index: i, Message: msgs[i], Err: apierr.FromReason(f.Reason, f.Message)})
	}
	return be
}

// Abandon makes a message available again, at once or after opts.Delay
// (see sluice.AbandonOptions).
func (r *Receiver) Abandon(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.AbandonOptions) error {
	return r.traceSettle(ctx, sluice.SettleAbandon, []*sluice.ReceivedMessage{m}, func(ctx context.Context) error {
		req := &sluicev1.AbandonRequest{Entity: r.entity, SubQueue: r.sub, LockToken: lockToken(m), Session: r.session}
		if opts != nil {
			req.PropertiesToModify, req.Delay = opts.PropertiesToModify, apiconv.DurationPB(opts.Delay)
		}
		_, err := call(ctx, r.c.messaging.Abandon, req)
		return err
	})
}

// Release hands a message back at once without counting a delivery, as
// sluice.Receiver.Release does: for a consumer that received ahead of
// what it handles and will not handle m.
func (r *Receiver) Release(ctx context.Context, m *sluice.ReceivedMessage) error {
	return r.traceSettle(ctx, sluice.SettleAbandon, []*sluice.ReceivedMessage{m}, func(ctx context.Context) error {
		_, err := call(ctx, r.c.messaging.Release, &sluicev1.ReleaseRequest{Entity: r.entity, SubQueue: r.sub, LockToken: lockToken(m)})
		return err
	})
}

// DeadLetter moves a message to the dead-letter queue.
func (r *Receiver) DeadLetter(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.DeadLetterOptions) error {
	return r.traceSettle(ctx, sluice.SettleDeadLetter, []*sluice.ReceivedMessage{m}, func(ctx context.Context) error {
		if r.sub != sluicev1.SubQueue_SUB_QUEUE_UNSPECIFIED {
			return fmt.Errorf("sluice: dead-letter: a dead letter can only be completed or abandoned: %w", sluice.ErrInvalidArgument)
		}
		req := &sluicev1.DeadLetterRequest{Entity: r.entity, LockToken: lockToken(m), Session: r.session}
		if opts != nil {
			req.Reason, req.Description, req.PropertiesToModify = opts.Reason, opts.Description, opts.PropertiesToModify
		}
		_, err := call(ctx, r.c.messaging.DeadLetter, req)
		return err
	})
}

// Defer sets a message aside, to receive by sequence number.
func (r *Receiver) Defer(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.DeferOptions) error {
	return r.traceSettle(ctx, sluice.SettleDefer, []*sluice.ReceivedMessage{m}, func(ctx context.Context) error {
		if r.sub != sluicev1.SubQueue_SUB_QUEUE_UNSPECIFIED {
			return fmt.Errorf("sluice: defer: a dead letter can only be completed or abandoned: %w", sluice.ErrInvalidArgument)
		}
		req := &sluicev1.DeferRequest{Entity: r.entity, LockToken: lockToken(m), Session: r.session}
		if opts != nil {
			req.PropertiesToModify = opts.PropertiesToModify
		}
		_, err := call(ctx, r.c.messaging.Defer, req)
		return err
	})
}

// RenewLock extends a message's lock and updates m.LockedUntil.
func (r *Receiver) RenewLock(ctx context.Context, m *sluice.ReceivedMessage) error {
	if r.c.instr == nil {
		return r.renewLock(ctx, m)
	}
	return r.c.trace(ctx, &sluice.Operation{Kind: sluice.OperationRenewLock, Entity: sluice.CanonicalName(r.entity), SubQueue: r.subQueue(),
		Received: []*sluice.ReceivedMessage{m}}, func(ctx context.Context) error { return r.renewLock(ctx, m) })
}

// renewLock does RenewLock's work.
func (r *Receiver) renewLock(ctx context.Context, m *sluice.ReceivedMessage) error {
	res, err := call(ctx, r.c.messaging.RenewLock, &sluicev1.RenewLockRequest{Entity: r.entity, SubQueue: r.sub, LockToken: lockToken(m),
		LockDuration: apiconv.DurationPB(r.lock)})
	if err != nil {
		return err
	}
	m.LockedUntil = apiconv.Time(res.LockedUntil)
	return nil
}

// SessionReceiver receives and settles the messages of one session it
// holds locked.
type SessionReceiver struct {
	r *Receiver

	mu          sync.Mutex
	lockedUntil time.Time
}

// AcceptSession locks a named session of a queue that requires sessions.
func (c *Client) AcceptSession(ctx context.Context, queue, sessionID string, opts *sluice.ReceiverOptions) (*SessionReceiver, error) {
	if sessionID == "" {
		return nil, fmt.Errorf("sluice: accept session: empty session id (AcceptNextSession accepts any): %w", sluice.ErrInvalidArgument)
	}
	return c.acceptSession(ctx, queue, sessionID, opts, 0)
}

// AcceptNextSession waits until a session of the queue has messages and
// no holder, and locks it; it returns ctx's error if ctx ends first. It
// tries once even when ctx has ended already.
func (c *Client) AcceptNextSession(ctx context.Context, queue string, opts *sluice.ReceiverOptions) (*SessionReceiver, error) {
	for {
		wait, err := waitFor(ctx)
		if err != nil {
			// As the library does, a context without time left still
			// takes a session that is free now.
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			s, terr := c.acceptSession(tctx, queue, "", opts, 0)
			cancel()
			if terr != nil || s != nil {
				return s, terr
			}
			return nil, fmt.Errorf("sluice: accept next session: %w", err)
		}
		s, err := c.acceptSession(ctx, queue, "", opts, wait)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("sluice: accept next session: %w", ctx.Err())
		}
		if err != nil || s != nil {
			return s, err
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sluice: accept next session: %w", err)
		}
	}
}

// settleTimeout bounds a call made on a context that has ended.
const settleTimeout = 10 * time.Second

// waitMargin is how much sooner than its context's deadline a waiting
// call asks the server to give up, so that the answer (nothing yet) comes
// back before the deadline and not as a deadline error.
const waitMargin = 20 * time.Millisecond

// waitFor is how long one waiting call may ask the server to wait:
// maxWait, or less before ctx's deadline; the deadline's error when too
// little is left.
func waitFor(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	wait := maxWait
	if d, ok := ctx.Deadline(); ok {
		if wait = min(wait, time.Until(d)-waitMargin); wait <= 0 {
			return 0, context.DeadlineExceeded
		}
	}
	return wait, nil
}

func (c *Client) acceptSession(ctx context.Context, queue, sessionID string, opts *sluice.ReceiverOptions, wait time.Duration) (*SessionReceiver, error) {
	if opts != nil && opts.SubQueue != sluice.SubQueueNone {
		return nil, fmt.Errorf("sluice: accept session: sessions have no sub-queue: %w", sluice.ErrInvalidArgument)
	}
	r, err := c.NewReceiver(queue, opts)
	if err != nil {
		return nil, err
	}
	res, err := call(ctx, c.messaging.AcceptSession, &sluicev1.AcceptSessionRequest{Entity: queue, SessionId: sessionID,
		MaxWait: apiconv.DurationPB(wait), LockDuration: apiconv.DurationPB(r.lock)})
	if err != nil || res.Session == nil {
		return nil, err
	}
	r.session = res.Session
	return &SessionReceiver{r: r, lockedUntil: apiconv.Time(res.Session.LockedUntil)}, nil
}

// ResumeSession returns a receiver of a session that this or another
// process locked (AcceptSession, AcceptNextSession), given the session
// lock's token, as sluice.Client.ResumeSession does: it checks nothing
// until used, and once the lock has ended every call fails with
// sluice.ErrSessionLockLost. LockedUntil is zero until RenewSessionLock.
func (c *Client) ResumeSession(queue, sessionID, lockToken string, opts *sluice.ReceiverOptions) (*SessionReceiver, error) {
	switch {
	case sessionID == "":
		return nil, fmt.Errorf("sluice: resume session: empty session id: %w", sluice.ErrInvalidArgument)
	case len(lockToken) != 16 || !isHex(lockToken):
		return nil, fmt.Errorf("sluice: resume session: lock token %q: want 16 hex digits: %w", lockToken, sluice.ErrInvalidArgument)
	case opts != nil && opts.SubQueue != sluice.SubQueueNone:
		return nil, fmt.Errorf("sluice: resume session: sessions have no sub-queue: %w", sluice.ErrInvalidArgument)
	}
	r, err := c.NewReceiver(queue, opts)
	if err != nil {
		return nil, err
	}
	r.session = &sluicev1.SessionLock{SessionId: sessionID, LockToken: lockToken}
	return &SessionReceiver{r: r}, nil
}

// SessionID names the session held.
func (s *SessionReceiver) SessionID() string { return s.r.session.SessionId }

// LockToken is the session lock's token.
func (s *SessionReceiver) LockToken() string { return s.r.session.LockToken }

// LockedUntil is when the session lock ends unless renewed.
func (s *SessionReceiver) LockedUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockedUntil
}

// Receive waits until messages of the session are available or ctx ends.
func (s *SessionReceiver) Receive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error) {
	return s.r.Receive(ctx, max)
}

// TryReceive returns at once with the session's messages available now.
func (s *SessionReceiver) TryReceive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error) {
	return s.r.TryReceive(ctx, max)
}

// ReceiveDeferred receives deferred messages of the session.
func (s *SessionReceiver) ReceiveDeferred(ctx context.Context, seqs ...int64) ([]*sluice.ReceivedMessage, error) {
	return s.r.ReceiveDeferred(ctx, seqs...)
}

// Complete removes a message of the session.
func (s *SessionReceiver) Complete(ctx context.Context, m *sluice.ReceivedMessage) error {
	return s.r.Complete(ctx, m)
}

// CompleteBatch removes messages of the session in one call.
func (s *SessionReceiver) CompleteBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error {
	return s.r.CompleteBatch(ctx, msgs)
}

// Abandon makes a message of the session available again, at once or
// after opts.Delay; the session's later messages wait for it.
func (s *SessionReceiver) Abandon(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.AbandonOptions) error {
	return s.r.Abandon(ctx, m, opts)
}

// DeadLetter moves a message of the session to the dead-letter queue.
func (s *SessionReceiver) DeadLetter(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.DeadLetterOptions) error {
	return s.r.DeadLetter(ctx, m, opts)
}

// Defer sets a message of the session aside.
func (s *SessionReceiver) Defer(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.DeferOptions) error {
	return s.r.Defer(ctx, m, opts)
}

// RenewSessionLock extends the session lock and its messages' locks.
func (s *SessionReceiver) RenewSessionLock(ctx context.Context) error {
	if s.r.c.instr == nil {
		return s.renewSessionLock(ctx)
	}
	return s.r.c.trace(ctx, &sluice.Operation{Kind: sluice.OperationRenewSessionLock, Entity: sluice.CanonicalName(s.r.entity), Session: s.SessionID()},
		s.renewSessionLock)
}

// renewSessionLock does RenewSessionLock's work.
func (s *SessionReceiver) renewSessionLock(ctx context.Context) error {
	res, err := call(ctx, s.r.c.messaging.RenewSessionLock, &sluicev1.RenewSessionLockRequest{Entity: s.r.entity, Session: s.r.session,
		LockDuration: apiconv.DurationPB(s.r.lock)})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.lockedUntil = apiconv.Time(res.LockedUntil)
	s.mu.Unlock()
	return nil
}

// SessionState returns the session's state (nil when none was set).
func (s *SessionReceiver) SessionState(ctx context.Context) ([]byte, error) {
	res, err := call(ctx, s.r.c.messaging.GetSessionState, &sluicev1.GetSessionStateRequest{Entity: s.r.entity, Session: s.r.session})
	if err != nil {
		return nil, err
	}
	if len(res.State) == 0 {
		return nil, nil
	}
	return res.State, nil
}

// SetSessionState replaces the session's state; nil clears it.
func (s *SessionReceiver) SetSessionState(ctx context.Context, state []byte) error {
	_, err := call(ctx, s.r.c.messaging.SetSessionState, &sluicev1.SetSessionStateRequest{Entity: s.r.entity, Session: s.r.session, State: state})
	return err
}

// Close releases the session. As the library's, it succeeds when the
// lock had ended already: nothing is held.
func (s *SessionReceiver) Close(ctx context.Context) error {
	_, err := call(ctx, s.r.c.messaging.CloseSession, &sluicev1.CloseSessionRequest{Entity: s.r.entity, Session: s.r.session})
	if errors.Is(err, sluice.ErrSessionLockLost) {
		return nil
	}
	return err
}

// isHex reports whether s is hex digits only.
func isHex(s string) bool {
	_, err := strconv.ParseUint(s, 16, 64)
	return err == nil
}
