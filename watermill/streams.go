package watermill

import (
	"cmp"
	"context"
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

// On Streams, a consumer group subscribes, as the stream consumer
// streamConsumer names, to the whole namespace a topic names. Its events
// are delivered by a stream processor that the subscriptions of one
// client in this process share (a hub): the processor's handler hands
// each event to whichever subscription is ready for its next message and
// returns as its Ack or Nack says. The processor joins a group of stream
// nodes of its consumer's own, so that processes with different
// consumers never split one group's partitions between them (and, on
// SQLite, one node of each consumer runs at a time). It starts with the
// first subscription and stops with the last: the deliveries in progress
// then are cut short, and come again, without counting a failed attempt.

// streamConsumer is the stream consumer a consumer group is on a topic:
// a consumer reads one namespace.
func streamConsumer(topic, group string) string { return topic + "/" + group }

// subscribeGroup stores a consumer's subscription to a namespace, from
// now on, unless it is stored.
func subscribeGroup(ctx context.Context, client sluice.API, namespace, consumer string) error {
	_, err := client.Subscribe(ctx, sluice.StreamID{Namespace: namespace}, consumer, sluice.FromNow())
	if errors.Is(err, sluice.ErrEntityExists) {
		return nil
	}
	return err
}

// hubKey names a hub: one per client and consumer.
type hubKey struct {
	client   sluice.API
	consumer string
}

// hubs holds the running hubs of this process.
var hubs = struct {
	sync.Mutex
	m map[hubKey]*hub
}{m: make(map[hubKey]*hub)}

// hub is the processor of one consumer, shared by its subscriptions.
type hub struct {
	key  hubKey
	opts sluice.ConsumerOptions
	proc sluice.StreamEventProcessor
	// deliveries is taken from by a subscription ready for its next
	// message (unbuffered: a delivery waits for one).
	deliveries chan *delivery
	// started is closed once proc started, or failed to (startErr).
	started  chan struct{}
	startErr error

	// Guarded by hubs: the subscriptions attached, and whether the last
	// has left (stopped is closed once proc stopped and the hub left
	// hubs).
	attached int
	stopping bool
	stopped  chan struct{}
}

// delivery is an event handed to a subscription, and its result.
type delivery struct {
	ctx    context.Context // the processor's: it ends when the delivery's time is up
	ev     *sluice.StreamEvent
	result chan error // buffered: one result per hand-over
}

// errHandedBack says a subscription ended before its message was acked
// or nacked: the event goes to another subscription, or, once none is
// left, is cut short with the processor's stop.
var errHandedBack = errors.New("handed back")

// A delivery waits up to maxQueued, from its start, for a subscription
// ready to take it, and its time from there is the consumer's
// DeliveryTimeout (defaultAckTimeout unless set; at most maxQueued, the
// bound of a server's consumers).
const (
	maxQueued         = time.Hour
	defaultAckTimeout = time.Minute
)

// errNacked is the failure of a nacked delivery.
var errNacked = errors.New("sluice/watermill: the message was nacked")

// attach returns the hub of the consumer on client, started, and
// counts the caller among its subscriptions (detach uncounts it).
func attach(ctx context.Context, client sluice.API, consumer string, opts sluice.ConsumerOptions) (*hub, error) {
	key := hubKey{client: client, consumer: consumer}
	for {
		hubs.Lock()
		h := hubs.m[key]
		if h != nil && h.stopping {
			hubs.Unlock()
			select {
			case <-h.stopped:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if h != nil {
			if h.opts != opts {
				hubs.Unlock()
				return nil, fmt.Errorf("sluice/watermill: consumer %q runs in this process with other consumer options (%+v): %w",
					consumer, h.opts, sluice.ErrInvalidArgument)
			}
			h.attached++
			hubs.Unlock()
			select {
			case <-h.started:
			case <-ctx.Done():
				h.detach()
				return nil, ctx.Err()
			}
			if err := h.startErr; err != nil {
				h.detach()
				if ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
					continue // the start was cut short by its caller's context, not this one's
				}
				return nil, err
			}
			return h, nil
		}
		h = &hub{key: key, opts: opts, deliveries: make(chan *delivery), started: make(chan struct{}),
			attached: 1, stopped: make(chan struct{})}
		h.proc = client.StreamEventProcessor(&sluice.StreamProcessorOptions{Group: consumer})
		hubs.m[key] = h
		hubs.Unlock()
		// The processor's own delivery time covers the wait for a
		// subscription ready to take the event; the consumer's starts when
		// the message goes out (handOutEvent).
		popts := opts
		popts.DeliveryTimeout = maxQueued
		err := h.proc.Handle(consumer, h.handle, &popts)
		if err == nil {
			err = h.proc.Start(ctx)
		}
		hubs.Lock()
		h.startErr = err
		h.stopping = err != nil // a failed hub takes no more subscriptions
		close(h.started)
		hubs.Unlock()
		if err != nil {
			h.detach()
			return nil, err
		}
		return h, nil
	}
}

// detach uncounts a subscription; the last one stops the processor,
// cutting the deliveries in progress short (they come again: no
// subscription is left to take them).
func (h *hub) detach() {
	hubs.Lock()
	h.attached--
	last := h.attached == 0
	h.stopping = h.stopping || last
	hubs.Unlock()
	if !last {
		return
	}
	if h.startErr == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = h.proc.Stop(ctx) // it reports nothing it has not logged
	}
	hubs.Lock()
	delete(hubs.m, h.key)
	close(h.stopped)
	hubs.Unlock()
}

// handle is the consumer's handler: it hands ev to a subscription and
// returns its result, handing it to another when one ends first.
func (h *hub) handle(ctx context.Context, ev *sluice.StreamEvent) error {
	d := &delivery{ctx: ctx, ev: ev, result: make(chan error, 1)}
	for {
		select {
		case h.deliveries <- d:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		select {
		case err := <-d.result:
			if !errors.Is(err, errHandedBack) {
				return err
			}
		case <-ctx.Done():
			select {
			case err := <-d.result: // an Ack that came as the time ran out still counts
				if err == nil {
					return nil
				}
			default:
			}
			return context.Cause(ctx)
		}
	}
}

// subscribeStream subscribes to the namespace topic as the consumer
// group's consumer.
func (s *Subscriber) subscribeStream(ctx context.Context, topic string) (<-chan *message.Message, error) {
	var opts sluice.ConsumerOptions
	if s.cfg.ConsumerOptions != nil {
		opts = *s.cfg.ConsumerOptions
	}
	opts.Namespace = topic
	h, err := attach(ctx, s.client, streamConsumer(topic, s.cfg.ConsumerGroup), opts)
	if err != nil {
		return nil, fmt.Errorf("sluice/watermill: subscribe to %s: %w", topic, err)
	}
	out, err := s.subscription(ctx, topic, func(ctx context.Context, out chan<- *message.Message) {
		defer h.detach()
		log := s.cfg.Logger.With(wm.LogFields{"topic": topic, "consumer": h.key.consumer})
		ackWithin := cmp.Or(h.opts.DeliveryTimeout, defaultAckTimeout)
		for {
			select {
			case d := <-h.deliveries:
				handOutEvent(ctx, d, out, ackWithin, log)
			case <-ctx.Done():
				return
			}
		}
	})
	if err != nil {
		h.detach()
	}
	return out, err
}

// handOutEvent sends d's event to out as a Watermill message and hands
// its Ack or Nack to d's handler. The message's context ends when it is
// acked or nacked, when the subscription ends, or when it was not acked
// within ackWithin of going out (a failed attempt: the event comes
// again).
func handOutEvent(ctx context.Context, d *delivery, out chan<- *message.Message, ackWithin time.Duration, log wm.LoggerAdapter) {
	ev := d.ev
	props := maps.Clone(ev.Properties)
	id := props[UUIDProperty]
	delete(props, UUIDProperty)
	if id == "" {
		id = strconv.Itoa(int(ev.Partition)) + "-" + strconv.FormatInt(ev.Position, 10)
	}
	msg := message.NewMessage(id, ev.Body)
	maps.Copy(msg.Metadata, props)
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(d.ctx, cancel)
	defer stop()
	msg.SetContext(mctx)
	select {
	case out <- msg:
	case <-ctx.Done():
		d.result <- errHandedBack
		return
	case <-d.ctx.Done():
		return // the handler has returned
	}
	late := time.NewTimer(ackWithin)
	defer late.Stop()
	select {
	case <-msg.Acked():
		d.result <- nil
	case <-msg.Nacked():
		d.result <- errNacked
	case <-ctx.Done():
		select {
		case <-msg.Acked():
			d.result <- nil
		case <-msg.Nacked():
			d.result <- errNacked
		default:
			d.result <- errHandedBack
		}
	case <-late.C:
		select {
		case <-msg.Acked(): // just in time
			d.result <- nil
		case <-msg.Nacked():
			d.result <- errNacked
		default:
			log.Info("a message was not acked in its delivery time; its event comes again",
				wm.LogFields{"message_uuid": id, "partition": ev.Partition, "position": ev.Position, "attempt": ev.Attempt})
			d.result <- fmt.Errorf("sluice/watermill: the message was not acked within %v", ackWithin)
		}
	case <-d.ctx.Done():
		// The processor stopped (the event comes again), or the delivery
		// waited for a subscription until maxQueued: the handler has
		// returned, or returns now, taking an Ack that came just in time.
		select {
		case <-msg.Acked():
			d.result <- nil
		default:
		}
	}
}
