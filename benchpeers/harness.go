package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// payloadSize is every message's size.
const payloadSize = 1024

// figures are one run's result: a rate (a), a latency pair (a = p50,
// b = p99 in ms) or the receive-locked pair (a = none locked, b = locked,
// median ms).
type figures struct{ a, b float64 }

// benchCase is one row of the tables.
type benchCase struct {
	name   string
	title  string
	unit   string // the value column's header
	stream bool   // the stream side of the systems, else the queue side
	pair   bool   // two values (a / b)
	raw    bool   // the raw limit takes part
	// processor: only the systems with a processor of their own beside
	// their consumers (processorPeer: sluice) take part.
	processor bool
	queue     func(ctx context.Context, c *config, p queuePeer) (figures, error)
	// streamRun measures a stream system.
	streamRun func(ctx context.Context, c *config, p streamPeer) (figures, error)
	// fresh, when set, replaces the usual open-measure-close of one run:
	// the receive-locked case opens a system twice.
	fresh func(ctx context.Context, c *config, open func() (queuePeer, error)) (figures, error)
}

// workload is every case, in the order of the tables.
var workload = []benchCase{
	{name: "send-1", title: "send, 1 producer, 1 a call", unit: "msg/s", raw: true,
		queue: func(ctx context.Context, c *config, p queuePeer) (figures, error) { return sendRate(ctx, c, p, 1, 1) }},
	{name: "send-8", title: "send, 8 producers, 1 a call (raw: 8 clients)", unit: "msg/s", raw: true,
		queue: func(ctx context.Context, c *config, p queuePeer) (figures, error) { return sendRate(ctx, c, p, 8, 1) }},
	{name: "send-batch-100", title: "SendBatch of 100, 1 producer (raw: COPY on PostgreSQL, one multi-row INSERT on SQLite)", unit: "msg/s", raw: true,
		queue: func(ctx context.Context, c *config, p queuePeer) (figures, error) { return sendRate(ctx, c, p, 1, 100) }},
	{name: "consume-1", title: "consume + complete, 1 consumer, from a preloaded backlog", unit: "msg/s",
		queue: func(ctx context.Context, c *config, p queuePeer) (figures, error) {
			return consumeRate(ctx, c, queueSide{p}, 1)
		}},
	{name: "consume-8", title: "consume + complete, 8 consumers, from a preloaded backlog", unit: "msg/s",
		queue: func(ctx context.Context, c *config, p queuePeer) (figures, error) {
			return consumeRate(ctx, c, queueSide{p}, 8)
		}},
	{name: "consume-processor-1", title: "the same through sluice's Processor, 1 processor of 32 handlers", unit: "msg/s", processor: true,
		queue: func(ctx context.Context, c *config, p queuePeer) (figures, error) {
			return consumeRate(ctx, c, processorSide{p.(processorPeer)}, 1)
		}},
	{name: "consume-processor-8", title: "the same through sluice's Processor, 8 processors of 32 handlers", unit: "msg/s", processor: true,
		queue: func(ctx context.Context, c *config, p queuePeer) (figures, error) {
			return consumeRate(ctx, c, processorSide{p.(processorPeer)}, 8)
		}},
	{name: "send-to-handler", title: "send-to-handler latency, 1 producer paced, 1 consumer", unit: "p50 / p99 (ms)", pair: true,
		queue: func(ctx context.Context, c *config, p queuePeer) (figures, error) {
			return latency(ctx, c, queueSide{p})
		}},
	{name: "receive-locked", title: "receive 32, none locked / --locked (default 50,000) locked, median of --samples receives", unit: "none / locked (ms)", pair: true,
		fresh: receiveLocked},
	{name: "publish-1", title: "streams: publish, 1 producer, 1 a call, 1,000 keys", unit: "events/s", stream: true, raw: true,
		streamRun: func(ctx context.Context, c *config, p streamPeer) (figures, error) {
			return publishRate(ctx, c, p, 1, 1)
		}},
	{name: "publish-8", title: "streams: publish, 8 producers, 1 a call (raw: 8 clients)", unit: "events/s", stream: true, raw: true,
		streamRun: func(ctx context.Context, c *config, p streamPeer) (figures, error) {
			return publishRate(ctx, c, p, 8, 1)
		}},
	{name: "publish-100", title: "streams: publish 100 a call, 1 producer (raw: COPY / multi-row INSERT)", unit: "events/s", stream: true, raw: true,
		streamRun: func(ctx context.Context, c *config, p streamPeer) (figures, error) {
			return publishRate(ctx, c, p, 1, 100)
		}},
	{name: "stream-consume-1", title: "streams: consume a preloaded backlog, 1 processor / consumer", unit: "events/s", stream: true,
		streamRun: func(ctx context.Context, c *config, p streamPeer) (figures, error) {
			return consumeRate(ctx, c, streamSide{p}, 1)
		}},
	{name: "stream-consume-8", title: "streams: consume a preloaded backlog, 8 processors / consumers", unit: "events/s", stream: true,
		streamRun: func(ctx context.Context, c *config, p streamPeer) (figures, error) {
			return consumeRate(ctx, c, streamSide{p}, 8)
		}},
	{name: "publish-to-handler", title: "streams: publish-to-handler latency, 1 producer paced, 1 processor", unit: "p50 / p99 (ms)", stream: true, pair: true,
		streamRun: func(ctx context.Context, c *config, p streamPeer) (figures, error) {
			return latency(ctx, c, streamSide{p})
		}},
}

// side is what the consume and latency cases need of a queue or stream
// system: a call that sends or publishes, and consume.
type side interface {
	put(ctx context.Context, n int, bodies [][]byte) error
	consume(ctx context.Context, consumers int, handle func(body []byte)) error
}

type queueSide struct{ queuePeer }

func (q queueSide) put(ctx context.Context, _ int, bodies [][]byte) error { return q.send(ctx, bodies) }

// processorSide consumes through a processorPeer's processors.
type processorSide struct{ processorPeer }

func (p processorSide) put(ctx context.Context, _ int, bodies [][]byte) error {
	return p.send(ctx, bodies)
}

func (p processorSide) consume(ctx context.Context, consumers int, handle func(body []byte)) error {
	return p.process(ctx, consumers, handle)
}

type streamSide struct{ streamPeer }

func (s streamSide) put(ctx context.Context, n int, bodies [][]byte) error {
	return s.publish(ctx, streamKey(n), bodies)
}

// streamKey spreads calls over 1,000 keyed streams.
func streamKey(n int) string { return fmt.Sprintf("key-%03d", n%1000) }

// payloads returns n random 1-KiB bodies.
func payloads(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, payloadSize)
		rand.Read(out[i])
	}
	return out
}

// stamped returns a 1-KiB body carrying the time it is sent.
func stamped(t time.Time) []byte {
	b := make([]byte, payloadSize)
	rand.Read(b[8:])
	binary.BigEndian.PutUint64(b, uint64(t.UnixNano()))
	return b
}

// sendRate runs producers, each sending batch bodies a call, for
// c.duration: messages a second.
func sendRate(ctx context.Context, c *config, p queuePeer, producers, batch int) (figures, error) {
	return rate(ctx, c.duration, producers, batch, func(ctx context.Context, _ int, b [][]byte) error { return p.send(ctx, b) })
}

// publishRate is sendRate for streams, each call to the next of 1,000
// keys.
func publishRate(ctx context.Context, c *config, p streamPeer, producers, batch int) (figures, error) {
	return rate(ctx, c.duration, producers, batch, func(ctx context.Context, n int, b [][]byte) error {
		return p.publish(ctx, streamKey(n), b)
	})
}

// rate runs producers calling call with batch bodies until d has passed:
// bodies a second. The n passed to call counts the producer's calls,
// offset by producer so that producers spread over keys.
func rate(ctx context.Context, d time.Duration, producers, batch int, call func(ctx context.Context, n int, bodies [][]byte) error) (figures, error) {
	var count atomic.Int64
	errs := make(chan error, producers)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range producers {
		body := payloads(batch)
		wg.Go(func() {
			for n := i * 125; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				if err := call(ctx, n, body); err != nil {
					errs <- err
					return
				}
				count.Add(int64(batch))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return figures{}, err
	}
	return figures{a: float64(count.Load()) / elapsed.Seconds()}, ctx.Err()
}

func collect(errs chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// preload puts n messages or events, 100 a call.
func preload(ctx context.Context, s side, n int) error {
	body := payloads(100)
	for i := 0; i < n; i += 100 {
		if err := s.put(ctx, i/100, body[:min(100, n-i)]); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	return nil
}

// consumeRate preloads c.backlog messages, then consumes with consumers
// until all are handled or c.duration has passed: messages a second
// from the first delivery to the last, so that a system's start-up
// (a client's, a processor's partition leases) is not counted.
func consumeRate(ctx context.Context, c *config, s side, consumers int) (figures, error) {
	if err := preload(ctx, s, c.backlog); err != nil {
		return figures{}, err
	}
	var (
		mu          sync.Mutex
		count       int
		first, last time.Time
		firstSeen   = make(chan struct{})
		done        = make(chan struct{})
	)
	handle := func([]byte) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		count++
		if count == 1 {
			first = now
			close(firstSeen)
		}
		last = now
		if count == c.backlog {
			close(done)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.consume(cctx, consumers, handle) }()
	// The clock starts at the first delivery: allow the start-up some
	// time beyond the timed run.
	timer := time.NewTimer(c.duration + 10*time.Second)
	defer timer.Stop()
	var err error
	ended := false // consume returned
	select {
	case <-firstSeen:
		select {
		case <-done:
		case <-time.After(c.duration):
		case err = <-errc:
			ended = true
		}
	case <-timer.C:
		err = errors.New("no delivery within the run and 10 s")
	case err = <-errc:
		ended = true
	}
	cancel()
	if !ended {
		err = errors.Join(err, <-errc)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return figures{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	if count < 2 {
		return figures{}, fmt.Errorf("consumed %d of %d", count, c.backlog)
	}
	return figures{a: float64(count-1) / last.Sub(first).Seconds()}, ctx.Err()
}

// latency runs one consumer and one producer paced at c.rate for
// c.duration, each body carrying the time it was sent: the handler's
// p50 and p99 of now minus that time. Before the clock starts, warmUp
// messages to as many streams (so that a stream processor holds every
// partition) are sent and handled.
// warmUp is how many messages the latency cases send before the clock
// starts: to 200 keys, every one of 16 partitions has one but with
// odds of 1 in 25,000.
const warmUp = 200

func latency(ctx context.Context, c *config, s side) (figures, error) {
	var (
		mu   sync.Mutex
		lats []time.Duration
		got  = make(chan struct{}, 1)
	)
	handle := func(b []byte) {
		d := time.Since(time.Unix(0, int64(binary.BigEndian.Uint64(b))))
		mu.Lock()
		lats = append(lats, d)
		mu.Unlock()
		select {
		case got <- struct{}{}:
		default:
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- s.consume(cctx, 1, handle) }()
	// stop ends the consumer and waits for it, on every return.
	stop := sync.OnceValue(func() error {
		cancel()
		if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	})
	defer stop()
	handled := func() int { mu.Lock(); defer mu.Unlock(); return len(lats) }
	wait := func(n int, limit time.Duration) error {
		t := time.NewTimer(limit)
		defer t.Stop()
		for handled() < n {
			select {
			case <-got:
			case <-t.C:
				return fmt.Errorf("handled %d of %d", handled(), n)
			case err := <-errc:
				errc <- err // for stop
				return fmt.Errorf("consumer ended: %w", err)
			}
		}
		return nil
	}
	for i := range warmUp {
		if err := s.put(ctx, i, [][]byte{stamped(time.Now())}); err != nil {
			return figures{}, err
		}
	}
	if err := wait(warmUp, 30*time.Second); err != nil {
		return figures{}, fmt.Errorf("warm-up: %w", err)
	}
	mu.Lock()
	lats = lats[:0]
	mu.Unlock()
	interval := time.Second / time.Duration(c.rate)
	start := time.Now()
	n := 0
	for ; time.Since(start) < c.duration && ctx.Err() == nil; n++ {
		if d := time.Until(start.Add(time.Duration(n) * interval)); d > 0 {
			time.Sleep(d)
		}
		if err := s.put(ctx, n, [][]byte{stamped(time.Now())}); err != nil {
			return figures{}, err
		}
	}
	if err := wait(n, 30*time.Second); err != nil {
		return figures{}, err
	}
	if err := stop(); err != nil {
		return figures{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lats)
	return figures{a: ms(lats[len(lats)/2]), b: ms(lats[len(lats)*99/100])}, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// receiveLocked times c.samples receives of 32 on a fresh system
// with none locked, then on another fresh one with c.locked messages
// received and left locked: the median of each.
func receiveLocked(ctx context.Context, c *config, open func() (queuePeer, error)) (figures, error) {
	level := func(locked int) (float64, error) {
		q, err := open()
		if err != nil {
			return 0, err
		}
		defer q.close(context.WithoutCancel(ctx))
		p, ok := q.(lockingPeer)
		if !ok {
			return 0, errSkip
		}
		if err := preload(ctx, queueSide{q}, locked+32*c.samples); err != nil {
			return 0, err
		}
		if err := p.lock(ctx, locked); err != nil {
			return 0, fmt.Errorf("lock %d: %w", locked, err)
		}
		var took []time.Duration
		for range c.samples {
			d, err := p.receive32(ctx)
			if err != nil {
				return 0, err
			}
			took = append(took, d)
		}
		slices.Sort(took)
		return ms(took[len(took)/2]), nil
	}
	none, err := level(0)
	if err != nil {
		return figures{}, err
	}
	locked, err := level(c.locked)
	return figures{a: none, b: locked}, err
}
