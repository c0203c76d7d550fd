package server

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceprom"
)

// The history's bounds. A ring holds an hour of samples, or
// maxHistorySamples when the interval is shorter than 10 s.
//
// Worst-case memory, at the bounds, once the rings are full:
//
//   - entities: maxHistoryEntities rings of maxHistorySamples
//     entitySamples of 72 bytes (a time, six counts, three rates):
//     1,000 × 360 × 72 B ≈ 25.9 MB;
//   - consumers in namespaces and stream subscriptions:
//     maxHistoryConsumers and maxHistorySubscriptions rings of
//     lagSamples of 16 bytes: 2 × 1,000 × 360 × 16 B ≈ 11.5 MB;
//   - the counts of messages since the last sample: at most
//     2 × maxHistoryEntities names with three counters each, and the
//     rings' names and map entries: well under 1 MB.
//
// About 38 MB in all; a deployment within the bounds (fewer entities,
// consumers or subscriptions, or a longer interval) holds less, in
// proportion. A ring grows as its samples come, so a new entity costs
// little until it has an hour of them.
const (
	historySpan       = time.Hour
	maxHistorySamples = 360
	// maxHistoryEntities bounds the queues and subscriptions sampled:
	// the first 1,000 in name order, those the metrics read.
	maxHistoryEntities = maxScrapeEntities
	// maxHistoryConsumers and maxHistorySubscriptions bound the lag
	// series: those lagging most at each sample keep theirs.
	maxHistoryConsumers     = 1000
	maxHistorySubscriptions = 1000
)

// Bounds of Config.HistoryInterval.
const (
	DefaultHistoryInterval = 10 * time.Second
	minHistoryInterval     = 100 * time.Millisecond
	maxHistoryInterval     = 5 * time.Minute
)

// historySize is how many samples a ring holds at an interval: an
// hour's, at most maxHistorySamples.
func historySize(interval time.Duration) int {
	return min(maxHistorySamples, int((historySpan+interval-1)/interval))
}

// flow is what happened to messages, as the server counts them per
// entity for its rates.
type flow int

const (
	flowSent flow = iota
	flowReceived
	flowSettled
)

// entitySample is what one sample found of an entity: counts by state
// and this server's rates since the sample before, in msg/s.
type entitySample struct {
	at                                                           int64 // Unix nanoseconds
	active, inFlight, scheduled, deferred, deadLettered, expired int64
	sent, received, settled                                      float32
}

// lagSample is a lag at a sample.
type lagSample struct {
	at  int64 // Unix nanoseconds
	lag int64
}

// ring holds the last samples pushed, up to a size, oldest first. It
// grows as samples come, never past the size.
type ring[T any] struct {
	buf  []T
	next int // where the next sample goes once full
}

func (r *ring[T]) push(v T, size int) {
	if len(r.buf) < size {
		if len(r.buf) == cap(r.buf) {
			grown := make([]T, len(r.buf), min(size, max(8, 2*cap(r.buf))))
			copy(grown, r.buf)
			r.buf = grown
		}
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % size
}

// last returns the newest sample; the ring holds one at least.
func (r *ring[T]) last() T { return r.buf[(r.next+len(r.buf)-1)%len(r.buf)] }

// all returns a copy of the samples, oldest first.
func (r *ring[T]) all() []T {
	out := make([]T, 0, len(r.buf))
	return append(append(out, r.buf[r.next:]...), r.buf[:r.next]...)
}

// consumerNS names a consumer's lag in a namespace.
type consumerNS struct{ consumer, namespace string }

// consumerRing is a consumer's lag in a namespace over time.
type consumerRing struct {
	group string // at the last sample
	ring[lagSample]
}

// subscriptionRing is a stream subscription's lag over time.
type subscriptionRing struct {
	streamSubscription
	ring[lagSample]
}

// streamSubscription is whom a stream subscription is for and what it
// reads (key "" for a whole namespace).
type streamSubscription struct{ consumer, namespace, key string }

// history samples, every interval, each entity's counts (with this
// server's rates of messages per entity) and the stream lag of each
// consumer in each namespace and of each subscription, and keeps an
// hour of them in bounded rings (see the bounds above).
type history struct {
	interval time.Duration
	size     int // samples a ring holds
	// read reads the database's figures, or returns those of the
	// metrics' last read if it ended within maxAge.
	read func(ctx context.Context, maxAge time.Duration) sluiceprom.Snapshot

	mu            sync.Mutex
	entities      map[string]*ring[entitySample] // by canonical path
	consumers     map[consumerNS]*consumerRing
	subscriptions map[string]*subscriptionRing
	// counts are the messages of each entity, by flow, since countedAt
	// (the last sample): those of entities with a ring, and of up to
	// maxHistoryEntities others (entities new since, or past the
	// bound, which the next sample drops).
	counts    map[string]*[3]int64
	countedAt time.Time
	// forgotten holds what forget dropped lately, which a snapshot read
	// (or cached) before may still list (see recordRead).
	forgotten []forgotten
}

// forgotten is an entity forget dropped, and the subscriptions under it
// (under: their path's prefix, or ""), and when.
type forgotten struct {
	name, under string
	at          time.Time
}

func newHistory(interval time.Duration, read func(context.Context, time.Duration) sluiceprom.Snapshot) *history {
	return &history{interval: interval, size: historySize(interval), read: read,
		entities: map[string]*ring[entitySample]{}, consumers: map[consumerNS]*consumerRing{},
		subscriptions: map[string]*subscriptionRing{}, counts: map[string]*[3]int64{}, countedAt: time.Now()}
}

// count adds n messages of a flow to an entity's count since the last
// sample.
func (h *history) count(entity string, f flow, n int) {
	if n <= 0 {
		return
	}
	name := sluice.CanonicalName(entity)
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.counts[name]
	if c == nil {
		if h.entities[name] == nil && len(h.counts) >= maxHistoryEntities {
			return // past the bound: the entity has no ring to count for yet
		}
		c = new([3]int64)
		h.counts[name] = c
	}
	c[f] += int64(n)
}

// observe counts what a call of the server's client did to messages,
// as the throughput counts it (the library reports only calls that
// succeeded, so the entity exists).
func (h *history) observe(e sluice.MessageEvent) {
	switch e.Kind {
	case sluice.MessagesSent:
		h.count(e.Entity, flowSent, e.Count)
	case sluice.MessagesReceived:
		h.count(e.Entity, flowReceived, e.Count)
	case sluice.MessagesSettled:
		h.count(e.Entity, flowSettled, e.Count)
	}
}

// forget drops the ring of a deleted entity, and of the subscriptions
// under it when it is a topic (under: their path's prefix).
func (h *history) forget(name, under string) {
	name = sluice.CanonicalName(name)
	if under != "" {
		under = sluice.CanonicalName(under)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgotten = append(h.forgotten, forgotten{name: name, under: under, at: time.Now()})
	for path := range h.entities {
		if path == name || under != "" && strings.HasPrefix(path, under) {
			delete(h.entities, path)
			delete(h.counts, path)
		}
	}
}

// deletedSince reports whether forget dropped path at or after since.
func (h *history) deletedSince(path string, since time.Time) bool {
	for _, f := range h.forgotten {
		if !f.at.Before(since) && (path == f.name || f.under != "" && strings.HasPrefix(path, f.under)) {
			return true
		}
	}
	return false
}

// run samples every interval until ctx ends (the first sample one
// interval after it starts: its rates need an interval to count over).
func (h *history) run(ctx context.Context) {
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			h.sample(ctx)
		}
	}
}

// sample reads the figures (or takes those the metrics read within half
// an interval) and records them.
func (h *history) sample(ctx context.Context) {
	snap := h.read(ctx, h.interval/2)
	if ctx.Err() != nil {
		return
	}
	h.record(snap, time.Now())
}

// record adds a sample taken at now: the snapshot's counts and lag, and
// the rates of the messages counted since the last sample.
//
// An entity deleted while the figures were read (or after a cached read)
// may still be in them: one that forget dropped within an interval before
// the read ended is left out, lest its ring come back (one re-created as
// fast misses a sample).
func (h *history) record(snap sluiceprom.Snapshot, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	counts, secs := h.counts, now.Sub(h.countedAt).Seconds()
	h.counts, h.countedAt = make(map[string]*[3]int64, len(h.entities)), now
	read := snap.At
	if read.IsZero() || read.After(now) {
		read = now
	}
	since := read.Add(-h.interval)
	h.recordEntities(snap, counts, secs, now.UnixNano(), since)
	h.forgotten = slices.DeleteFunc(h.forgotten, func(f forgotten) bool { return f.at.Before(since) })
	if snap.ClusterRead {
		h.recordLag(snap.Cluster, now.UnixNano())
	}
}

// recordEntities adds a sample to each entity's ring. When the snapshot
// is complete, the rings of entities it lacks (deleted) are dropped;
// otherwise they are kept, without a sample.
func (h *history) recordEntities(snap sluiceprom.Snapshot, counts map[string]*[3]int64, secs float64, at int64, deletedSince time.Time) {
	rate := func(c *[3]int64, f flow) float32 {
		if c == nil || secs <= 0 {
			return 0
		}
		return float32(float64(c[f]) / secs)
	}
	seen := make(map[string]bool, len(snap.Entities))
	for _, e := range snap.Entities {
		if h.deletedSince(e.Path, deletedSince) {
			continue // deleted while the snapshot was read
		}
		r := h.entities[e.Path]
		if r == nil {
			if len(h.entities) >= maxHistoryEntities {
				continue
			}
			r = &ring[entitySample]{}
			h.entities[e.Path] = r
		}
		seen[e.Path] = true
		st, c := e.Stats, counts[e.Path]
		r.push(entitySample{at: at, active: st.Active, inFlight: st.InFlight, scheduled: st.Scheduled, deferred: st.Deferred,
			deadLettered: st.DeadLettered, expired: st.Expired,
			sent: rate(c, flowSent), received: rate(c, flowReceived), settled: rate(c, flowSettled)}, h.size)
	}
	if snap.EntitiesComplete {
		for path := range h.entities {
			if !seen[path] {
				delete(h.entities, path)
			}
		}
	}
}

// recordLag adds a sample of lag to the rings of the consumers in
// namespaces and of the subscriptions lagging most, up to their bounds,
// and drops the others' rings.
func (h *history) recordLag(cs sluice.ClusterStatus, at int64) {
	lags := sluiceprom.ConsumerLags(cs)
	slices.SortFunc(lags, func(a, b sluiceprom.ConsumerLag) int {
		return cmp.Or(cmp.Compare(b.Lag, a.Lag), cmp.Compare(a.Consumer, b.Consumer), cmp.Compare(a.Namespace, b.Namespace))
	})
	lags = lags[:min(len(lags), maxHistoryConsumers)]
	kept := make(map[consumerNS]*consumerRing, len(lags))
	for _, l := range lags {
		k := consumerNS{l.Consumer, l.Namespace}
		r := h.consumers[k]
		if r == nil {
			r = &consumerRing{}
		}
		r.group = l.Group
		r.push(lagSample{at: at, lag: l.Lag}, h.size)
		kept[k] = r
	}
	h.consumers = kept

	type subLag struct {
		sluice.SubscriptionLag
		lag int64
	}
	byID := map[string]*subLag{}
	for _, p := range cs.Partitions {
		for _, s := range p.Subscriptions {
			if s.Consumer == "" {
				continue // created or deleted while the status was read
			}
			if sl := byID[s.ID]; sl != nil {
				sl.lag += s.Lag
			} else {
				byID[s.ID] = &subLag{s, s.Lag}
			}
		}
	}
	subs := make([]*subLag, 0, len(byID))
	for _, sl := range byID {
		subs = append(subs, sl)
	}
	slices.SortFunc(subs, func(a, b *subLag) int { return cmp.Or(cmp.Compare(b.lag, a.lag), cmp.Compare(a.ID, b.ID)) })
	subs = subs[:min(len(subs), maxHistorySubscriptions)]
	keptSubs := make(map[string]*subscriptionRing, len(subs))
	for _, sl := range subs {
		r := h.subscriptions[sl.ID]
		if r == nil {
			r = &subscriptionRing{streamSubscription: streamSubscription{sl.Consumer, sl.Namespace, sl.Key}}
		}
		r.push(lagSample{at: at, lag: sl.lag}, h.size)
		keptSubs[sl.ID] = r
	}
	h.subscriptions = keptSubs
}

// entity returns an entity's samples, oldest first (ok false when it
// has no ring).
func (h *history) entity(name string) (samples []entitySample, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.entities[sluice.CanonicalName(name)]
	if r == nil {
		return nil, false
	}
	return r.all(), true
}

// consumerHistory is a consumer's lag in a namespace, as the history
// returns it.
type consumerHistory struct {
	consumerNS
	group   string
	samples []lagSample
}

// consumerLags returns the series of a consumer (every consumer's for
// ""; consumer names compare in ASCII lower case, as grants and
// listings compare them), up to max, those lagging most at the last sample first.
func (h *history) consumerLags(consumer string, max int) []consumerHistory {
	h.mu.Lock()
	defer h.mu.Unlock()
	type found struct {
		k    consumerNS
		r    *consumerRing
		last int64
	}
	var rs []found
	for k, r := range h.consumers {
		if consumer == "" || sluice.CanonicalName(k.consumer) == sluice.CanonicalName(consumer) {
			rs = append(rs, found{k, r, r.last().lag})
		}
	}
	slices.SortFunc(rs, func(a, b found) int {
		return cmp.Or(cmp.Compare(b.last, a.last), cmp.Compare(a.k.consumer, b.k.consumer), cmp.Compare(a.k.namespace, b.k.namespace))
	})
	out := make([]consumerHistory, 0, min(len(rs), max))
	for _, f := range rs[:min(len(rs), max)] {
		out = append(out, consumerHistory{consumerNS: f.k, group: f.r.group, samples: f.r.all()})
	}
	return out
}

// subscription returns a stream subscription's series (ok false when it
// has none).
func (h *history) subscription(id string) (sub streamSubscription, samples []lagSample, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.subscriptions[id]
	if r == nil {
		return streamSubscription{}, nil, false
	}
	return r.streamSubscription, r.all(), true
}
