package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/store"
)

// Bounds of a Consume call's options and of the settling calls.
const (
	maxAckTimeout     = time.Hour
	maxConcurrency    = 1000
	maxAttempts       = 1000
	maxSettleBatch    = 1000
	defaultParkedPage = 100
)

// streams serves StreamService. A Consume call attaches a stream to the
// server's node of the consumer, started with the first one and stopped
// with the last: the node's handler sends each delivery to the attached
// stream with the fewest awaiting settlement, and waits for its Ack or
// Nack.
type streams struct {
	s *Server
	m streamMetrics

	mu         sync.Mutex
	consumers  map[string]*remoteConsumer
	deliveries map[string]*delivery
	// calls counts the Consume and Tail calls running; drained, when
	// set, is closed once none is.
	calls   int
	drained chan struct{}
}

// enter counts a Consume or Tail call in, unless MaxStreams are open
// and it does not replace one; the returned func counts it out.
func (h *streams) enter(replacing bool) (leave func(), err error) {
	h.mu.Lock()
	if h.calls >= h.s.cfg.MaxStreams && !replacing {
		h.mu.Unlock()
		return nil, apierr.New(connect.CodeResourceExhausted, "TOO_MANY_STREAMS",
			fmt.Sprintf("%d Consume and Tail streams are open on this server, at most %d allowed", h.calls, h.s.cfg.MaxStreams))
	}
	h.calls++
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls--
		if h.calls == 0 && h.drained != nil {
			close(h.drained)
			h.drained = nil
		}
	}, nil
}

// wait waits until ctx ends for the Consume and Tail calls to end, and
// their consumers to stop.
func (h *streams) wait(ctx context.Context) error {
	h.mu.Lock()
	if h.calls == 0 {
		h.mu.Unlock()
		return nil
	}
	if h.drained == nil {
		h.drained = make(chan struct{})
	}
	drained := h.drained
	h.mu.Unlock()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sluice: server: streams still open at shutdown: %w", ctx.Err())
	}
}

func newStreams(s *Server) *streams {
	h := &streams{s: s, consumers: make(map[string]*remoteConsumer), deliveries: make(map[string]*delivery),
		m: streamMetrics{
			published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_stream_events_published_total",
				Help: "Stream events published through the API, by namespace."}, []string{"namespace"}),
			delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_stream_deliveries_total",
				Help: "Stream deliveries sent to Consume streams, by consumer and outcome (ack, nack, expired: past the ack timeout, " +
					"stream_closed: handed to another stream, cut_short: the consumer stopped)."},
				[]string{"consumer", "outcome"}),
		}}
	h.m.consumers = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_stream_consume_streams",
		Help: "Consume streams open on this server."}, func() float64 {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for _, rc := range h.consumers {
			n += len(rc.streams)
		}
		return float64(n)
	})
	s.m.reg.MustRegister(h.m.published, h.m.delivered, h.m.consumers, &cacheCollector{h})
	return h
}

// streamMetrics count what StreamService does.
type streamMetrics struct {
	published *prometheus.CounterVec
	delivered *prometheus.CounterVec
	consumers prometheus.GaugeFunc
}

// remoteConsumer is a consumer that Consume streams handle on this
// server. Its fields after proc are guarded by streams.mu.
type remoteConsumer struct {
	name, group string
	opts        sluice.ConsumerOptions
	proc        *sluice.StreamProcessor
	// unhold gives back the place the consumer takes in the bound of the
	// key whose Consume started it (Key.MaxConsumers).
	unhold func()

	streams map[*consumeStream]struct{}
	// attached is closed, and replaced, when a stream attaches.
	attached chan struct{}
	// started is closed once proc started, or failed to (startErr).
	started  chan struct{}
	startErr error
	// stopping is set, and leaving closed, once the last stream left;
	// stopped is closed once proc stopped and the consumer left the map.
	stopping bool
	leaving  chan struct{}
	stopped  chan struct{}
}

// consumeStream is one Consume call's stream.
type consumeStream struct {
	id string
	// key is the call's API key (nil without keys); release gives back
	// the stream's place in its key's bound (nil: it holds none). release
	// is guarded by streams.mu once the stream attached.
	key     *authKey
	release func()
	out     chan *sluicev1.ConsumeResponse
	pending int           // deliveries awaiting settlement
	done    chan struct{} // closed when the call ends
}

// delivery is a delivery awaiting its Ack or Nack.
type delivery struct {
	consumer string
	stream   *consumeStream
	result   chan error // buffered: the first settlement wins
}

// nacked is a delivery's failure, as its Nack's reason says.
type nacked string

func (e nacked) Error() string { return string(e) }

// errConsumerLeft ends what waits on a consumer whose last stream on
// this server closed.
var errConsumerLeft = errors.New("the consumer's last Consume stream on this server closed")

func (h *streams) Publish(ctx context.Context, req *sluicev1.PublishRequest) (*sluicev1.PublishResponse, error) {
	id := apiconv.FromStreamID(req.GetStream())
	if err := h.s.authorize(ctx, Send, id.Namespace); err != nil {
		return nil, err
	}
	if len(req.Events) == 0 {
		return nil, apierr.Invalid("publish: no events")
	}
	pos, err := h.s.c.Publish(ctx, id, apiconv.FromEvents(req.Events)...)
	if err != nil {
		return nil, h.s.fail("publish", err)
	}
	h.m.published.WithLabelValues(h.s.m.entity(id.Namespace)).Add(float64(len(pos)))
	return &sluicev1.PublishResponse{Positions: pos, Partition: sluice.PartitionOf(id, h.s.c.StreamPartitions())}, nil
}

func (h *streams) Subscribe(ctx context.Context, req *sluicev1.SubscribeRequest) (*sluicev1.SubscribeResponse, error) {
	id := apiconv.FromStreamID(req.GetStream())
	if err := h.s.authorize(ctx, Receive, id.Namespace); err != nil {
		return nil, err
	}
	if err := h.s.authorize(ctx, Receive, req.Consumer); err != nil {
		return nil, err
	}
	from, err := apiconv.StartPosition(req.Start, req.Position)
	if err != nil {
		return nil, h.s.fail("subscribe", err)
	}
	if req.Start != sluicev1.StartPosition_START_POSITION_AT && req.Position != 0 {
		return nil, apierr.Invalid("subscribe: a position needs START_POSITION_AT")
	}
	sub, err := h.s.c.Subscribe(ctx, id, req.Consumer, from)
	if err != nil {
		return nil, h.s.fail("subscribe", err)
	}
	return &sluicev1.SubscribeResponse{Subscription: apiconv.StreamSubscription(sub)}, nil
}

// subscription returns a subscription after checking that the call may
// act on its consumer.
func (h *streams) subscription(ctx context.Context, a Action, op, id string) (sluice.StreamSubscription, error) {
	if id == "" {
		return sluice.StreamSubscription{}, apierr.Invalid(op + ": no subscription")
	}
	if len(id) > store.MaxNameLen {
		return sluice.StreamSubscription{}, apierr.Invalid(fmt.Sprintf("%s: a subscription id is at most %d characters", op, store.MaxNameLen))
	}
	// A consumer's subscription to a whole namespace has a handle anyone
	// can guess: a key that may act on none of the consumers it could
	// name is refused before the lookup, so that it cannot tell whether
	// the subscription exists. (Other handles are random: nobody finds
	// one by trying.)
	cs := stream.ImplicitConsumers(id)
	if cs != nil {
		if err := h.s.authorizeAny(ctx, a, cs, "the consumer of "+strconv.Quote(id)); err != nil {
			return sluice.StreamSubscription{}, err
		}
		if !h.mayNameBoth(ctx, a, id) {
			k, _ := ctx.Value(keyCtx{}).(*authKey)
			return sluice.StreamSubscription{}, denied(k, "receive the namespace of "+strconv.Quote(id))
		}
	}
	sub, err := h.s.c.GetStreamSubscription(ctx, id)
	if err != nil {
		return sluice.StreamSubscription{}, h.s.fail(op, err)
	}
	if err := h.s.authorize(ctx, a, sub.Consumer); err != nil {
		if cs != nil {
			// The key may act on another consumer the handle could name
			// (ns/a/b/c: "c" of namespace "a/b", not "b/c" of "a"): for
			// it, the subscription it could mean does not exist.
			return sluice.StreamSubscription{}, h.s.fail(op, fmt.Errorf("sluice: subscription %q: %w", id, sluice.ErrSubscriptionNotFound))
		}
		return sluice.StreamSubscription{}, err
	}
	// Its events (parked, replayed) and its place in them are the
	// namespace's: a key sees them only with receive there too.
	if err := h.s.authorize(ctx, Receive, sub.Stream.Namespace); err != nil {
		if cs != nil {
			return sluice.StreamSubscription{}, h.s.fail(op, fmt.Errorf("sluice: subscription %q: %w", id, sluice.ErrSubscriptionNotFound))
		}
		return sluice.StreamSubscription{}, err
	}
	return sub, nil
}

// mayNameBoth reports whether the call's key may act (a) on the consumer
// and receive the namespace of one of the readings of a namespace
// subscription's handle "ns/<namespace>/<consumer>" (a namespace may
// hold '/').
func (h *streams) mayNameBoth(ctx context.Context, a Action, id string) bool {
	k, _ := ctx.Value(keyCtx{}).(*authKey)
	rest, _ := strings.CutPrefix(id, "ns/")
	for i := 1; i < len(rest)-1; i++ {
		if rest[i] == '/' && h.s.keyAllows(k, a, rest[i+1:]) && h.s.keyAllows(k, Receive, rest[:i]) {
			return true
		}
	}
	return false
}

func (h *streams) Unsubscribe(ctx context.Context, req *sluicev1.UnsubscribeRequest) (*sluicev1.UnsubscribeResponse, error) {
	if _, err := h.subscription(ctx, Receive, "unsubscribe", req.Subscription); err != nil {
		return nil, err
	}
	if err := h.s.c.Unsubscribe(ctx, req.Subscription); err != nil {
		return nil, h.s.fail("unsubscribe", err)
	}
	return &sluicev1.UnsubscribeResponse{}, nil
}

func (h *streams) GetStreamSubscription(ctx context.Context, req *sluicev1.GetStreamSubscriptionRequest) (*sluicev1.GetStreamSubscriptionResponse, error) {
	sub, err := h.subscription(ctx, Receive, "get stream subscription", req.Subscription)
	if err != nil {
		return nil, err
	}
	return &sluicev1.GetStreamSubscriptionResponse{Subscription: apiconv.StreamSubscription(sub)}, nil
}

// ListStreamSubscriptions lists a page of a stream's subscriptions, of
// the consumers the key may receive (and the request names): the key's
// grants become ranges of consumer names, each read a page at a time, so
// what other consumers subscribed costs nothing.
func (h *streams) ListStreamSubscriptions(ctx context.Context, req *sluicev1.ListStreamSubscriptionsRequest) (*sluicev1.ListStreamSubscriptionsResponse, error) {
	id := apiconv.FromStreamID(req.GetStream())
	if err := h.s.authorize(ctx, Receive, id.Namespace); err != nil {
		return nil, err
	}
	const op = "list stream subscriptions"
	n, err := h.page(op, req.Max)
	if err != nil {
		return nil, err
	}
	if req.Consumer != "" && req.ConsumerPrefix != "" {
		return nil, apierr.Invalid(op + ": a consumer and a consumer prefix: set one or neither")
	}
	if len(req.AfterConsumer) > store.MaxNameLen || len(req.AfterId) > store.MaxNameLen || len(req.ConsumerPrefix) > store.MaxNameLen {
		return nil, apierr.Invalid(fmt.Sprintf("%s: a consumer, a prefix or an id is at most %d characters", op, store.MaxNameLen))
	}
	if req.Consumer != "" {
		if err := store.ValidateName("consumer", req.Consumer); err != nil {
			return nil, h.s.fail(op, err)
		}
	}
	after := strings.ToLower(req.AfterConsumer)
	var out []sluice.StreamSubscription
	for _, r := range h.s.consumerRanges(ctx, Receive, req.Consumer, req.ConsumerPrefix) {
		if len(out) == n {
			break
		}
		if r.prefix != "" && !validPrefix(r.prefix) || after > r.prefix && (r.exact || !strings.HasPrefix(after, r.prefix)) {
			continue // no consumer's name starts so, or the range sorts before the page
		}
		opts := sluice.StreamSubscriptionListOptions{ConsumerPrefix: r.prefix, AfterConsumer: req.AfterConsumer,
			AfterID: req.AfterId, Max: n - len(out)}
		if r.exact {
			opts.Consumer, opts.ConsumerPrefix = r.prefix, ""
		}
		page, err := h.s.c.ListStreamSubscriptions(ctx, id, &opts)
		if err != nil {
			return nil, h.s.fail(op, err)
		}
		out = append(out, page...)
	}
	res := &sluicev1.ListStreamSubscriptionsResponse{}
	for _, sub := range out {
		res.Subscriptions = append(res.Subscriptions, apiconv.StreamSubscription(sub))
	}
	return res, nil
}

func (h *streams) ClearFault(ctx context.Context, req *sluicev1.ClearFaultRequest) (*sluicev1.ClearFaultResponse, error) {
	if _, err := h.subscription(ctx, Manage, "clear fault", req.Subscription); err != nil {
		return nil, err
	}
	if err := h.s.c.ClearFault(ctx, req.Subscription); err != nil {
		return nil, h.s.fail("clear fault", err)
	}
	return &sluicev1.ClearFaultResponse{}, nil
}

// page checks a listing's size: 1 to the store's batch bound, 0 for the
// default.
func (h *streams) page(op string, max int32) (int, error) {
	limit := store.DefaultMaxBatch
	switch {
	case max == 0:
		return min(defaultParkedPage, limit), nil
	case max < 0 || int(max) > limit:
		return 0, apierr.Invalid(fmt.Sprintf("%s: max %d: want 1 to %d", op, max, limit))
	}
	return int(max), nil
}

func (h *streams) ListParkedEvents(ctx context.Context, req *sluicev1.ListParkedEventsRequest) (*sluicev1.ListParkedEventsResponse, error) {
	if _, err := h.subscription(ctx, Receive, "list parked events", req.Subscription); err != nil {
		return nil, err
	}
	max, err := h.page("list parked events", req.Max)
	if err != nil {
		return nil, err
	}
	evs, err := h.s.c.ParkedEvents(ctx, req.Subscription, max)
	if err != nil {
		return nil, h.s.fail("list parked events", err)
	}
	out := &sluicev1.ListParkedEventsResponse{}
	for _, e := range evs {
		out.Events = append(out.Events, apiconv.ParkedEvent(e))
	}
	return out, nil
}

func (h *streams) ReplayParkedEvents(ctx context.Context, req *sluicev1.ReplayParkedEventsRequest) (*sluicev1.ReplayParkedEventsResponse, error) {
	sub, err := h.subscription(ctx, Manage, "replay parked events", req.Subscription)
	if err != nil {
		return nil, err
	}
	max, err := h.page("replay parked events", req.Max)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	rc := h.consumers[sub.Consumer]
	running := rc != nil && !rc.stopping && isClosed(rc.started) && rc.startErr == nil
	h.mu.Unlock()
	if !running {
		return nil, apierr.New(connect.CodeFailedPrecondition, "NO_CONSUMER",
			fmt.Sprintf("replay parked events: no Consume stream of consumer %q is open on this server", sub.Consumer))
	}
	// The replay delivers through the consumer's streams: it ends when
	// the last of them closes, or the server shuts down.
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-rc.leaving:
			cancel(errConsumerLeft)
		case <-h.s.stopping.Done():
			cancel(errConsumerLeft)
		case <-rctx.Done():
		}
	}()
	n, err := rc.proc.Replay(rctx, req.Subscription, max)
	out := &sluicev1.ReplayParkedEventsResponse{Delivered: int32(n)}
	switch {
	case err == nil:
		return out, nil
	case ctx.Err() != nil: // the caller left
		return nil, h.s.fail("replay parked events", context.Cause(ctx))
	case errors.Is(context.Cause(rctx), errConsumerLeft):
		out.Failure = errConsumerLeft.Error()
	case errors.As(err, new(nacked)) || errors.Is(err, context.DeadlineExceeded):
		out.Failure = err.Error() // an event failed again: its position and the client's reason
	default:
		ce, internal := apierr.FromLibrary(err)
		if internal {
			h.s.log.Error("sluice: server: replay parked events failed", "err", err)
		}
		if n == 0 {
			return nil, ce
		}
		out.Failure = ce.Message()
	}
	return out, nil
}

func (h *streams) SetStreamRetention(ctx context.Context, req *sluicev1.SetStreamRetentionRequest) (*sluicev1.SetStreamRetentionResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Namespace); err != nil {
		return nil, err
	}
	r := sluice.StreamRetention{MaxAge: apiconv.Duration(req.MaxAge), MaxBytes: req.MaxBytes,
		Expiry: apiconv.Duration(req.Expiry), Parked: apiconv.Duration(req.Parked)}
	if r.MaxAge < 0 || r.MaxBytes < 0 || r.Expiry < 0 || r.Parked < 0 {
		return nil, apierr.Invalid("set stream retention: negative bound")
	}
	if err := h.s.c.SetStreamRetention(ctx, req.Namespace, r); err != nil {
		return nil, h.s.fail("set stream retention", err)
	}
	return &sluicev1.SetStreamRetentionResponse{}, nil
}

// checkConsume validates a Consume call's options.
func checkConsume(req *sluicev1.ConsumeRequest) (sluice.ConsumerOptions, string, error) {
	if err := store.ValidateName("consumer", req.Consumer); err != nil {
		return sluice.ConsumerOptions{}, "", err
	}
	if req.Namespace != "" {
		if err := store.ValidateName("namespace", req.Namespace); err != nil {
			return sluice.ConsumerOptions{}, "", err
		}
	}
	group := req.Group
	if group == "" {
		group = req.Consumer
	}
	if err := store.ValidateGroup(group); err != nil {
		return sluice.ConsumerOptions{}, "", err
	}
	o, err := apiconv.ConsumerOptions(req)
	if err != nil {
		return o, "", err
	}
	switch {
	case o.MaxConcurrency < 0 || o.DeliveryTimeout < 0 || o.MaxAttempts < 0 || o.RetryBackoff < 0 || o.MaxRetryBackoff < 0:
		return o, "", fmt.Errorf("consume: negative consumer option: %w", sluice.ErrInvalidArgument)
	case o.DeliveryTimeout > maxAckTimeout:
		return o, "", fmt.Errorf("consume: ack timeout %v: at most %v: %w", o.DeliveryTimeout, maxAckTimeout, sluice.ErrInvalidArgument)
	case o.MaxConcurrency > maxConcurrency:
		return o, "", fmt.Errorf("consume: max concurrency %d: at most %d: %w", o.MaxConcurrency, maxConcurrency, sluice.ErrInvalidArgument)
	case o.MaxAttempts > maxAttempts:
		return o, "", fmt.Errorf("consume: max attempts %d: at most %d: %w", o.MaxAttempts, maxAttempts, sluice.ErrInvalidArgument)
	case o.RetryBackoff > maxAckTimeout || o.MaxRetryBackoff > maxAckTimeout:
		return o, "", fmt.Errorf("consume: retry backoff at most %v: %w", maxAckTimeout, sluice.ErrInvalidArgument)
	}
	return o, group, nil
}

// describe spells out a consumer's options, for a conflict's message
// (zero values take the library's defaults).
func describe(o sluice.ConsumerOptions) string {
	return fmt.Sprintf("namespace %q, max concurrency %d, ack timeout %v, max attempts %d, retry backoff %v to %v, on failure %v",
		o.Namespace, o.MaxConcurrency, o.DeliveryTimeout, o.MaxAttempts, o.RetryBackoff, o.MaxRetryBackoff, o.OnFailure)
}

func (h *streams) Consume(ctx context.Context, req *sluicev1.ConsumeRequest, stream sluicev1connect.StreamServiceConsumeServerStream) error {
	if err := h.s.authorize(ctx, Receive, req.Consumer); err != nil {
		return err
	}
	if req.Namespace != "" {
		if err := h.s.authorize(ctx, Receive, req.Namespace); err != nil {
			return err
		}
	}
	opts, group, err := checkConsume(req)
	if err != nil {
		return h.s.fail("consume", err)
	}
	key, _ := ctx.Value(keyCtx{}).(*authKey)
	cs := &consumeStream{id: newID(), key: key, out: make(chan *sluicev1.ConsumeResponse), done: make(chan struct{})}
	defer h.releaseSlot(cs)
	// A stream that replaces one of its key's takes over that one's place
	// in the bounds once it attaches (attach checks that it does).
	replacing := req.Replaces != "" && h.has(req.Consumer, req.Replaces, key)
	release, slotErr := h.s.holdStream(ctx)
	switch {
	case slotErr == nil:
		cs.release = sync.OnceFunc(release)
	case !replacing:
		return slotErr
	}
	leave, err := h.enter(replacing)
	if err != nil {
		return err
	}
	defer leave()
	// The call ends when the client goes or the server shuts down.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopAfter := context.AfterFunc(h.s.stopping, cancel)
	defer stopAfter()

	rc, err := h.attach(ctx, cs, req.Consumer, group, opts, req.Replaces, slotErr)
	if err != nil {
		return err
	}
	defer h.detach(rc, cs)
	beat := h.s.cfg.Heartbeat
	if err := stream.Send(&sluicev1.ConsumeResponse{Kind: &sluicev1.ConsumeResponse_Started{
		Started: &sluicev1.ConsumeStarted{Node: rc.proc.NodeID(), Group: group, StreamId: cs.id,
			Heartbeat: durationpb.New(beat)}}}); err != nil {
		return err
	}
	idle := time.NewTimer(beat)
	defer idle.Stop()
	for {
		var msg *sluicev1.ConsumeResponse
		select {
		case <-ctx.Done():
			return nil
		case <-cs.done: // replaced by a newer stream of its client
			return nil
		case msg = <-cs.out:
		case <-idle.C:
			msg = &sluicev1.ConsumeResponse{Kind: &sluicev1.ConsumeResponse_Heartbeat{Heartbeat: &sluicev1.Heartbeat{}}}
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
		idle.Reset(beat)
	}
}

// attach attaches a new stream to the consumer's node on this server,
// starting the node first if it is not running, and detaches the stream
// it replaces, of the same key. A stream without a place in its key's
// bound (cs.release nil, for slotErr) takes the replaced one's, or fails
// with slotErr.
func (h *streams) attach(ctx context.Context, cs *consumeStream, name, group string, opts sluice.ConsumerOptions, replaces string,
	slotErr error) (*remoteConsumer, error) {
	for {
		h.mu.Lock()
		rc := h.consumers[name]
		if rc != nil && rc.stopping {
			stopped := rc.stopped
			h.mu.Unlock()
			select {
			case <-stopped:
				continue
			case <-ctx.Done():
				return nil, h.s.fail("consume", context.Cause(ctx))
			}
		}
		if rc != nil {
			if rc.group != group || rc.opts != opts {
				h.mu.Unlock()
				return nil, apierr.New(connect.CodeFailedPrecondition, "CONSUMER_CONFLICT", fmt.Sprintf(
					"consume: consumer %q runs on this server in group %q with %s; a stream asking for other options "+
						"is refused until its streams here close", name, rc.group, describe(rc.opts)))
			}
			old := h.find(rc, replaces, cs.key)
			if cs.release == nil {
				if old == nil {
					h.mu.Unlock()
					return nil, slotErr
				}
				cs.release, old.release = old.release, nil
			}
			h.addStream(rc, cs)
			started := rc.started
			h.mu.Unlock()
			if old != nil {
				h.detach(rc, old)
				h.s.log.Info("sluice: server: a consume stream replaced a silent one", "consumer", name)
			}
			select {
			case <-started:
			case <-ctx.Done():
				h.detach(rc, cs)
				return nil, h.s.fail("consume", context.Cause(ctx))
			}
			if rc.startErr != nil {
				h.detach(rc, cs)
				return nil, h.s.fail("consume", rc.startErr)
			}
			return rc, nil
		}
		if cs.release == nil {
			h.mu.Unlock()
			return nil, slotErr // the stream it would replace is gone
		}
		if len(h.consumers) >= h.s.cfg.MaxConsumers {
			h.mu.Unlock()
			return nil, apierr.New(connect.CodeResourceExhausted, "TOO_MANY_CONSUMERS", fmt.Sprintf(
				"consume: %d consumers run on this server, at most %d allowed", h.s.cfg.MaxConsumers, h.s.cfg.MaxConsumers))
		}
		unhold, err := holdConsumer(cs.key)
		if err != nil {
			h.mu.Unlock()
			return nil, err
		}
		rc = h.newConsumer(name, group, opts)
		rc.unhold = unhold
		h.consumers[name] = rc
		h.addStream(rc, cs)
		h.mu.Unlock()
		// Other streams may wait for this start: it runs whether or not
		// this call stays, until the server shuts down.
		startCtx, cancelStart := context.WithCancel(context.WithoutCancel(ctx))
		stopStart := context.AfterFunc(h.s.stopping, cancelStart)
		err = rc.proc.Start(startCtx)
		stopStart()
		cancelStart()
		h.mu.Lock()
		rc.startErr = err
		close(rc.started)
		h.mu.Unlock()
		if err != nil {
			h.detach(rc, cs)
			return nil, h.s.fail("consume", err)
		}
		h.s.log.Info("sluice: server: consumer runs", "consumer", name, "group", group, "node", rc.proc.NodeID())
		return rc, nil
	}
}

// has reports whether consumer has a stream of id on this server,
// opened with key.
func (h *streams) has(consumer, id string, key *authKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	rc := h.consumers[consumer]
	return rc != nil && h.find(rc, id, key) != nil
}

// find returns the stream of rc of id opened with key, or nil. h.mu is
// held.
func (h *streams) find(rc *remoteConsumer, id string, key *authKey) *consumeStream {
	if id == "" {
		return nil
	}
	for cs := range rc.streams {
		if cs.id == id && cs.key == key {
			return cs
		}
	}
	return nil
}

// releaseSlot gives back the place a stream holds in its key's bound,
// if it holds one.
func (h *streams) releaseSlot(cs *consumeStream) {
	h.mu.Lock()
	release := cs.release
	cs.release = nil
	h.mu.Unlock()
	if release != nil {
		release()
	}
}

// newConsumer returns the node of a consumer on this server, not started.
func (h *streams) newConsumer(name, group string, opts sluice.ConsumerOptions) *remoteConsumer {
	po := h.s.cfg.StreamNodes
	po.Name, po.Group = name, group
	if a := h.s.Addr(); po.Address == "" && a != nil {
		po.Address = a.String()
	}
	rc := &remoteConsumer{name: name, group: group, opts: opts, proc: h.s.c.NewStreamProcessor(&po),
		streams: make(map[*consumeStream]struct{}), attached: make(chan struct{}), started: make(chan struct{}),
		leaving: make(chan struct{}), stopped: make(chan struct{})}
	// Handle fails only for a bad name or a started node: neither here.
	_ = rc.proc.Handle(name, func(ctx context.Context, ev *sluice.StreamEvent) error { return h.deliver(ctx, rc, ev) }, &opts)
	return rc
}

// addStream attaches cs to rc. h.mu is held.
func (h *streams) addStream(rc *remoteConsumer, cs *consumeStream) {
	rc.streams[cs] = struct{}{}
	close(rc.attached)
	rc.attached = make(chan struct{})
}

// detach ends a stream's part in its consumer; the last stream to leave
// a started consumer stops its node, which stores its final progress
// and gives back its partitions.
func (h *streams) detach(rc *remoteConsumer, cs *consumeStream) {
	h.mu.Lock()
	if _, ok := rc.streams[cs]; !ok {
		h.mu.Unlock()
		return
	}
	delete(rc.streams, cs)
	close(cs.done)
	last := len(rc.streams) == 0 && !rc.stopping && isClosed(rc.started)
	if last {
		rc.stopping = true
		close(rc.leaving)
	}
	h.mu.Unlock()
	if !last {
		return
	}
	if rc.startErr == nil {
		// No stream is left to take the deliveries in progress: they are
		// cut short at once (delivered again later, as the attempts they
		// were, not failures), and the node stores its final progress.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := rc.proc.Stop(ctx); err != nil {
			h.s.log.Warn("sluice: server: consumer stopped with an error", "consumer", rc.name, "err", err)
		}
		h.s.log.Info("sluice: server: consumer stops", "consumer", rc.name, "node", rc.proc.NodeID())
	}
	h.mu.Lock()
	if h.consumers[rc.name] == rc {
		delete(h.consumers, rc.name)
	}
	close(rc.stopped)
	h.mu.Unlock()
	rc.unhold()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// deliver is the handler of a remote consumer's node: it sends ev to
// the attached stream with the fewest deliveries awaiting settlement and
// returns its settlement. A stream that ends first hands the delivery to
// another.
func (h *streams) deliver(ctx context.Context, rc *remoteConsumer, ev *sluice.StreamEvent) error {
	event := apiconv.StreamEvent(ev)
	var deadline *timestamppb.Timestamp
	end, hasDeadline := ctx.Deadline()
	if hasDeadline {
		deadline = apiconv.Timestamp(end)
	}
	for {
		cs, err := h.pick(ctx, rc, ev.Namespace)
		if err != nil {
			return h.gaveUp(ctx, rc)
		}
		id, d := h.register(rc, cs)
		msg := &sluicev1.StreamDelivery{DeliveryId: id, Event: event, Deadline: deadline}
		if hasDeadline {
			msg.AckWithin = durationpb.New(max(time.Until(end), 0))
		}
		sent := false
		select {
		case cs.out <- &sluicev1.ConsumeResponse{Kind: &sluicev1.ConsumeResponse_Delivery{Delivery: msg}}:
			sent = true
		case <-cs.done:
		case <-ctx.Done():
		}
		if sent {
			select {
			case err := <-d.result:
				return h.outcome(rc, err)
			case <-cs.done:
			case <-ctx.Done():
			}
		}
		// The stream ended or the time is up. A settlement claims the
		// delivery (settle removes it) before it hands over its result:
		// one that came first wins.
		if !h.settled(id) {
			return h.outcome(rc, <-d.result)
		}
		if ctx.Err() != nil {
			return h.gaveUp(ctx, rc)
		}
		if sent {
			h.m.delivered.WithLabelValues(h.s.m.entity(rc.name), "stream_closed").Inc()
		}
	}
}

// gaveUp counts a delivery whose context ended before its settlement,
// and returns why it ended.
func (h *streams) gaveUp(ctx context.Context, rc *remoteConsumer) error {
	outcome := "cut_short"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		outcome = "expired"
	}
	h.m.delivered.WithLabelValues(h.s.m.entity(rc.name), outcome).Inc()
	return context.Cause(ctx)
}

// outcome counts a settled delivery and returns its result.
func (h *streams) outcome(rc *remoteConsumer, err error) error {
	outcome := "ack"
	if err != nil {
		outcome = "nack"
	}
	h.m.delivered.WithLabelValues(h.s.m.entity(rc.name), outcome).Inc()
	return err
}

// pick returns the attached stream of rc with the fewest deliveries
// awaiting settlement among those whose keys may receive the event's
// namespace (a delivery needs receive on its namespace as well as on the
// consumer), waiting for one to attach while none is: an event no stream
// may see waits as it would with no stream, until its ack timeout. Once
// rc is stopping it waits for the delivery to be cut short: failing it
// would count as a failed attempt.
func (h *streams) pick(ctx context.Context, rc *remoteConsumer, namespace string) (*consumeStream, error) {
	for {
		h.mu.Lock()
		if rc.stopping {
			h.mu.Unlock()
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		var best *consumeStream
		for cs := range rc.streams {
			if (best == nil || cs.pending < best.pending) && h.s.keyAllows(cs.key, Receive, namespace) {
				best = cs
			}
		}
		attached := rc.attached
		h.mu.Unlock()
		if best != nil {
			return best, nil
		}
		select {
		case <-attached:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// register records a delivery awaiting settlement on cs.
func (h *streams) register(rc *remoteConsumer, cs *consumeStream) (string, *delivery) {
	id := newID()
	d := &delivery{consumer: rc.name, stream: cs, result: make(chan error, 1)}
	h.mu.Lock()
	h.deliveries[id] = d
	cs.pending++
	h.mu.Unlock()
	return id, d
}

// newID returns a random id of 128 bits.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// settled forgets a delivery.
// It reports whether it did: false when a settlement claimed it first.
func (h *streams) settled(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.forget(id) != nil
}

// forget removes a delivery awaiting settlement and returns it (nil if
// none). h.mu is held.
func (h *streams) forget(id string) *delivery {
	d, ok := h.deliveries[id]
	if !ok {
		return nil
	}
	delete(h.deliveries, id)
	d.stream.pending--
	return d
}

// settle hands a settlement to the deliveries named, after checking that
// the call may act on their consumers, and returns the ids it did not
// know.
func (h *streams) settle(ctx context.Context, ids []string, result error) ([]string, error) {
	found := make([]*delivery, len(ids))
	h.mu.Lock()
	for i, id := range ids {
		found[i] = h.deliveries[id]
	}
	h.mu.Unlock()
	var unknown []string
	for i, d := range found {
		if d == nil {
			unknown = append(unknown, ids[i])
			continue
		}
		if err := h.s.authorize(ctx, Receive, d.consumer); err != nil {
			return nil, err
		}
	}
	// Claim each delivery, then hand it the result: one that its deliverer
	// gave up on meanwhile is no longer there to claim.
	h.mu.Lock()
	claimed := make([]*delivery, 0, len(found))
	for i, d := range found {
		if d != nil && h.forget(ids[i]) == d {
			claimed = append(claimed, d)
		} else if d != nil {
			unknown = append(unknown, ids[i])
		}
	}
	h.mu.Unlock()
	for _, d := range claimed {
		d.result <- result // buffered, and claimed once
	}
	return unknown, nil
}

func (h *streams) Ack(ctx context.Context, req *sluicev1.AckRequest) (*sluicev1.AckResponse, error) {
	if len(req.DeliveryIds) == 0 || len(req.DeliveryIds) > maxSettleBatch {
		return nil, apierr.Invalid(fmt.Sprintf("ack: %d delivery ids: want 1 to %d", len(req.DeliveryIds), maxSettleBatch))
	}
	unknown, err := h.settle(ctx, req.DeliveryIds, nil)
	if err != nil {
		return nil, err
	}
	return &sluicev1.AckResponse{Unknown: unknown}, nil
}

func (h *streams) Nack(ctx context.Context, req *sluicev1.NackRequest) (*sluicev1.NackResponse, error) {
	if req.DeliveryId == "" {
		return nil, apierr.Invalid("nack: no delivery id")
	}
	if len(req.Error) > store.MaxReasonLen {
		return nil, apierr.Invalid(fmt.Sprintf("nack: the error is %d bytes long, at most %d allowed", len(req.Error), store.MaxReasonLen))
	}
	reason := req.Error
	if reason == "" {
		reason = "nacked"
	}
	unknown, err := h.settle(ctx, []string{req.DeliveryId}, nacked(reason))
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		return nil, apierr.New(connect.CodeNotFound, "DELIVERY_NOT_FOUND",
			"nack: no delivery "+req.DeliveryId+" awaits settlement on this server")
	}
	return &sluicev1.NackResponse{}, nil
}

func (h *streams) Tail(ctx context.Context, req *sluicev1.TailRequest, stream sluicev1connect.StreamServiceTailServerStream) error {
	if err := h.s.authorize(ctx, Receive, req.Namespace); err != nil {
		return err
	}
	release, err := h.s.holdStream(ctx)
	if err != nil {
		return err
	}
	defer release()
	leave, err := h.enter(false)
	if err != nil {
		return err
	}
	defer leave()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopAfter := context.AfterFunc(h.s.stopping, cancel)
	defer stopAfter()
	beat := h.s.cfg.Heartbeat
	// The tail's goroutine sends what it reads; another sends heartbeats
	// while it reads nothing. Sends take turns.
	var mu sync.Mutex
	var sendErr error
	last := time.Now()
	send := func(msg *sluicev1.TailResponse) error {
		mu.Lock()
		defer mu.Unlock()
		if sendErr == nil {
			sendErr = stream.Send(msg)
			last = time.Now()
		}
		return sendErr
	}
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		t := time.NewTicker(beat / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			mu.Lock()
			idle := time.Since(last) >= beat
			mu.Unlock()
			if idle && send(&sluicev1.TailResponse{Kind: &sluicev1.TailResponse_Heartbeat{Heartbeat: &sluicev1.Heartbeat{}}}) != nil {
				cancel()
				return
			}
		}
	}()
	defer func() { cancel(); <-beats }()
	opts := &sluice.TailOptions{
		Started: func(n int) {
			_ = send(&sluicev1.TailResponse{Kind: &sluicev1.TailResponse_Started{Started: &sluicev1.TailStarted{Partitions: int32(n),
				Heartbeat: durationpb.New(beat)}}})
		},
		Trimmed: func(partition int32, from, to int64) {
			_ = send(&sluicev1.TailResponse{Kind: &sluicev1.TailResponse_Trimmed{
				Trimmed: &sluicev1.TailTrimmed{Partition: partition, From: from, To: to}}})
		},
	}
	err = h.s.c.TailStream(ctx, req.Namespace, req.Key, func(ev *sluice.StreamEvent) error {
		return send(&sluicev1.TailResponse{Kind: &sluicev1.TailResponse_Event{Event: apiconv.StreamEvent(ev)}})
	}, opts)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case sendErr != nil:
		return sendErr
	case ctx.Err() != nil:
		return nil // the client left, or the server shuts down
	}
	return h.s.fail("tail", err)
}
