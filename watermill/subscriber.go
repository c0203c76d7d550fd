package watermill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	wm "github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/sluicehq/sluice"
)

// settleTimeout bounds one complete, abandon or lock renewal.
const settleTimeout = 30 * time.Second

// Acked messages are completed behind the subscription, up to
// completeBatch at a time, with up to ackedBacklog waiting.
const (
	completeBatch = 100
	ackedBacklog  = 256
)

// Receive errors are retried after a pause that grows from minPause to
// maxPause.
const (
	minPause = 50 * time.Millisecond
	maxPause = 5 * time.Second
)

// Subscriber receives Watermill messages from sluice queues or topic
// subscriptions (message.Subscriber, message.SubscribeInitializer). It is
// safe for concurrent use.
type Subscriber struct {
	client sluice.API
	cfg    Config

	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	running sync.WaitGroup
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

// NewSubscriber returns a Subscriber on client, which it does not close.
func NewSubscriber(client sluice.API, cfg Config) (*Subscriber, error) {
	if client == nil {
		return nil, fmt.Errorf("sluice/watermill: new subscriber: no client: %w", sluice.ErrInvalidArgument)
	}
	if err := cfg.check(true); err != nil {
		return nil, err
	}
	if _, lib := client.(*sluice.Client); cfg.DB != nil && !lib {
		return nil, fmt.Errorf("sluice/watermill: new subscriber: a DB needs the library's client (the network API has no transactions): %w",
			sluice.ErrInvalidArgument)
	}
	return &Subscriber{client: client, cfg: cfg, closing: make(chan struct{})}, nil
}

// entity is the queue or subscription a subscription to topic receives
// from.
func (s *Subscriber) entity(topic string) string {
	if s.cfg.Entities == Topics {
		return sluice.SubscriptionPath(topic, s.cfg.ConsumerGroup)
	}
	return topic
}

// SubscribeInitialize creates the queue, or the topic and the consumer
// group's subscription, that a subscription to topic receives from,
// unless they exist, when the Config says AutoCreate; otherwise it does
// nothing. On Topics, a group gets the messages published after its
// subscription exists.
//
// On Streams, SubscribeInitialize stores the consumer group's
// subscription to the namespace, unless it is stored, whatever AutoCreate
// says: the group gets the events published from then on.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	var err error
	switch {
	case s.cfg.Entities == Streams:
		err = subscribeGroup(ctx, s.client, topic, streamConsumer(topic, s.cfg.ConsumerGroup))
	case s.cfg.AutoCreate:
		err = s.cfg.ensure(ctx, s.client, topic, true)
	}
	if err != nil {
		return fmt.Errorf("sluice/watermill: initialize %s: %w", topic, err)
	}
	return nil
}

// Subscribe returns a channel of the messages of topic (of the consumer
// group's subscription to it, on Topics). It hands out one message at a
// time and sends the next once that one is acked or nacked. The channel
// closes when ctx ends or the Subscriber is closed; a message handed out
// and not yet acked is then abandoned, and comes again.
//
// On Streams, the channel carries the events of the namespace topic that
// the consumer group's subscription gets (stored by SubscribeInitialize,
// or else here, from now on): each stream's in order, one at a time
// across the group's subscriptions in this process and others.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("sluice/watermill: subscribe to %s: %w", topic, ErrClosed)
	}
	if s.cfg.Entities == Streams {
		return s.subscribeStream(ctx, topic)
	}
	if s.cfg.AutoCreate {
		cctx, cancel := context.WithTimeout(ctx, settleTimeout)
		err := s.cfg.ensure(cctx, s.client, topic, true)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("sluice/watermill: subscribe to %s: %w", topic, err)
		}
	}
	r, err := s.client.MessageReceiver(s.entity(topic), nil)
	if err != nil {
		return nil, fmt.Errorf("sluice/watermill: subscribe to %s: %w", topic, err)
	}
	return s.subscription(ctx, topic, func(ctx context.Context, out chan<- *message.Message) {
		c := consumer{s: s, r: r, src: r, out: out, log: s.cfg.Logger.With(wm.LogFields{"topic": topic, "entity": r.Entity()})}
		c.run(ctx)
	})
}

// subscription runs f, which sends a subscription's messages to out,
// until ctx ends or the Subscriber closes (f's context ends then), and
// closes out once f returns; Close waits for it. It fails with ErrClosed
// once the Subscriber is closed, without running f.
func (s *Subscriber) subscription(ctx context.Context, topic string, f func(ctx context.Context, out chan<- *message.Message)) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("sluice/watermill: subscribe to %s: %w", topic, ErrClosed)
	}
	out := make(chan *message.Message)
	ctx, cancel := context.WithCancel(ctx)
	s.running.Add(2)
	go func() {
		// The subscription ends with its context or with the Subscriber.
		defer s.running.Done()
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	go func() {
		defer s.running.Done()
		defer close(out)
		defer cancel()
		f(ctx, out)
	}()
	return out, nil
}

func (s *Subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close ends every subscription and waits until their channels are
// closed and the messages they had handed out are abandoned. The client
// stays open.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.running.Wait()
	return nil
}

// consumer is one subscription's loop.
type consumer struct {
	s *Subscriber
	r sluice.MessageReceiver
	// src settles: r, or the session held (sess) on an entity that
	// requires sessions.
	src  sluice.MessageSource
	sess sluice.MessageSessionReceiver
	out  chan<- *message.Message
	log  wm.LoggerAdapter
	// acked holds the messages acked and not yet completed.
	acked chan *sluice.ReceivedMessage
	// releaser hands back what the subscription received ahead; nil when
	// the receiver cannot, and it receives one at a time.
	releaser releaser
}

// releaser is a receiver that hands a message back without counting a
// delivery (sluice.Receiver.Release).
type releaser interface {
	Release(ctx context.Context, m *sluice.ReceivedMessage) error
}

// run receives up to 1 + PrefetchCount messages at a time (one where the
// receiver cannot release) and hands them out one by one, until ctx
// ends. Acked messages are completed in batches by a goroutine of their own,
// so that the next message goes out while a completion commits; run
// returns once they are.
func (c *consumer) run(ctx context.Context) {
	c.acked = make(chan *sluice.ReceivedMessage, ackedBacklog)
	completed := make(chan struct{})
	go func() {
		defer close(completed)
		c.complete()
	}()
	defer func() {
		close(c.acked)
		<-completed
	}()
	batch := 1
	if rel, ok := c.r.(releaser); ok && c.s.cfg.PrefetchCount > 0 {
		c.releaser, batch = rel, 1+c.s.cfg.PrefetchCount
	}
	pause := minPause
	for ctx.Err() == nil {
		got, err := c.r.Receive(ctx, batch)
		if errors.Is(err, sluice.ErrSessionRequired) {
			// The entity requires sessions: receive session by session.
			// (Found by receiving, not by reading the entity's settings,
			// which a key that may only receive cannot read.)
			c.runSessions(ctx)
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.log.Error("receive failed; trying again", err, wm.LogFields{"after": pause})
			if !backOff(ctx, &pause) {
				return
			}
			continue
		}
		pause = minPause
		spans := lockSpans(got)
		for i, m := range got {
			if !c.handOut(ctx, m, spans[i]) {
				// Nacked, or the subscription ended: what was received
				// ahead goes back, so that the nacked message comes first.
				c.release(got[i+1:])
				break
			}
		}
	}
}

// runSessions is run for an entity that requires sessions: it accepts
// the next session with messages, hands its messages out one by one, in
// order, and closes it once it has none left, or one is nacked (closing
// hands back what was received ahead without counting a delivery), then
// accepts the next, until ctx ends. Acks complete in batches under the
// session's lock, all before the session is closed.
func (c *consumer) runSessions(ctx context.Context) {
	pause := minPause
	for ctx.Err() == nil {
		sess, err := c.s.client.AcceptNextMessageSession(ctx, c.r.Entity(), nil)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, sluice.ErrNoSessionAvailable) {
				c.log.Error("accepting a session failed; trying again", err, wm.LogFields{"after": pause})
			}
			if !backOff(ctx, &pause) {
				return
			}
			continue
		}
		pause = minPause
		sc := *c
		sc.src, sc.sess = sess, sess
		// Acks complete in batches behind the session, all before it is
		// closed: its lock holds their messages until then.
		sc.acked = make(chan *sluice.ReceivedMessage, ackedBacklog)
		completed := make(chan struct{})
		go func() {
			defer close(completed)
			sc.complete()
		}()
		sc.session(ctx)
		close(sc.acked)
		<-completed
		sctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		if err := sess.Close(sctx); err != nil && !errors.Is(err, sluice.ErrSessionLockLost) {
			c.log.Error("could not close a session", err, wm.LogFields{"session_id": sess.SessionID()})
		}
		cancel()
	}
}

// session hands out the held session's messages until it has none left,
// one is nacked, or ctx ends.
func (c *consumer) session(ctx context.Context) {
	batch := 1 + c.s.cfg.PrefetchCount
	for ctx.Err() == nil {
		got, err := c.sess.TryReceive(ctx, batch)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("receiving a session's messages failed", err, wm.LogFields{"session_id": c.sess.SessionID()})
			}
			return
		}
		if len(got) == 0 {
			return
		}
		spans := lockSpans(got)
		for i, m := range got {
			if !c.handOut(ctx, m, spans[i]) {
				return
			}
		}
	}
}

// backOff waits *pause, or until ctx ends (false), and doubles *pause up
// to maxPause for the next failure.
func backOff(ctx context.Context, pause *time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(*pause):
	}
	*pause = min(2**pause, maxPause)
	return true
}

// lockSpans is what each lock had when its messages were received, to
// renew those received ahead that wait past half of it.
func lockSpans(got []*sluice.ReceivedMessage) []time.Duration {
	spans := make([]time.Duration, len(got))
	for i, m := range got {
		spans[i] = time.Until(m.LockedUntil)
	}
	return spans
}

// renew renews m's lock: the session's, which holds its messages', when
// there is one.
func (c *consumer) renew(ctx context.Context, m *sluice.ReceivedMessage) error {
	if c.sess == nil {
		return c.r.RenewLock(ctx, m)
	}
	if err := c.sess.RenewSessionLock(ctx); err != nil {
		return err
	}
	m.LockedUntil = c.sess.LockedUntil()
	return nil
}

// lost reports whether err says a lock ended: the message's or its
// session's.
func lost(err error) bool {
	return errors.Is(err, sluice.ErrLockLost) || errors.Is(err, sluice.ErrSessionLockLost)
}

// release hands back messages received ahead.
func (c *consumer) release(ms []*sluice.ReceivedMessage) {
	for _, m := range ms {
		c.settle(m, "release", func(ctx context.Context) error { return c.releaser.Release(ctx, m) })
	}
}

// handOut sends m to the channel as a Watermill message and settles it
// as its Ack or Nack says, renewing its lock meanwhile; if ctx ends
// first it abandons m. It reports whether m was acked: otherwise what
// was received after m goes back too. span is how long m's lock had when
// it was received.
func (c *consumer) handOut(ctx context.Context, m *sluice.ReceivedMessage, span time.Duration) bool {
	if time.Until(m.LockedUntil) < span/2 {
		// Received ahead, it waited while those before it were handled:
		// its lock is renewed before it goes out, or, if that fails, it
		// goes back (its lock ended: it comes again), and those after it
		// with it, so that they do not overtake it.
		if err := c.settle(m, "renew the lock of", func(sctx context.Context) error { return c.renew(sctx, m) }); err != nil {
			if !lost(err) {
				c.abandonOrRelease(m)
			}
			return false
		}
	}
	id := m.MessageID
	if id == "" {
		// Sent without one (not through a Publisher): the sequence number
		// names it as uniquely within the entity.
		id = strconv.FormatInt(m.SequenceNumber, 10)
	}
	msg := message.NewMessage(id, m.Body)
	maps.Copy(msg.Metadata, m.ApplicationProperties)
	mctx, done := context.WithCancel(ctx)
	defer done()
	var tx *sql.Tx
	if db := c.s.cfg.DB; db != nil {
		// The transaction outlives the subscription's context: an Ack that
		// comes as it ends still commits.
		tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		var err error
		if tx, err = db.BeginTx(tctx, nil); err != nil {
			c.log.Error("could not begin a message's transaction", err, wm.LogFields{"message_id": m.MessageID})
			c.abandonOrRelease(m)
			return false
		}
		defer tx.Rollback() // after a commit, it does nothing
		mctx = context.WithValue(mctx, txKey{}, tx)
	}
	msg.SetContext(mctx)
	select {
	case c.out <- msg:
	case <-ctx.Done():
		c.abandonOrRelease(m)
		return false
	}
	renewUntil := time.Now().Add(c.s.cfg.MaxLockRenewal)
	if c.s.cfg.MaxLockRenewal == 0 {
		renewUntil = time.Now().Add(DefaultMaxLockRenewal)
	}
	renew := time.NewTimer(renewIn(m.LockedUntil))
	defer renew.Stop()
	for {
		select {
		case <-msg.Acked():
			c.ack(m, tx)
			return true
		case <-msg.Nacked():
			if tx != nil {
				_ = tx.Rollback()
			}
			var opts *sluice.AbandonOptions
			if c.s.cfg.Retry != nil {
				if d := c.s.cfg.Retry.RetryDelay(m.DeliveryCount, nil); d > 0 {
					opts = &sluice.AbandonOptions{Delay: d}
				}
			}
			c.settle(m, "abandon", func(sctx context.Context) error { return c.src.Abandon(sctx, m, opts) })
			return false
		case <-ctx.Done():
			select {
			case <-msg.Acked():
				c.ack(m, tx)
			default:
				c.settle(m, "abandon", func(sctx context.Context) error { return c.src.Abandon(sctx, m, nil) })
			}
			return false
		case <-renew.C:
			if c.s.cfg.MaxLockRenewal < 0 || time.Now().After(renewUntil) {
				continue
			}
			err := c.settle(m, "renew the lock of", func(sctx context.Context) error { return c.renew(sctx, m) })
			switch {
			case err == nil:
				renew.Reset(renewIn(m.LockedUntil))
			case !lost(err):
				// The database's error, not the lock's end: try again.
				renew.Reset(max(renewIn(m.LockedUntil), minPause))
			}
		}
	}
}

// ack completes an acked message: behind the subscription, in a batch;
// with a transaction, in it, and commits it, so that the handler's writes
// and the completion happen together or not at all (a message whose
// completion fails comes again, and the handler's writes with it are
// rolled back).
func (c *consumer) ack(m *sluice.ReceivedMessage, tx *sql.Tx) {
	switch {
	case tx != nil:
		err := c.settle(m, "complete", func(ctx context.Context) error {
			if err := c.src.(txCompleter).CompleteTx(ctx, tx, m); err != nil {
				return err
			}
			return tx.Commit()
		})
		if err != nil {
			_ = tx.Rollback()
		}
	default:
		c.acked <- m
	}
}

// abandonOrRelease hands back a message that never went out: released
// where the receiver can, so that no delivery is counted, else
// abandoned.
func (c *consumer) abandonOrRelease(m *sluice.ReceivedMessage) {
	if c.sess != nil {
		return // closing the session hands it back
	}
	if c.releaser != nil {
		c.release([]*sluice.ReceivedMessage{m})
		return
	}
	c.settle(m, "abandon", func(ctx context.Context) error { return c.r.Abandon(ctx, m, nil) })
}

// complete completes the acked messages, as many at once as are waiting
// (up to completeBatch), until acked is closed and drained.
func (c *consumer) complete() {
	batch := make([]*sluice.ReceivedMessage, 0, completeBatch)
	for m := range c.acked {
		batch = append(batch[:0], m)
	more:
		for len(batch) < completeBatch {
			select {
			case m, ok := <-c.acked:
				if !ok {
					break more
				}
				batch = append(batch, m)
			default:
				break more
			}
		}
		c.settle(batch[0], "complete", func(ctx context.Context) error { return c.src.CompleteBatch(ctx, batch) })
	}
}

// renewIn is when to renew a lock that ends at until: halfway there.
func renewIn(until time.Time) time.Duration {
	return max(time.Until(until)/2, 10*time.Millisecond)
}

// settle runs one settlement with a context of its own, so that it is
// done even when the subscription has ended, and logs its failure: a
// message whose lock was lost comes again. It returns f's error.
func (c *consumer) settle(m *sluice.ReceivedMessage, op string, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	err := f(ctx)
	fields := wm.LogFields{"message_id": m.MessageID, "sequence_number": m.SequenceNumber}
	switch {
	case errors.Is(err, sluice.ErrLockLost):
		// Expected now and then: the message comes again.
		c.log.Info("could not "+op+" a message: "+err.Error(), fields)
	case err != nil:
		c.log.Error("could not "+op+" a message", err, fields)
	}
	return err
}
