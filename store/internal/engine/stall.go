package engine

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Stalled groups. A group can wait in the database for a row another
// transaction holds: a caller's open SendTx holds its queue's counter row,
// a CompleteTx the message's row, a PublishTx its partition's head row,
// until the caller commits. Every write routed to the same pipeline would
// wait with it. Instead, a pipeline whose group has run for stallAfter
// (several times its recent groups' duration) hands its channel to a new
// goroutine and leaves the group to finish on its own. Later sends and
// appends to the stalled group's entities, whose counter or head rows it
// may be waiting for, are held back in its lane and run after it, so that
// they neither stall the pipeline again nor take connections to wait for
// the same lock; settles and leases are not held back (they lock message
// rows, which later requests rarely share, and leases skip rows others
// hold). A committer lets at most maxStalled groups wait at once, and only
// where its pool has connections beyond the pipelines' (never on SQLite,
// whose one writer every group waits for).
//
// Numbering stays gap-free and in commit order per entity: an entity's
// numbers are taken under its counter (or head) row's lock, held to the
// commit, whichever goroutine runs the group.

// Bounds of the time a group runs before its pipeline moves on.
const (
	minStallAfter = 20 * time.Millisecond
	maxStallAfter = time.Second
	// stallFactor times a pipeline's recent group duration is stallAfter.
	stallFactor = 8
)

// stalls tracks a committer's stalled groups.
type stalls struct {
	max   int
	count atomic.Int32 // stalled groups; read without mu on the hot path
	mu    sync.Mutex
	// lanes are, for each entity of a stalled group, the lanes of the
	// stalled groups that wrote to it, oldest first (groups of two
	// pipelines may both stall on one entity).
	lanes map[entityKey][]*lane
}

// entityKey names an entity whose numbers a request takes: a queue's
// counter row or a partition's head row.
type entityKey struct {
	t         store.Tenant
	queue     string
	partition int32
	isLog     bool
}

// lane holds the requests that wait for a stalled group's entities.
type lane struct {
	keys []entityKey
	held []*writeReq
}

// pipe is one commit pipeline: its channel and the average duration of
// its recent groups.
type pipe struct {
	reqs chan *writeReq
	avg  atomic.Int64 // nanoseconds, an exponentially weighted average
}

// stallAfter is how long a group of p runs before p moves on.
func (p *pipe) stallAfter() time.Duration {
	return min(max(stallFactor*time.Duration(p.avg.Load()), minStallAfter), maxStallAfter)
}

// observe adds a group's duration to p's average (a weight of 1/8).
func (p *pipe) observe(d time.Duration) {
	old := p.avg.Load()
	p.avg.Store(old + (int64(d)-old)/8)
}

// entities returns the entities whose counter or head rows r takes; it
// reads r's parameters, which belong to the caller, so submit calls it.
func (r *writeReq) entities() []entityKey {
	switch {
	case r.enq != nil:
		return []entityKey{{t: r.t, queue: r.enq.Queue}}
	case r.app != nil:
		return []entityKey{{t: r.t, partition: r.app.Partition, isLog: true}}
	case r.all != nil:
		keys := make([]entityKey, 0, len(r.all.Batches)+len(r.all.Arrivals)+1)
		for _, b := range r.all.Batches {
			keys = append(keys, entityKey{t: r.t, queue: b.Queue})
		}
		for _, a := range r.all.Arrivals {
			keys = append(keys, entityKey{t: r.t, queue: a.Queue})
		}
		if r.all.Routed != nil {
			keys = append(keys, entityKey{t: r.t, queue: r.all.Routed.Queue})
		}
		return keys
	}
	return nil
}

// holdBack removes from batch the requests that take an entity of a
// stalled group, and adds them to that group's lane.
func (s *stalls) holdBack(batch []*writeReq) []*writeReq {
	if s.count.Load() == 0 {
		return batch
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := batch[:0]
	for _, r := range batch {
		if l := s.laneOf(r); l != nil {
			l.held = append(l.held, r)
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

// laneOf returns the lane r waits in: that of the newest stalled group
// with one of r's entities, or nil.
func (s *stalls) laneOf(r *writeReq) *lane {
	for _, k := range r.keys {
		if ls := s.lanes[k]; len(ls) > 0 {
			return ls[len(ls)-1]
		}
	}
	return nil
}

// stall records batch as stalled and returns its lane, or nil if the
// committer has as many stalled groups as it may.
func (s *stalls) stall(batch []*writeReq) *lane {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(s.count.Load()) >= s.max {
		return nil
	}
	s.count.Add(1)
	l := &lane{}
	for _, r := range batch {
		select {
		case <-r.done:
			continue // finished: it holds nothing
		default:
		}
		for _, k := range r.keys {
			if !slices.Contains(l.keys, k) {
				s.lanes[k] = append(s.lanes[k], l)
				l.keys = append(l.keys, k)
			}
		}
	}
	return l
}

// release returns l's held requests and releases l's entities: the
// stalled group is done, so later requests to them go to the pipeline
// again.
func (s *stalls) release(l *lane) []*writeReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range l.keys {
		ls := slices.DeleteFunc(s.lanes[k], func(x *lane) bool { return x == l })
		if len(ls) == 0 {
			delete(s.lanes, k)
		} else {
			s.lanes[k] = ls
		}
	}
	s.count.Add(-1)
	held := l.held
	l.held = nil
	return held
}

// runWatched runs a group of p. If it runs past p's stallAfter, a new
// goroutine takes over p's channel, and this one, once the group is done,
// runs the requests held back for its entities and returns true: it is no
// longer p's.
func (c *committer) runWatched(p *pipe, batch []*writeReq) (detached bool) {
	if c.stalls.max == 0 {
		c.run(batch)
		return false
	}
	start := time.Now()
	watched := slices.Clone(batch) // run filters batch in place
	var (
		mu     sync.Mutex
		done   bool
		fired  bool
		moved  *lane
		timer  *time.Timer
		tryOff func()
	)
	// At stallAfter the pipeline moves on, or, when the committer has as
	// many stalled groups as it may, tries again a stallAfter later: a
	// stalled group may have finished meanwhile.
	tryOff = func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		fired = true
		if moved = c.moveOn(p, watched); moved == nil {
			timer.Reset(p.stallAfter())
		}
	}
	mu.Lock()
	timer = time.AfterFunc(p.stallAfter(), tryOff)
	mu.Unlock()
	c.run(batch)
	mu.Lock()
	done = true
	timer.Stop()
	mu.Unlock()
	if !fired {
		p.observe(time.Since(start))
	}
	if moved == nil {
		return false
	}
	c.runLane(moved)
	return true
}

// moveOn records batch as stalled and starts a goroutine that takes over
// p, or returns nil if the committer may not stall another group.
func (c *committer) moveOn(p *pipe, batch []*writeReq) *lane {
	l := c.stalls.stall(batch)
	if l == nil {
		return nil
	}
	c.e.log.Debug("sluice: a group commit waits; its pipeline moves on" /* storetest.StallMessage */, "requests", len(batch), "after", p.stallAfter())
	c.wg.Add(1) // the stalled goroutine still counts: never from zero
	go c.loop(p)
	return l
}

// runLane runs the requests held back for a stalled group's entities,
// once the group is done, in groups. Requests that arrive meanwhile go to
// the pipeline (the row locks keep each entity's numbering in commit
// order).
func (c *committer) runLane(l *lane) {
	held := c.stalls.release(l)
	for len(held) > 0 {
		n, bytes := 0, 0
		for n < len(held) && n < maxGroupRequests && (n == 0 || bytes < maxGroupBytes) {
			bytes += held[n].size()
			n++
		}
		c.run(held[:n])
		held = held[n:]
	}
}
