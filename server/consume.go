package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect/v2"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
	"github.com/sluicehq/sluice/store"
)

// The Consume bridge: a Consume call attaches its stream to the server's
// node of the consumer (a StreamProcessor started with the first stream
// and stopped with the last), whose handler sends each delivery to the
// attached stream with the fewest awaiting settlement and waits for its
// Ack or Nack.

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
