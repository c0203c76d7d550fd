package sluice

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Session errors.
var (
	// ErrSessionRequired reports a send without a session id to a queue
	// that requires sessions, or a plain receive from one.
	ErrSessionRequired = sluicetype.ErrSessionRequired
	// ErrSessionCannotBeLocked reports an accept of a session another
	// receiver holds.
	ErrSessionCannotBeLocked = sluicetype.ErrSessionCannotBeLocked
	// ErrSessionLockLost reports an operation of a session receiver whose
	// session lock expired or was released; nothing was changed.
	ErrSessionLockLost = sluicetype.ErrSessionLockLost
)

// SessionReceiver receives the messages of one session, which it holds
// locked: no other receiver gets them while the lock lasts, including
// messages sent after the accept, and they come in the order they were
// sent. Renew the lock before it ends (RenewSessionLock) and Close the
// receiver to hand the session back. It is safe for concurrent use.
type SessionReceiver struct {
	r    *Receiver
	lock store.SessionLock
	// part is the partition of a partitioned queue that holds the session.
	part int

	mu          sync.Mutex
	lockedUntil time.Time
}

// AcceptSession locks the named session of a queue that requires
// sessions (a session with no messages yet may be accepted too).
// ErrSessionCannotBeLocked if another receiver holds it.
func (c *Client) AcceptSession(ctx context.Context, queue, sessionID string, opts *ReceiverOptions) (*SessionReceiver, error) {
	if sessionID == "" {
		return nil, errInvalid("accept session", "empty session id (AcceptNextSession accepts any)")
	}
	if err := validateIDs(&Message{SessionID: sessionID}); err != nil {
		return nil, fmt.Errorf("sluice: accept session: %w", err)
	}
	return c.acceptSession(ctx, queue, sessionID, opts, false)
}

// AcceptNextSession waits until a session of the queue has messages and
// no other holder, and locks it; it returns ctx's error if ctx ends first.
// It tries once even when ctx has ended already: a ctx without time left
// takes a session only if one is free now.
func (c *Client) AcceptNextSession(ctx context.Context, queue string, opts *ReceiverOptions) (*SessionReceiver, error) {
	return c.acceptSession(ctx, queue, "", opts, true)
}

func (c *Client) acceptSession(ctx context.Context, queue, id string, opts *ReceiverOptions, wait bool) (*SessionReceiver, error) {
	if opts != nil && opts.SubQueue != SubQueueNone {
		return nil, errInvalid("accept session", "sessions have no sub-queue: receive the dead-letter queue with NewReceiver")
	}
	r, err := c.NewReceiver(queue, opts)
	if err != nil {
		return nil, err
	}
	pctx, cancel := detached(ctx)
	props, err := c.properties(pctx, queue)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("sluice: accept session: %w", err)
	}
	if !props.RequiresSession {
		return nil, errInvalid("accept session", "queue %q does not require sessions: receive with NewReceiver", queue)
	}
	queue = r.queue
	var (
		lock store.SessionLock
		part int
	)
	n := props.partitions()
	accept := func(p int) (bool, error) {
		lctx, cancel := detached(ctx)
		defer cancel()
		l, err := c.st.AcceptSession(lctx, &store.AcceptSessionParams{Queue: partitionQueue(queue, p), SessionID: id, Duration: r.lockDuration(props)})
		if wait && errors.Is(err, sluicetype.ErrNoSessionAvailable) {
			return false, nil
		}
		lock, part = l, p
		return err == nil, err
	}
	err = c.waitFor(ctx, "accept next session", queue, n, func(uint32) (bool, error) {
		if id != "" {
			return accept(partitionOfKey(id, n))
		}
		// The next session of any partition, beginning with the one after
		// where the last accept of this client began.
		var done bool
		from := int(c.acceptNext.Add(1) % uint32(n))
		err := eachPartition(queue, n, from, func(p int, _ string) (bool, error) {
			var err error
			done, err = accept(p)
			return done, err
		})
		return done, err
	})
	if err != nil {
		return nil, err
	}
	return &SessionReceiver{r: r, lock: lock, part: part, lockedUntil: lock.LockedUntil}, nil
}

// ResumeSession returns a receiver of a session that a receiver of this
// or another process locked (AcceptSession, AcceptNextSession), given
// the session lock's token: how a server hands a session's receipts to
// its clients. It checks nothing until used: once the lock has ended,
// every call fails with ErrSessionLockLost. LockedUntil is zero until
// RenewSessionLock.
func (c *Client) ResumeSession(queue, sessionID, lockToken string, opts *ReceiverOptions) (*SessionReceiver, error) {
	if sessionID == "" {
		return nil, errInvalid("resume session", "empty session id")
	}
	if err := validateIDs(&Message{SessionID: sessionID}); err != nil {
		return nil, fmt.Errorf("sluice: resume session: %w", err)
	}
	if opts != nil && opts.SubQueue != SubQueueNone {
		return nil, errInvalid("resume session", "sessions have no sub-queue")
	}
	tok, err := strconv.ParseUint(lockToken, 16, 64)
	if err != nil || len(lockToken) != 16 {
		return nil, errInvalid("resume session", "lock token %q: want 16 hex digits", lockToken)
	}
	r, err := c.NewReceiver(queue, opts)
	if err != nil {
		return nil, err
	}
	// The session's partition, from the queue's partition count.
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	n, err := c.partitionsOf(ctx, r.queue)
	if err != nil {
		return nil, fmt.Errorf("sluice: resume session: %w", err)
	}
	return &SessionReceiver{r: r, lock: store.SessionLock{SessionID: sessionID, Token: int64(tok)}, part: partitionOfKey(sessionID, n)}, nil
}

// SessionID names the session held.
func (s *SessionReceiver) SessionID() string { return s.lock.SessionID }

// LockToken is the session lock's token (16 hex digits), for
// ResumeSession.
func (s *SessionReceiver) LockToken() string { return fmt.Sprintf("%016x", uint64(s.lock.Token)) }

// LockedUntil is when the session lock ends unless renewed.
func (s *SessionReceiver) LockedUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockedUntil
}

func (s *SessionReceiver) params() store.SessionParams {
	return store.SessionParams{Queue: s.queue(), SessionID: s.lock.SessionID, Token: s.lock.Token}
}

// queue is the storage queue of the session's partition.
func (s *SessionReceiver) queue() string {
	return partitionQueue(s.r.queue, s.part)
}

// Receive waits until messages of the session are available or ctx ends,
// and returns at once with up to max of them, in the order they were
// sent. ErrSessionLockLost once the session lock has ended.
func (s *SessionReceiver) Receive(ctx context.Context, max int) ([]*ReceivedMessage, error) {
	return s.r.c.traceReceive(ctx, s.r.queue, s.r.subQueue(), func(ctx context.Context) ([]*ReceivedMessage, error) {
		return s.receive(ctx, max)
	})
}

// receive does Receive's work.
func (s *SessionReceiver) receive(ctx context.Context, max int) ([]*ReceivedMessage, error) {
	if max < 1 || max > s.r.c.limits.MaxBatch {
		return nil, errInvalid("receive", "max %d: must be between 1 and %d", max, s.r.c.limits.MaxBatch)
	}
	var msgs []*ReceivedMessage
	err := s.r.c.waitFor(ctx, "receive", s.queue(), 1, func(uint32) (bool, error) {
		var err error
		msgs, err = s.take(ctx, max)
		return len(msgs) > 0, err
	})
	return msgs, err
}

// TryReceive returns at once with up to max of the session's messages
// available now: none when there are none.
func (s *SessionReceiver) TryReceive(ctx context.Context, max int) ([]*ReceivedMessage, error) {
	return s.r.c.traceReceive(ctx, s.r.queue, s.r.subQueue(), func(ctx context.Context) ([]*ReceivedMessage, error) {
		if max < 1 || max > s.r.c.limits.MaxBatch {
			return nil, errInvalid("receive", "max %d: must be between 1 and %d", max, s.r.c.limits.MaxBatch)
		}
		return s.take(ctx, max)
	})
}

// take leases what the session has available now.
func (s *SessionReceiver) take(ctx context.Context, max int) ([]*ReceivedMessage, error) {
	lctx, cancel := detached(ctx)
	defer cancel()
	ls, err := s.r.c.st.LeaseSession(lctx, &store.LeaseSessionParams{SessionParams: s.params(), Max: max})
	if err != nil || len(ls) == 0 {
		return nil, err
	}
	publicLeased(s.part, ls)
	return s.r.deliver(ctx, "receive", ls)
}

// ReceiveDeferred receives deferred messages of the session by sequence
// number, under the session lock. ErrMessageNotFound, and nothing
// received, if any names no deferred message of this session.
func (s *SessionReceiver) ReceiveDeferred(ctx context.Context, seqs ...int64) ([]*ReceivedMessage, error) {
	return s.r.c.traceReceive(ctx, s.r.queue, s.r.subQueue(), func(ctx context.Context) ([]*ReceivedMessage, error) {
		return s.receiveDeferred(ctx, seqs)
	})
}

// receiveDeferred does ReceiveDeferred's work.
func (s *SessionReceiver) receiveDeferred(ctx context.Context, seqs []int64) ([]*ReceivedMessage, error) {
	p := s.params()
	own := make([]int64, len(seqs))
	for i, seq := range seqs {
		var part int
		if part, own[i] = splitSeq(seq); part != s.part {
			return nil, fmt.Errorf("sluice: receive deferred: sequence number %d is not of session %q: %w", seq, s.lock.SessionID, ErrMessageNotFound)
		}
	}
	lctx, cancel := detached(ctx)
	defer cancel()
	ls, err := s.r.c.st.LeaseDeferred(lctx, &store.LeaseDeferredParams{Queue: s.queue(), Seqs: own, Session: &p})
	if err != nil {
		return nil, err
	}
	publicLeased(s.part, ls)
	return s.r.deliver(ctx, "receive deferred", ls)
}

// sessionErr reports a lost message lock as a lost session lock when the
// session is no longer held, which is what ended the message's lock.
func (s *SessionReceiver) sessionErr(ctx context.Context, err error) error {
	if !errors.Is(err, ErrLockLost) {
		return err
	}
	if s.lockEnded(ctx) {
		return s.lockLost(err)
	}
	return err
}

// Held reports whether the session lock still holds the session: false
// once the lock ended (expired, released, or taken over after it
// expired), and for a lock token that never held the session.
func (s *SessionReceiver) Held(ctx context.Context) (bool, error) {
	p := s.params()
	held, err := s.r.c.st.SessionHeld(ctx, &p)
	if err != nil {
		return false, fmt.Errorf("sluice: session %q: %w", s.lock.SessionID, err)
	}
	return held, nil
}

// lockEnded reports whether the session is known to be no longer held.
func (s *SessionReceiver) lockEnded(ctx context.Context) bool {
	p := s.params()
	held, err := s.r.c.st.SessionHeld(ctx, &p)
	return err == nil && !held
}

// lockLost wraps a lost message lock as a lost session lock.
func (s *SessionReceiver) lockLost(err error) error {
	return fmt.Errorf("sluice: session %q: %w: %w", s.lock.SessionID, ErrSessionLockLost, err)
}

// Complete removes a message of the session.
func (s *SessionReceiver) Complete(ctx context.Context, m *ReceivedMessage) error {
	return s.sessionErr(ctx, s.r.Complete(ctx, m))
}

// CompleteBatch removes messages of the session in one transaction, as
// Receiver.CompleteBatch does; when the session lock has ended, each
// failure of the *SettleBatchError wraps ErrSessionLockLost.
func (s *SessionReceiver) CompleteBatch(ctx context.Context, msgs []*ReceivedMessage) error {
	err := s.r.CompleteBatch(ctx, msgs)
	var be *SettleBatchError
	if errors.As(err, &be) && s.lockEnded(ctx) {
		for i := range be.Failed {
			be.Failed[i].Err = s.lockLost(be.Failed[i].Err)
		}
	}
	return err
}

// Abandon makes a message of the session available again, at once or
// after opts.Delay; it comes next, before later messages of the session,
// which wait for it however long its delay.
func (s *SessionReceiver) Abandon(ctx context.Context, m *ReceivedMessage, opts *AbandonOptions) error {
	return s.sessionErr(ctx, s.r.Abandon(ctx, m, opts))
}

// DeadLetter moves a message of the session to the dead-letter queue.
func (s *SessionReceiver) DeadLetter(ctx context.Context, m *ReceivedMessage, opts *DeadLetterOptions) error {
	return s.sessionErr(ctx, s.r.DeadLetter(ctx, m, opts))
}

// Defer sets a message of the session aside.
func (s *SessionReceiver) Defer(ctx context.Context, m *ReceivedMessage, opts *DeferOptions) error {
	return s.sessionErr(ctx, s.r.Defer(ctx, m, opts))
}

// RenewSessionLock extends the session lock, and the locks of the
// session's messages this receiver holds, by the receiver's lock duration
// (ReceiverOptions.LockDuration, or the queue's).
func (s *SessionReceiver) RenewSessionLock(ctx context.Context) error {
	return s.traceSessionRenew(ctx, s.renewSessionLock)
}

// renewSessionLock does RenewSessionLock's work.
func (s *SessionReceiver) renewSessionLock(ctx context.Context) error {
	props, err := s.r.c.properties(ctx, s.r.queue)
	if err != nil {
		return fmt.Errorf("sluice: renew session lock: %w", err)
	}
	p := s.params()
	p.Duration = s.r.lockDuration(props)
	until, err := s.r.c.st.RenewSession(ctx, &p)
	if err != nil {
		s.r.noteLockLost(err)
		return err
	}
	s.mu.Lock()
	s.lockedUntil = until
	s.mu.Unlock()
	return nil
}

// SessionState returns the session's state (nil when none was set).
func (s *SessionReceiver) SessionState(ctx context.Context) ([]byte, error) {
	p := s.params()
	return s.r.c.st.SessionState(ctx, &p)
}

// SetSessionState replaces the session's state; nil clears it.
func (s *SessionReceiver) SetSessionState(ctx context.Context, state []byte) error {
	return s.r.c.st.SetSessionState(ctx, &store.SessionStateParams{SessionParams: s.params(), State: state})
}

// Close releases the session: messages received and not settled are
// available again at once, to whoever accepts the session next, and their
// delivery counts are not incremented (as in Service Bus, closing a
// session is not a failed delivery; a session lock that expires is).
func (s *SessionReceiver) Close(ctx context.Context) error {
	p := s.params()
	err := s.r.c.st.ReleaseSession(ctx, &p)
	if errors.Is(err, ErrSessionLockLost) {
		return nil // the lock had ended: nothing is held
	}
	return err
}
