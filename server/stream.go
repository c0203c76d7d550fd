package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

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
