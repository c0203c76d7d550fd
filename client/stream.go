package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
	"github.com/sluicehq/sluice/internal/backoff"
)

// Publish appends events to a stream atomically and returns their
// positions in the stream's partition, in order.
func (c *Client) Publish(ctx context.Context, id sluice.StreamID, events ...sluice.Event) ([]int64, error) {
	_, pos, err := c.PublishPartition(ctx, id, events...)
	return pos, err
}

// Subscribe stores a consumer's subscription to one stream, from a start
// position on (sluice.FromNow, FromBeginning or FromPosition); with an
// empty key, its subscription to the whole namespace, as the library's
// Client.Subscribe does.
func (c *Client) Subscribe(ctx context.Context, id sluice.StreamID, consumer string, from sluice.StartPosition) (sluice.StreamSubscription, error) {
	req := &sluicev1.SubscribeRequest{Stream: apiconv.StreamID(id), Consumer: consumer}
	switch from.Kind() {
	case "beginning":
		req.Start = sluicev1.StartPosition_START_POSITION_BEGINNING
	case "at":
		req.Start, req.Position = sluicev1.StartPosition_START_POSITION_AT, from.Position()
	default:
		req.Start = sluicev1.StartPosition_START_POSITION_NOW
	}
	res, err := call(ctx, c.streams.Subscribe, req)
	if err != nil {
		return sluice.StreamSubscription{}, err
	}
	return apiconv.FromStreamSubscription(res.Subscription), nil
}

// Unsubscribe deletes a subscription, with its progress and parked
// events.
func (c *Client) Unsubscribe(ctx context.Context, subscription string) error {
	_, err := call(ctx, c.streams.Unsubscribe, &sluicev1.UnsubscribeRequest{Subscription: subscription})
	return err
}

// StreamSubscriptions lists the subscriptions that receive a stream's
// events: those to the stream and those to its whole namespace, of the
// consumers the key may receive, all of them (a page at a time).
func (c *Client) StreamSubscriptions(ctx context.Context, id sluice.StreamID) ([]sluice.StreamSubscription, error) {
	var out []sluice.StreamSubscription
	seen := make(map[string]bool)
	opts := sluice.StreamSubscriptionListOptions{Max: maxStreamSubscriptionPage}
	for {
		page, err := c.ListStreamSubscriptions(ctx, id, &opts)
		if err != nil {
			return nil, err
		}
		fresh := 0
		for _, s := range page {
			if !seen[s.ID] {
				seen[s.ID] = true
				out = append(out, s)
				fresh++
			}
		}
		// A page shorter than asked is the last; so is one longer, or
		// one of subscriptions already seen: a server of an earlier
		// release lists them all at once, whatever max and after say.
		if len(page) != opts.Max || fresh < len(page) {
			return out, nil
		}
		opts.AfterConsumer, opts.AfterID = page[len(page)-1].Consumer, page[len(page)-1].ID
	}
}

// maxStreamSubscriptionPage is the largest page of subscriptions the API
// lists.
const maxStreamSubscriptionPage = 1000

// ListStreamSubscriptions lists a page of the subscriptions that receive
// a stream's events, of the consumers the key may receive, as
// sluice.Client.ListStreamSubscriptions lists them.
func (c *Client) ListStreamSubscriptions(ctx context.Context, id sluice.StreamID, opts *sluice.StreamSubscriptionListOptions) ([]sluice.StreamSubscription, error) {
	req := &sluicev1.ListStreamSubscriptionsRequest{Stream: apiconv.StreamID(id)}
	if opts != nil {
		req.Max, req.AfterConsumer, req.AfterId = int32(min(opts.Max, math.MaxInt32)), opts.AfterConsumer, opts.AfterID
		req.Consumer, req.ConsumerPrefix = opts.Consumer, opts.ConsumerPrefix
	}
	res, err := call(ctx, c.streams.ListStreamSubscriptions, req)
	if err != nil {
		return nil, err
	}
	var out []sluice.StreamSubscription
	for _, s := range res.Subscriptions {
		out = append(out, apiconv.FromStreamSubscription(s))
	}
	return out, nil
}

// GetStreamSubscription returns a subscription, with its fault if it
// stopped. sluice.ErrSubscriptionNotFound if absent.
func (c *Client) GetStreamSubscription(ctx context.Context, subscription string) (sluice.StreamSubscription, error) {
	res, err := call(ctx, c.streams.GetStreamSubscription, &sluicev1.GetStreamSubscriptionRequest{Subscription: subscription})
	if err != nil {
		return sluice.StreamSubscription{}, err
	}
	return apiconv.FromStreamSubscription(res.Subscription), nil
}

// ClearFault resumes a faulted subscription: the event that faulted it is
// delivered again, then the ones after it.
func (c *Client) ClearFault(ctx context.Context, subscription string) error {
	_, err := call(ctx, c.streams.ClearFault, &sluicev1.ClearFaultRequest{Subscription: subscription})
	return err
}

// ParkedEvents lists up to max of a subscription's parked events, oldest
// first.
func (c *Client) ParkedEvents(ctx context.Context, subscription string, max int) ([]sluice.ParkedEvent, error) {
	if max < 1 || max > maxPage {
		return nil, fmt.Errorf("sluice: parked events: max %d: want 1 to %d: %w", max, maxPage, sluice.ErrInvalidArgument)
	}
	res, err := call(ctx, c.streams.ListParkedEvents, &sluicev1.ListParkedEventsRequest{Subscription: subscription, Max: int32(max)})
	if err != nil {
		return nil, err
	}
	out := make([]sluice.ParkedEvent, len(res.Events))
	for i, e := range res.Events {
		out[i] = apiconv.FromParkedEvent(e)
	}
	return out, nil
}

// maxPage bounds a listing, as the server does.
const maxPage = 1000

// SetStreamRetention sets a namespace's retention.
func (c *Client) SetStreamRetention(ctx context.Context, namespace string, r sluice.StreamRetention) error {
	_, err := call(ctx, c.streams.SetStreamRetention, &sluicev1.SetStreamRetentionRequest{Namespace: namespace,
		MaxAge: apiconv.DurationPB(r.MaxAge), MaxBytes: r.MaxBytes, Expiry: apiconv.DurationPB(r.Expiry), Parked: apiconv.DurationPB(r.Parked)})
	return err
}

// StreamProcessor delivers the events of its consumers' subscriptions
// from the server, as sluice.StreamProcessor does in process: the server
// runs a stream node for each consumer while this processor (or another
// one of the consumer) consumes, and pulls each partition for it on one
// server of the cluster; each stream's events come one at a time, in
// order, at least once. A delivery settles with its handler's return:
// nil acknowledges it; an error or a panic fails it (retried with
// backoff, then the consumer's failure policy applies). Each delivery's
// context ends at its ack timeout (ConsumerOptions.DeliveryTimeout):
// the server then delivers the event again, so a handler should return
// by then. A broken connection is opened again with backoff until Stop;
// deliveries whose settlement it lost are delivered again.
type StreamProcessor struct {
	c          *Client
	group      string
	middleware []sluice.StreamMiddleware
	log        *slog.Logger

	mu        sync.Mutex
	consumers []*remoteConsumer
	started   bool
	cancel    context.CancelFunc
	// draining is closed when Stop begins: new deliveries are left for
	// the server to hand to another stream.
	draining chan struct{}
	handlers sync.WaitGroup // deliveries in progress
	loops    sync.WaitGroup // consume loops
	acks     chan string
	// flush makes the ack loop send what is queued and end; acked is
	// closed when it has.
	flush     chan struct{}
	flushOnce sync.Once
	acked     chan struct{}
}

// remoteConsumer is a consumer registered on a StreamProcessor.
type remoteConsumer struct {
	name string
	h    sluice.StreamHandler
	opts sluice.ConsumerOptions
}

// NewStreamProcessor returns a processor; register consumers with
// Handle, then Start it. Of opts only Group (the group of stream nodes
// the server joins for each consumer; by default the consumer's name)
// and Middleware (run around each handler, inside
// sluice.RecoverStream, as in process) apply: the server's
// configuration times its nodes.
func (c *Client) NewStreamProcessor(opts *sluice.StreamProcessorOptions) *StreamProcessor {
	p := &StreamProcessor{c: c, log: slog.New(slog.DiscardHandler), draining: make(chan struct{}), acks: make(chan string, 1024),
		flush: make(chan struct{}), acked: make(chan struct{})}
	if opts != nil {
		p.group, p.middleware = opts.Group, opts.Middleware
	}
	return p
}

// Handle registers a consumer and its handler, before Start.
func (p *StreamProcessor) Handle(consumer string, h sluice.StreamHandler, opts *sluice.ConsumerOptions) error {
	if h == nil {
		return fmt.Errorf("sluice: register consumer %q: no handler: %w", consumer, sluice.ErrInvalidArgument)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return fmt.Errorf("sluice: register consumer %q: the processor has started: %w", consumer, sluice.ErrInvalidArgument)
	}
	if slices.ContainsFunc(p.consumers, func(rc *remoteConsumer) bool { return rc.name == consumer }) {
		return fmt.Errorf("sluice: register consumer %q: %w", consumer, sluice.ErrEntityExists)
	}
	wrapped, err := sluice.WrapStream(h, p.middleware)
	if err != nil {
		return fmt.Errorf("sluice: register consumer %q: %w", consumer, err)
	}
	rc := &remoteConsumer{name: consumer, h: wrapped}
	if opts != nil {
		rc.opts = *opts
	}
	p.consumers = append(p.consumers, rc)
	return nil
}

// Start opens a Consume stream for each consumer and returns once the
// server runs them all, or with the first error (ErrConsumerConflict
// when another group of nodes handles one of them, ErrSingleNode when
// another SQLite server does).
func (p *StreamProcessor) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return fmt.Errorf("sluice: start stream processor: started already: %w", sluice.ErrInvalidArgument)
	}
	p.started = true
	consumers := slices.Clone(p.consumers)
	run, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.mu.Unlock()
	go p.ackLoop()
	for _, rc := range consumers {
		s, err := p.open(run, ctx, rc, "")
		if err != nil {
			// Stopped for good: a later (or concurrent) Stop finds it so.
			p.mu.Lock()
			if !isClosed(p.draining) {
				close(p.draining)
			}
			p.mu.Unlock()
			cancel()
			p.loops.Wait()
			p.closeFlush()
			<-p.acked
			return err
		}
		// Under mu, as Stop closes draining: a loop counted here is
		// counted before Stop waits for the loops.
		p.mu.Lock()
		if isClosed(p.draining) {
			p.mu.Unlock()
			s.Close()
			s.cancel()
			return fmt.Errorf("sluice: start stream processor: stopped while starting: %w", sluice.ErrClosed)
		}
		p.loops.Add(1)
		p.mu.Unlock()
		go p.consume(run, rc, s)
	}
	return nil
}

// consumeStream is an open Consume stream with its context, which ends
// with the stream (and cancels the handlers of its deliveries).
type consumeStream struct {
	sluicev1connect.StreamServiceConsumeClientStream
	ctx    context.Context
	cancel context.CancelFunc
	// id names the stream on the server; silence is how long it may stay
	// silent before it counts as broken.
	id      string
	silence time.Duration
	conn    net.Conn // nil if unknown
	// read is when the stream last read bytes (UnixNano).
	read *atomic.Int64
}

// silentBeats is how many heartbeats a stream may miss before the
// client takes it as broken; reopenWait bounds the wait for the server
// to run the consumer again, on a connection that may be broken too.
const (
	silentBeats = 3
	reopenWait  = 30 * time.Second
)

// closeFlush tells the ack loop to send what is queued and end, once.
func (p *StreamProcessor) closeFlush() { p.flushOnce.Do(func() { close(p.flush) }) }

// open opens a consumer's Consume stream, which lasts until run ends and
// replaces the stream of id replaces (if the server still has it), and
// waits until wait ends for the server to run the consumer.
func (p *StreamProcessor) open(run, wait context.Context, rc *remoteConsumer, replaces string) (*consumeStream, error) {
	ctx, cancel := context.WithCancel(run) // the stream's: it ends with run
	stopWaiting := context.AfterFunc(wait, cancel)
	defer stopWaiting()
	opened := false
	defer func() {
		if !opened {
			cancel()
		}
	}()
	req := apiconv.ConsumeRequest(rc.name, p.group, rc.opts)
	req.Replaces = replaces
	// The connection that carries the stream, to close if it falls
	// silent. Only the call is traced, not the handlers it runs.
	var conn atomic.Pointer[net.Conn]
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		conn.Store(&info.Conn)
	}})
	read := new(atomic.Int64)
	traced = withReads(traced, read)
	stream, err := p.c.streams.Consume(traced, req)
	if err != nil {
		return nil, apierr.ToLibrary(err)
	}
	first, err := stream.Receive()
	if !stopWaiting() && wait.Err() != nil {
		stream.Close()
		return nil, wait.Err()
	}
	switch {
	case errors.Is(err, io.EOF):
		stream.Close()
		return nil, fmt.Errorf("sluice: consume %s: the server closed the stream: %w", rc.name, sluice.ErrClosed)
	case err != nil:
		stream.Close()
		return nil, apierr.ToLibrary(err)
	case first.GetStarted() == nil:
		stream.Close()
		return nil, fmt.Errorf("sluice: consume %s: the server sent no start", rc.name)
	}
	opened = true
	beat := 15 * time.Second // a server that does not say
	if h := first.GetStarted().GetHeartbeat(); h != nil && h.AsDuration() > 0 {
		beat = h.AsDuration()
	}
	cs := &consumeStream{StreamServiceConsumeClientStream: stream, ctx: ctx, cancel: cancel,
		id: first.GetStarted().GetStreamId(), silence: silentBeats * beat, read: read}
	if c := conn.Load(); c != nil {
		cs.conn = *c
	}
	return cs, nil
}

// consume runs a consumer's deliveries until the processor stops,
// opening its stream again when it breaks or falls silent. A broken
// stream's handlers are cancelled, and have returned, before the next
// stream opens: the server hands their deliveries to other streams, and
// a stream's events must never be handled twice at once. The next
// stream replaces the broken one, so that a server that has not noticed
// the break yet ends it at once.
func (p *StreamProcessor) consume(ctx context.Context, rc *remoteConsumer, stream *consumeStream) {
	defer p.loops.Done()
	for {
		var handlers sync.WaitGroup
		p.receive(rc, stream, &handlers)
		stream.Close()
		stream.cancel()
		handlers.Wait()
		broken := stream.id
		for failures := 1; ; failures++ {
			t := time.NewTimer(reopenBackoff.Delay(failures))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-p.draining:
				t.Stop()
				return
			case <-t.C:
			}
			wait, cancel := context.WithTimeout(ctx, reopenWait)
			var err error
			stream, err = p.open(ctx, wait, rc, broken)
			cancel()
			if err == nil {
				break
			}
			p.log.Warn("sluice: client: cannot consume; trying again", "consumer", rc.name, "err", err)
		}
	}
}

// reopenBackoff spaces the attempts to open a consumer's stream again.
var reopenBackoff = backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: true}

// receive hands each delivery of stream to its handler until the stream
// ends, or reads nothing (no delivery, no heartbeat, not a byte) for too
// long: its connection is then taken as broken, and the stream is
// cancelled.
func (p *StreamProcessor) receive(rc *remoteConsumer, stream *consumeStream, handlers *sync.WaitGroup) {
	watching := make(chan struct{})
	defer func() { <-watching }()
	defer stream.cancel()
	go func() {
		defer close(watching)
		watch(stream.ctx, stream.read, nil, stream.silence, func() {
			p.log.Warn("sluice: client: consume stream silent; opening another", "consumer", rc.name, "silent", stream.silence)
			stream.cancel()
			// Its connection is taken as broken, with the calls it carries
			// (HTTP/2 shares it); the idle ones to the server are likely
			// broken as well. The next calls dial anew.
			if stream.conn != nil {
				stream.conn.Close()
			}
			p.c.hc.CloseIdleConnections()
		})
	}()
	for {
		msg, err := stream.Receive()
		if err != nil {
			if stream.ctx.Err() == nil && !errors.Is(err, io.EOF) {
				p.log.Warn("sluice: client: consume stream broke", "consumer", rc.name, "err", err)
			}
			return
		}
		d := msg.GetDelivery()
		if d == nil {
			continue // a heartbeat
		}
		// Under mu, as Stop closes draining: a handler counted here is
		// counted before Stop waits for the handlers.
		p.mu.Lock()
		if isClosed(p.draining) {
			p.mu.Unlock()
			continue // the server hands it to another stream once this one closes
		}
		p.handlers.Add(1)
		p.mu.Unlock()
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			p.handle(stream.ctx, rc, d)
		}()
	}
}

// handle runs one delivery's handler and settles it.
func (p *StreamProcessor) handle(ctx context.Context, rc *remoteConsumer, d *sluicev1.StreamDelivery) {
	defer p.handlers.Done()
	hctx := ctx
	// The time left counts from receipt: no clock skew shifts it.
	deadline := apiconv.Time(d.GetDeadline())
	if d.AckWithin != nil {
		deadline = time.Now().Add(d.AckWithin.AsDuration())
	}
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	err := rc.h(hctx, apiconv.FromStreamEvent(d.GetEvent()))
	if err == nil {
		select {
		case p.acks <- d.DeliveryId:
		case <-ctx.Done():
		}
		return
	}
	if hctx.Err() != nil {
		// Past its deadline, or cut short by Stop: the server delivers it
		// again, and it counts as no failure.
		return
	}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	msg := err.Error()
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	if _, err := p.c.streams.Nack(nctx, &sluicev1.NackRequest{DeliveryId: d.DeliveryId, Error: msg}); err != nil {
		p.log.Warn("sluice: client: cannot fail a delivery; it is delivered again once its ack timeout passes", "err", err)
	}
}

// ackLoop acknowledges handled deliveries, as many in one call as are
// waiting, until flush: then it sends what is queued and ends.
func (p *StreamProcessor) ackLoop() {
	defer close(p.acked)
	for {
		var batch []string
		flushing := false
		select {
		case id := <-p.acks:
			batch = append(batch, id)
		case <-p.flush:
			flushing = true
		}
	drain:
		for len(batch) < maxPage {
			select {
			case id := <-p.acks:
				batch = append(batch, id)
			default:
				break drain
			}
		}
		if len(batch) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := p.c.streams.Ack(ctx, &sluicev1.AckRequest{DeliveryIds: batch}); err != nil {
				p.log.Warn("sluice: client: cannot acknowledge deliveries; they are delivered again", "count", len(batch), "err", err)
			}
			cancel()
		}
		if flushing && len(p.acks) == 0 {
			return
		}
	}
}

// Stop stops taking deliveries, waits until ctx ends for those in
// progress to finish and be acknowledged, then closes the streams: the
// server hands what is left to the consumers' other streams, or keeps
// it for the next.
func (p *StreamProcessor) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.started || isClosed(p.draining) {
		p.mu.Unlock()
		return nil
	}
	close(p.draining)
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.handlers.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	// Acknowledgements queued by the handlers go out before the streams
	// close, which would hand their deliveries to other streams.
	p.closeFlush()
	<-p.acked
	p.cancel()
	p.loops.Wait()
	return err
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Replay delivers up to max of a subscription's parked events again,
// oldest first, through a Consume stream of its consumer on the server,
// and returns how many were delivered. It stops at the first that fails
// again (which stays parked, with its new error), and when the
// consumer's streams on the server close, and then returns the count
// with an error that says why.
func (p *StreamProcessor) Replay(ctx context.Context, subscription string, max int) (int, error) {
	if max < 1 || max > maxPage {
		return 0, fmt.Errorf("sluice: replay: max %d: want 1 to %d: %w", max, maxPage, sluice.ErrInvalidArgument)
	}
	res, err := call(ctx, p.c.streams.ReplayParkedEvents, &sluicev1.ReplayParkedEventsRequest{Subscription: subscription, Max: int32(max)})
	if err != nil {
		return 0, err
	}
	if res.Failure != "" {
		return int(res.Delivered), fmt.Errorf("sluice: replay stopped after %d: %s", res.Delivered, res.Failure)
	}
	return int(res.Delivered), nil
}

// TailStream follows the streams of a namespace, or only its stream key
// when key is set, from now on, as sluice.Client.TailStream does: each
// event published after it started goes to each, in order within each
// partition, until ctx ends (it then returns ctx's error) or each returns
// an error (which it returns). It stores nothing on the server.
func (c *Client) TailStream(ctx context.Context, namespace, key string, each func(*sluice.StreamEvent) error, opts *sluice.TailOptions) error {
	var o sluice.TailOptions
	if opts != nil {
		o = *opts
	}
	// The tail ends with ctx, on this side: a deadline sent along would
	// end it on the server's first, as an error.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	read := new(atomic.Int64)
	read.Store(time.Now().UnixNano())
	stream, err := c.streams.Tail(withReads(sctx, read), &sluicev1.TailRequest{Namespace: namespace, Key: key})
	if err != nil {
		return apierr.ToLibrary(err)
	}
	defer stream.Close()
	// A tail that reads nothing, not even a heartbeat, for silentBeats
	// heartbeats is broken: it ends with ErrClosed, for the caller to
	// follow again from where it stands. The time spent in the callbacks
	// does not count.
	var silent, busy atomic.Bool
	silence := silentBeats * 15 * time.Second
	startWatch := sync.OnceFunc(func() {
		go watch(sctx, read, &busy, silence, func() {
			silent.Store(true)
			cancel()
			c.hc.CloseIdleConnections()
		})
	})
	for {
		busy.Store(false)
		msg, err := stream.Receive()
		busy.Store(true)
		read.Store(time.Now().UnixNano())
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case silent.Load():
			return fmt.Errorf("sluice: tail: the server sent nothing for %v: %w", silence, sluice.ErrClosed)
		case errors.Is(err, io.EOF):
			return fmt.Errorf("sluice: tail: the server ended the tail: %w", sluice.ErrClosed)
		case err != nil:
			return apierr.ToLibrary(err)
		}
		switch k := msg.Kind.(type) {
		case *sluicev1.TailResponse_Started:
			if h := k.Started.GetHeartbeat(); h != nil && h.AsDuration() > 0 {
				silence = silentBeats * h.AsDuration()
			}
			startWatch()
			if o.Started != nil {
				o.Started(int(k.Started.Partitions))
			}
		case *sluicev1.TailResponse_Trimmed:
			if o.Trimmed != nil {
				o.Trimmed(k.Trimmed.Partition, k.Trimmed.From, k.Trimmed.To)
			}
		case *sluicev1.TailResponse_Event:
			if err := each(apiconv.FromStreamEvent(k.Event)); err != nil {
				return err
			}
		}
	}
}

// watch calls fire once a stream has read nothing (read, UnixNano) for
// silence while not busy, checking a few times a silence, until ctx ends.
func watch(ctx context.Context, read *atomic.Int64, busy *atomic.Bool, silence time.Duration, fire func()) {
	t := time.NewTicker(silence / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if busy != nil && busy.Load() {
			read.Store(time.Now().UnixNano())
			continue
		}
		if time.Since(time.Unix(0, read.Load())) >= silence {
			fire()
			return
		}
	}
}

// PublishPartition is Publish that also returns the stream's partition.
func (c *Client) PublishPartition(ctx context.Context, id sluice.StreamID, events ...sluice.Event) (int32, []int64, error) {
	return c.tracePublish(ctx, id, events, func(ctx context.Context, events []sluice.Event) (int32, []int64, error) {
		res, err := call(ctx, c.streams.Publish, &sluicev1.PublishRequest{Stream: apiconv.StreamID(id), Events: apiconv.Events(events)})
		if err != nil {
			return 0, nil, err
		}
		return res.Partition, res.Positions, nil
	})
}
