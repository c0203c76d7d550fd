package sluice

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// ReceiveMode says what a receive does with the messages it returns.
type ReceiveMode int

const (
	// PeekLock locks the messages for the queue's lock duration: the
	// receiver settles each one (complete, abandon, dead-letter, defer)
	// or, when the lock ends first, it is delivered again. At least once.
	PeekLock ReceiveMode = iota
	// ReceiveAndDelete removes the messages as it returns them: nothing to
	// settle, and a message the application loses is gone.
	ReceiveAndDelete
)

// ReceiverOptions tune a receiver. The zero value receives in PeekLock
// mode from the entity itself.
type ReceiverOptions struct {
	Mode ReceiveMode
	// SubQueue selects the entity's dead-letter queue (SubQueueDeadLetter)
	// instead of the entity.
	SubQueue SubQueue
	// LockDuration, when set, is how long this receiver's receives lock
	// messages (or accepts lock sessions) and how far its renewals extend
	// them, in place of the entity's LockDuration: from 1 ms to
	// MaxReceiverLockDuration, for a consumer whose handling takes longer
	// than the entity's lock allows, or that chooses its lock per receive
	// as SQS's VisibilityTimeout does. Zero takes the entity's; anything
	// else outside the range is refused with ErrInvalidArgument.
	LockDuration time.Duration
}

// MaxReceiverLockDuration bounds ReceiverOptions.LockDuration: 12 hours,
// SQS's longest visibility timeout.
const MaxReceiverLockDuration = 12 * time.Hour

// SubQueue names a sub-queue of an entity.
type SubQueue int

const (
	// SubQueueNone is the entity itself.
	SubQueueNone SubQueue = iota
	// SubQueueDeadLetter is the entity's dead-letter queue: receive, peek,
	// complete (delete) and abandon (unlock) dead letters, with their
	// reason and description.
	SubQueueDeadLetter
)

// Receiver receives and settles the messages of one queue. It is safe for
// concurrent use.
type Receiver struct {
	c     *Client
	queue string
	mode  ReceiveMode
	dead  bool          // the entity's dead-letter queue
	lock  time.Duration // ReceiverOptions.LockDuration (0: the entity's)

	// part is the partition of a partitioned queue the next receive asks
	// first, and stay how many receives in a row it has given messages.
	part, stay atomic.Uint32

	mu       sync.Mutex
	nextPeek int64
}

// NewReceiver returns a receiver for a queue; nil opts receive in
// PeekLock mode.
func (c *Client) NewReceiver(queue string, opts *ReceiverOptions) (*Receiver, error) {
	queue = canonical(queue)
	if err := store.ValidateName("queue", queue); err != nil {
		return nil, fmt.Errorf("sluice: new receiver: %w", err)
	}
	if opts == nil {
		opts = &ReceiverOptions{}
	}
	if opts.Mode != PeekLock && opts.Mode != ReceiveAndDelete {
		return nil, errInvalid("new receiver", "unknown receive mode %d", opts.Mode)
	}
	if opts.SubQueue != SubQueueNone && opts.SubQueue != SubQueueDeadLetter {
		return nil, errInvalid("new receiver", "unknown sub-queue %d", opts.SubQueue)
	}
	if d := opts.LockDuration; d < 0 {
		return nil, errInvalid("new receiver", "lock duration %v is negative: must be between 1ms and %v (0: the entity's)", d, MaxReceiverLockDuration)
	} else if d != 0 && (d < time.Millisecond || d > MaxReceiverLockDuration) {
		return nil, errInvalid("new receiver", "lock duration %v: must be between 1ms and %v (0: the entity's)", d, MaxReceiverLockDuration)
	}
	return &Receiver{c: c, queue: queue, mode: opts.Mode, dead: opts.SubQueue == SubQueueDeadLetter, lock: opts.LockDuration}, nil
}

// lockDuration is how long the receiver locks messages and sessions of
// an entity with props: its own LockDuration, or the entity's.
func (r *Receiver) lockDuration(props QueueProperties) time.Duration {
	if r.lock != 0 {
		return r.lock
	}
	return props.LockDuration
}

// Entity returns the canonical name of the queue or subscription path
// the receiver receives from.
func (r *Receiver) Entity() string { return r.queue }

// Waiting for messages: a receiver wakes when a send on this node (or, on
// PostgreSQL, on any node) signals the queue, and polls in between, from
// minPoll backing off to maxPoll, for what no signal announces (sends of
// other processes on SQLite and MySQL, scheduled messages coming due).
const (
	minPoll = 25 * time.Millisecond
	maxPoll = 500 * time.Millisecond
)

// Receive waits until messages are available or ctx ends, and returns at
// once with up to max of them, in sequence order. When ctx ends first it
// returns ctx's error.
func (r *Receiver) Receive(ctx context.Context, max int) ([]*ReceivedMessage, error) {
	return r.c.traceReceive(ctx, r.queue, r.subQueue(), func(ctx context.Context) ([]*ReceivedMessage, error) {
		return r.receive(ctx, max)
	})
}

// receive does Receive's work.
func (r *Receiver) receive(ctx context.Context, max int) ([]*ReceivedMessage, error) {
	if max < 1 || max > r.c.limits.MaxBatch {
		return nil, errInvalid("receive", "max %d: must be between 1 and %d", max, r.c.limits.MaxBatch)
	}
	props, err := r.c.properties(ctx, r.queue)
	if err != nil {
		return nil, fmt.Errorf("sluice: receive: %w", err)
	}
	var msgs []*ReceivedMessage
	err = r.c.waitFor(ctx, "receive", r.queue, props.partitions(), func(woken uint32) (bool, error) {
		got, err := r.take(ctx, max, props, woken)
		msgs = got
		return len(got) > 0, err
	})
	return msgs, err
}

// TryReceive returns at once with up to max of the messages available
// now, in sequence order: none when there are none.
func (r *Receiver) TryReceive(ctx context.Context, max int) ([]*ReceivedMessage, error) {
	return r.c.traceReceive(ctx, r.queue, r.subQueue(), func(ctx context.Context) ([]*ReceivedMessage, error) {
		return r.tryReceive(ctx, max)
	})
}

// tryReceive does TryReceive's work.
func (r *Receiver) tryReceive(ctx context.Context, max int) ([]*ReceivedMessage, error) {
	if max < 1 || max > r.c.limits.MaxBatch {
		return nil, errInvalid("receive", "max %d: must be between 1 and %d", max, r.c.limits.MaxBatch)
	}
	props, err := r.c.properties(ctx, r.queue)
	if err != nil {
		return nil, fmt.Errorf("sluice: receive: %w", err)
	}
	return r.take(ctx, max, props, 0)
}

// waitFor calls try until it reports done or fails, waiting in between
// for a wake-up of queue (of any of its n partitions) or a poll, until
// ctx ends. It watches before the first try, so that a send between an
// empty try and the wait still wakes it. try is told, after a wake-up,
// which partitions were woken (bit p for partition p), and 0 (look
// everywhere) on the first try and after a poll.
func (c *Client) waitFor(ctx context.Context, op, queue string, n int, try func(woken uint32) (bool, error)) error {
	w := c.watch(queue, n)
	defer w.stop()
	wait, woken := minPoll, uint32(0)
	for {
		done, err := try(woken)
		if err != nil || done {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sluice: %s: %w", op, ctx.Err())
		case <-w.c:
			wait, woken = minPoll, w.parts.Swap(0)
		case <-t.C:
			wait, woken = min(2*wait, maxPoll), 0
		}
		t.Stop()
	}
}

// maxStay bounds the receives in a row that a receiver of a partitioned
// queue takes from one partition while it has messages.
const maxStay = 4

// take leases what is available now, and in ReceiveAndDelete mode
// deletes it. On a queue of several partitions it asks each in turn and
// returns what the first that has messages gives (up to max). It begins
// where the last receive found messages, for at most maxStay receives in
// a row, then with the next partition: the partitions that have messages
// share the receives, and a receive rarely asks an empty partition (a
// lease, so a write) while one it knows has messages.
//
// After a wake-up it asks only the partitions woken (the mask woken, 0
// for all; a send signals its partition): with a queue that is mostly
// empty, its consumers would otherwise lease every empty partition each
// time one gets a message.
func (r *Receiver) take(ctx context.Context, max int, props QueueProperties, woken uint32) ([]*ReceivedMessage, error) {
	// A lease whose caller gives up may still commit: it runs to its end,
	// so that what it took is returned rather than locked for nothing.
	ctx, cancel := detached(ctx)
	defer cancel()
	n := props.partitions()
	var (
		ls  []sluicetype.Leased
		ds  []sluicetype.DeadLetter
		got = -1
	)
	from := int(r.part.Load() % uint32(n))
	if r.stay.Load() >= maxStay {
		from = (from + 1) % n
	}
	err := eachPartition(r.queue, n, from, func(p int, q string) (bool, error) {
		if woken != 0 && woken&(1<<p) == 0 {
			return false, nil
		}
		lp := &store.LeaseParams{Queue: q, Max: max, Visibility: r.lockDuration(props)}
		if r.dead {
			dead, err := r.c.st.LeaseDeadLetters(ctx, lp)
			publicDeadLetters(p, dead)
			if ds = dead; len(ds) > 0 {
				got = p
			}
			return got >= 0, err
		}
		live, err := r.c.st.Lease(ctx, lp)
		publicLeased(p, live)
		if ls = live; len(ls) > 0 {
			got = p
		}
		return got >= 0, err
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: receive: %w", err)
	}
	switch {
	case got < 0:
	case uint32(got) == r.part.Load()%uint32(n) && got == from:
		r.stay.Add(1)
	default:
		r.part.Store(uint32(got))
		r.stay.Store(1)
	}
	if r.dead {
		return r.deliverDead(ctx, ds)
	}
	return r.deliver(ctx, "receive", ls)
}

// deliver turns leased messages into received ones; in ReceiveAndDelete
// mode it completes them first and returns those it deleted.
func (r *Receiver) deliver(ctx context.Context, op string, ls []sluicetype.Leased) ([]*ReceivedMessage, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	out := make([]*ReceivedMessage, 0, len(ls))
	if r.mode == PeekLock {
		for _, l := range ls {
			out = append(out, leasedMessage(r.queue, l))
		}
		r.noteReceived(out)
		return out, nil
	}
	receipts := make([]sluicetype.Receipt, len(ls))
	for i, l := range ls {
		receipts[i] = l.Receipt
	}
	// The delete runs to its end even if the caller gives up: a delete that
	// committed must return its messages, or they would be lost.
	ctx, cancel := detached(ctx)
	defer cancel()
	res, err := r.c.settleParts(ctx, &store.SettleParams{Queue: r.queue, Action: store.Complete, Receipts: receipts}, false)
	if err != nil {
		// Not deleted: the messages come back when their lock ends. Or,
		// with ErrOutcomeUnknown, perhaps deleted: at most once, as this
		// mode promises.
		return nil, fmt.Errorf("sluice: %s: %w", op, err)
	}
	for i, l := range ls {
		if res[i].Err == nil { // else another receiver has it now
			out = append(out, received(r.queue, l.Message))
		}
	}
	r.noteReceived(out)
	return out, nil
}

// ReceiveDeferred receives deferred messages by sequence number, in the
// order given: locked in PeekLock mode (settle them as any other; an
// abandoned one, or one whose lock ends, is deferred again), deleted in
// ReceiveAndDelete mode. ErrMessageNotFound, and nothing received, if any
// number names no deferred message.
func (r *Receiver) ReceiveDeferred(ctx context.Context, seqs ...int64) ([]*ReceivedMessage, error) {
	return r.c.traceReceive(ctx, r.queue, r.subQueue(), func(ctx context.Context) ([]*ReceivedMessage, error) {
		return r.receiveDeferred(ctx, seqs)
	})
}

// receiveDeferred does ReceiveDeferred's work.
func (r *Receiver) receiveDeferred(ctx context.Context, seqs []int64) ([]*ReceivedMessage, error) {
	props, err := r.c.properties(ctx, r.queue)
	if err != nil {
		return nil, fmt.Errorf("sluice: receive deferred: %w", err)
	}
	lctx, cancel := detached(ctx)
	defer cancel()
	if props.partitions() > 1 {
		ls, err := r.c.leaseDeferredParts(lctx, &store.LeaseDeferredParams{Queue: r.queue, Seqs: seqs, Visibility: r.lockDuration(props)}, props.partitions())
		if err != nil {
			return nil, err
		}
		return r.deliver(ctx, "receive deferred", ls)
	}
	ls, err := r.c.st.LeaseDeferred(lctx, &store.LeaseDeferredParams{Queue: r.queue, Seqs: seqs, Visibility: r.lockDuration(props)})
	if err != nil {
		return nil, err
	}
	return r.deliver(ctx, "receive deferred", ls)
}

// detached returns a context that ctx's end does not cancel, bounded by
// settleTimeout, for writes whose outcome must reach the caller.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}

// Complete removes a message received in PeekLock mode. ErrLockLost if
// its lock ended or it was settled already.
func (r *Receiver) Complete(ctx context.Context, m *ReceivedMessage) error {
	return r.settle(ctx, "complete", m, store.SettleParams{Action: store.Complete}, nil)
}

// CompleteBatch removes messages received in PeekLock mode, in one
// database transaction: the batch form of Complete, for a receiver that
// settles what it received at once.
//
// It checks every message first: a nil message, one of another queue,
// one without a lock (peeked, or received in ReceiveAndDelete mode), a
// malformed lock token, a lock token given twice, or more messages than
// Options.Limits.MaxBatch (default 1000) fail the call with
// ErrInvalidArgument, and nothing is completed. An empty batch does
// nothing.
//
// Then each message whose lock holds is completed, even when the locks of
// others are lost. When some are not completed (their lock ended, they
// were received again, or they were settled already), it returns a
// *SettleBatchError that lists them, each with an error wrapping
// ErrLockLost, and errors.Is(err, ErrLockLost) holds; every message it
// does not list was completed. Any other error (the database's) means
// that none was completed, unless it is ctx's: a call whose ctx ends
// first may or may not have completed them, and a message that was not
// is delivered again when its lock ends.
func (r *Receiver) CompleteBatch(ctx context.Context, msgs []*ReceivedMessage) error {
	return r.traceSettle(ctx, SettleComplete, msgs, func(ctx context.Context) error {
		return r.completeBatch(ctx, msgs)
	})
}

// completeBatch does CompleteBatch's work.
func (r *Receiver) completeBatch(ctx context.Context, msgs []*ReceivedMessage) error {
	const op = "complete batch"
	if len(msgs) == 0 {
		return nil
	}
	if len(msgs) > r.c.limits.MaxBatch {
		return errInvalid(op, "%d messages: at most %d allowed", len(msgs), r.c.limits.MaxBatch)
	}
	receipts := make([]sluicetype.Receipt, len(msgs))
	seen := make(map[sluicetype.Receipt]int, len(msgs))
	for i, m := range msgs {
		receipt, err := r.check(fmt.Sprintf("%s: #%d", op, i), m)
		if err != nil {
			return err
		}
		if j, ok := seen[receipt]; ok {
			return errInvalid(op, "#%d and #%d hold the same lock (sequence number %d): give each message once", j, i, receipt.Seq)
		}
		seen[receipt] = i
		receipts[i] = receipt
	}
	res, err := r.c.settleParts(ctx, &store.SettleParams{Queue: r.queue, Action: store.Complete, Receipts: receipts}, r.dead)
	if err != nil {
		return fmt.Errorf("sluice: %s: %w", op, err)
	}
	var (
		failed []SettleFailure
		errs   []error
	)
	for i, rs := range res {
		if rs.Err != nil {
			failed = append(failed, SettleFailure{Index: i, Message: msgs[i], Err: rs.Err})
			errs = append(errs, rs.Err)
			continue
		}
		msgs[i].settled.Store(true)
	}
	r.noteSettled(store.Complete, len(msgs)-len(failed), errs...)
	if failed != nil {
		return &SettleBatchError{Op: op, Total: len(msgs), Failed: failed}
	}
	return nil
}

// SettleBatchError reports the messages of a batch settlement
// (CompleteBatch) that were not settled; the batch's other messages were.
// errors.Is matches each failure's error: ErrLockLost, or
// ErrSessionLockLost for a session receiver whose session lock ended.
type SettleBatchError struct {
	// Op names the settlement ("complete batch").
	Op string
	// Total is how many messages the batch held.
	Total int
	// Failed lists the messages not settled, in the batch's order.
	Failed []SettleFailure
}

// SettleFailure is a message of a batch that was not settled, and why.
type SettleFailure struct {
	// Index is the message's position in the batch.
	Index   int
	Message *ReceivedMessage
	Err     error
}

// maxListedFailures bounds the failures a SettleBatchError's text lists.
const maxListedFailures = 3

// Error says how many messages were not settled, and why for the first
// few.
func (e *SettleBatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sluice: %s: %d of %d messages not settled", e.Op, len(e.Failed), e.Total)
	for i, f := range e.Failed {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		if i == maxListedFailures {
			fmt.Fprintf(&b, "%sand %d more", sep, len(e.Failed)-i)
			break
		}
		fmt.Fprintf(&b, "%s#%d: %v", sep, f.Index, f.Err)
	}
	return b.String()
}

// Unwrap returns the failures' errors, for errors.Is and errors.As.
func (e *SettleBatchError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f.Err
	}
	return errs
}

// AbandonOptions tune Abandon.
type AbandonOptions struct {
	// PropertiesToModify are merged into the message's application
	// properties.
	PropertiesToModify map[string]string
	// Delay keeps the message hidden that long, by the database's clock,
	// before it is delivered again; meanwhile Peek shows it as
	// StateScheduled and the queue's counts as scheduled. 0 delivers it
	// again at once; negative is refused with ErrInvalidArgument; Forever
	// saturates (the message then waits until it expires, or for ever).
	// A message on its last allowed delivery is dead-lettered at once,
	// whatever the delay. A dead letter cannot be abandoned with a delay.
	Delay time.Duration
}

// Abandon releases a message's lock so that it is delivered again, at
// once or after opts.Delay; on its last allowed delivery it is
// dead-lettered instead, with reason MaxDeliveryCountExceeded. nil opts
// change nothing else.
func (r *Receiver) Abandon(ctx context.Context, m *ReceivedMessage, opts *AbandonOptions) error {
	p := store.SettleParams{Action: store.Abandon}
	var changes map[string]string
	if opts != nil {
		changes, p.Delay = opts.PropertiesToModify, opts.Delay
	}
	if p.Delay < 0 {
		return errInvalid("abandon", "delay %v: must not be negative", p.Delay)
	}
	if p.Delay > 0 && r.dead {
		return errInvalid("abandon", "a dead letter cannot be abandoned with a delay")
	}
	return r.settle(ctx, "abandon", m, p, changes)
}

// Release hands a message back to its entity at once without counting a
// delivery: for a consumer that received ahead of what it handles and
// will not handle m (one that shuts down, or an adapter that must give
// back what it received after a message that failed, to keep the order).
// It is not for a message that failed: Abandon that one, which counts
// its delivery. A dead letter, which counts none, is abandoned. As
// Abandon, it fails with ErrLockLost when m's lock has ended.
func (r *Receiver) Release(ctx context.Context, m *ReceivedMessage) error {
	return r.release(ctx, m)
}

// release does Release's work; a Processor releases what it will not
// hand to its handler.
func (r *Receiver) release(ctx context.Context, m *ReceivedMessage) error {
	if r.dead {
		return r.Abandon(ctx, m, nil)
	}
	return r.settle(ctx, "release", m, store.SettleParams{Action: store.Release}, nil)
}

// DeadLetterOptions say why a message is dead-lettered.
type DeadLetterOptions struct {
	Reason      string
	Description string
	// PropertiesToModify are merged into the message's application
	// properties.
	PropertiesToModify map[string]string
}

// DeadLetter moves a message to the queue's dead-letter queue.
func (r *Receiver) DeadLetter(ctx context.Context, m *ReceivedMessage, opts *DeadLetterOptions) error {
	p := store.SettleParams{Action: store.DeadLetter}
	var changes map[string]string
	if opts != nil {
		p.Reason, p.Description, changes = opts.Reason, opts.Description, opts.PropertiesToModify
	}
	return r.settle(ctx, "dead-letter", m, p, changes)
}

// DeferOptions tune Defer.
type DeferOptions struct {
	// PropertiesToModify are merged into the message's application
	// properties.
	PropertiesToModify map[string]string
}

// Defer sets a message aside: it stays in the queue but only
// ReceiveDeferred, given its sequence number, receives it again.
func (r *Receiver) Defer(ctx context.Context, m *ReceivedMessage, opts *DeferOptions) error {
	var changes map[string]string
	if opts != nil {
		changes = opts.PropertiesToModify
	}
	return r.settle(ctx, "defer", m, store.SettleParams{Action: store.Defer}, changes)
}

// RenewLock extends a message's lock by the receiver's lock duration
// (ReceiverOptions.LockDuration, or the queue's) from
// now and updates m.LockedUntil. ErrLockLost if the lock ended already.
func (r *Receiver) RenewLock(ctx context.Context, m *ReceivedMessage) error {
	until, err := r.renew(ctx, m)
	if err != nil {
		r.noteLockLost(err)
		return err
	}
	m.LockedUntil = until
	return nil
}

// renew extends m's lock (RenewLock's and a Processor's renewal) under
// the client's instrumentation, and returns when the lock now ends.
func (r *Receiver) renew(ctx context.Context, m *ReceivedMessage) (time.Time, error) {
	return r.traceRenew(ctx, m, func(ctx context.Context) (time.Time, error) { return r.extend(ctx, m) })
}

// extend does renew's work.
func (r *Receiver) extend(ctx context.Context, m *ReceivedMessage) (time.Time, error) {
	receipt, err := r.check("renew lock", m)
	if err != nil {
		return time.Time{}, err
	}
	props, err := r.c.properties(ctx, r.queue)
	if err != nil {
		return time.Time{}, fmt.Errorf("sluice: renew lock: %w", err)
	}
	p := store.SettleParams{Queue: r.queue, Action: store.Extend, Extension: r.lockDuration(props), Receipts: []sluicetype.Receipt{receipt}}
	res, err := r.c.settleParts(ctx, &p, r.dead)
	if err := settleErr("renew lock", res, err); err != nil {
		return time.Time{}, err
	}
	return res[0].LockedUntil, nil
}

// check says whether m can be settled by this receiver, and returns its
// lock's receipt. A message built from a LockToken alone (its queue
// unknown) is taken to be this receiver's.
func (r *Receiver) check(op string, m *ReceivedMessage) (sluicetype.Receipt, error) {
	switch {
	case m == nil:
		return sluicetype.Receipt{}, errInvalid(op, "nil message")
	case m.queue != "" && (m.queue != r.queue || m.dead != r.dead):
		return sluicetype.Receipt{}, errInvalid(op, "message %d is from queue %q, not %q", m.SequenceNumber, m.queue, r.queue)
	case m.LockToken == "":
		return sluicetype.Receipt{}, errInvalid(op, "message %d holds no lock (peeked, or received in ReceiveAndDelete mode)", m.SequenceNumber)
	}
	receipt, err := m.receipt()
	if err != nil {
		return receipt, fmt.Errorf("sluice: %s: %w", op, err)
	}
	return receipt, nil
}

// settle settles m, merging changes (when not nil) into its application
// properties, and tells the observers of message events.
func (r *Receiver) settle(ctx context.Context, op string, m *ReceivedMessage, p store.SettleParams, changes map[string]string) error {
	var err error
	if r.c.instrumentation() == nil {
		err = r.settleOne(ctx, op, m, p, changes) // without building traceSettle's slice
	} else {
		err = r.traceSettle(ctx, settleAction(p.Action), []*ReceivedMessage{m}, func(ctx context.Context) error {
			return r.settleOne(ctx, op, m, p, changes)
		})
	}
	if err != nil {
		r.noteSettled(p.Action, 0, err)
	} else {
		r.noteSettled(p.Action, 1)
	}
	return err
}

// settleOne does settle's work.
func (r *Receiver) settleOne(ctx context.Context, op string, m *ReceivedMessage, p store.SettleParams, changes map[string]string) error {
	receipt, err := r.check(op, m)
	if err != nil {
		return err
	}
	p.Queue, p.Receipts = r.queue, []sluicetype.Receipt{receipt}
	if r.dead {
		if p.Action != store.Complete && p.Action != store.Abandon {
			return errInvalid(op, "message %d is a dead letter: complete or abandon it", receipt.Seq)
		}
		if changes != nil {
			return errInvalid(op, "a dead letter's properties cannot change")
		}
	}
	if p.Properties, err = r.merged(ctx, op, m, receipt, changes); err != nil {
		return err
	}
	res, err := r.c.settleParts(ctx, &p, r.dead)
	if err := settleErr(op, res, err); err != nil {
		return err
	}
	m.settled.Store(true)
	return nil
}

// merged returns m's application properties with changes merged in, or
// nil when changes is nil.
func (r *Receiver) merged(ctx context.Context, op string, m *ReceivedMessage, receipt sluicetype.Receipt, changes map[string]string) (map[string]string, error) {
	if changes == nil {
		return nil, nil
	}
	current := m.ApplicationProperties
	if m.queue == "" {
		// Known by its lock token alone: its properties are the
		// stored ones, which only the lock's holder can change.
		part, own := splitSeq(receipt.Seq)
		ms, err := r.c.st.Peek(ctx, &store.PeekParams{Queue: partitionQueue(r.queue, part), FromSeq: own, Max: 1})
		if err != nil {
			return nil, fmt.Errorf("sluice: %s: %w", op, err)
		}
		if len(ms) == 0 || ms[0].Seq != own {
			return nil, fmt.Errorf("sluice: %s: message %d: %w", op, receipt.Seq, ErrLockLost)
		}
		current = ms[0].Properties
	}
	props := maps.Clone(current)
	if props == nil {
		props = make(map[string]string, len(changes))
	}
	maps.Copy(props, changes)
	return props, nil
}

// MaxPeek bounds the messages one Peek returns.
const MaxPeek = 250

// PeekOptions tune Peek.
type PeekOptions struct {
	// FromSequenceNumber is the first sequence number to return. Zero
	// continues after the last message this receiver peeked.
	FromSequenceNumber int64
}

// Peek returns up to max messages (at most MaxPeek) in sequence order,
// whatever their state (active, locked, scheduled, deferred), without
// locking or changing them. nil opts continue after the last peek.
func (r *Receiver) Peek(ctx context.Context, max int, opts *PeekOptions) ([]*ReceivedMessage, error) {
	if max < 1 || max > MaxPeek {
		return nil, errInvalid("peek", "max %d: must be between 1 and %d", max, MaxPeek)
	}
	if opts != nil && opts.FromSequenceNumber < 0 {
		return nil, errInvalid("peek", "from sequence number %d: sequence numbers start at 1 (0: where the last peek ended)", opts.FromSequenceNumber)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	from := r.nextPeek
	if opts != nil && opts.FromSequenceNumber > 0 {
		from = opts.FromSequenceNumber
	}
	out, err := r.peek(ctx, from, max)
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		r.nextPeek = out[len(out)-1].SequenceNumber + 1
	}
	return out, nil
}

// peek reads up to max messages from the sequence number from on: on a
// partitioned queue, from the partition from names, then the next ones,
// so that sequence numbers ascend.
func (r *Receiver) peek(ctx context.Context, from int64, max int) ([]*ReceivedMessage, error) {
	n, err := r.c.partitionsOf(ctx, r.queue)
	if err != nil {
		return nil, err
	}
	part, own := splitSeq(from)
	var out []*ReceivedMessage
	for p := part; p < n && len(out) < max; p++ {
		got, err := r.peekPartition(ctx, p, own, max-len(out))
		if err != nil {
			return nil, err
		}
		out, own = append(out, got...), 0
	}
	return out, nil
}

// peekPartition is peek in one partition, from its own number from on.
func (r *Receiver) peekPartition(ctx context.Context, part int, from int64, max int) ([]*ReceivedMessage, error) {
	var out []*ReceivedMessage
	q := partitionQueue(r.queue, part)
	if r.dead {
		ds, err := r.c.st.PeekDeadLetters(ctx, &store.PeekParams{Queue: q, FromSeq: from, Max: max})
		if err != nil {
			return nil, err
		}
		publicDeadLetters(part, ds)
		for _, d := range ds {
			out = append(out, deadLetterMessage(r.queue, d))
		}
	} else {
		ms, err := r.c.st.Peek(ctx, &store.PeekParams{Queue: q, FromSeq: from, Max: max})
		if err != nil {
			return nil, err
		}
		publicMessages(part, ms)
		for _, m := range ms {
			rm := received(r.queue, m)
			if m.State == StateLocked && m.VisibleAt.After(time.Now()) {
				rm.LockedUntil = m.VisibleAt // when its lock ends, unless renewed
			}
			out = append(out, rm)
		}
	}
	return out, nil
}
