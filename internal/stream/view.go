package stream

import (
	"context"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// A subscription's view of its partition: its cursor over the cache, the
// events it queued per stream, and its safe position. The agent's
// goroutine owns it; nothing here starts a goroutine or does I/O, so the
// cursor logic can be driven on its own.

// subState is a subscription as an agent runs it.
type subState struct {
	sub store.Subscription
	// c is the subscription's consumer on this node: nil when none is
	// registered, and then the subscription neither reads nor moves.
	c *Consumer
	// cursor: every record at or below it was examined (queued for
	// delivery, or of no concern).
	cursor int64
	// unresolved holds the positions queued or in delivery, ascending;
	// resolved marks those done, dropped from the front lazily.
	unresolved []int64
	resolved   map[int64]bool
	streams    map[string]*streamQueue
	ready      []string // streams with events waiting and none in delivery
	inflight   int
	saved      int64
	faulted    bool
	// gen counts halts: a delivery started before one reports to nothing.
	// startedGen is the generation of the deliveries last started.
	gen, startedGen int
	// ctx carries the deliveries of this generation: a halt or a removal
	// cancels them.
	ctx    context.Context
	cancel context.CancelFunc
	// dctx is what deliveries start with (see deliveryCtx): ctx, ended
	// too by the lease context dlease. dstop and dcancel release it.
	dctx    context.Context
	dlease  context.Context
	dstop   func() bool
	dcancel context.CancelCauseFunc
	// faultPending is a fault the database has not recorded yet: the
	// subscription stays halted until it has.
	faultPending string
	// replays are parked events to deliver again, in the order asked
	// for: each as the next event of its stream (see startReplays).
	replays []*replayReq
	// lastMatch is the position of the last event queued.
	lastMatch int64
	// lagStarted counts the deliveries started in a lagging window in
	// the agent's current inflow interval.
	lagStarted int64
}

// Cursor, Safe and LastMatch make a subscription a member of its cache.
func (s *subState) Cursor() int64    { return s.cursor }
func (s *subState) Safe() int64      { return s.safe() }
func (s *subState) LastMatch() int64 { return s.lastMatch }

// Matches reports whether s wants r.
func (s *subState) Matches(r *sluicetype.Record) bool { return s.matches(r) }

// Stream reports the stream s reads, when it reads one (not a whole
// namespace).
func (s *subState) Stream() (namespace, key string, ok bool) {
	return s.sub.Namespace, s.sub.Key, s.sub.Key != ""
}

// streamQueue is one stream's events waiting for one subscription, in
// order; the first is in delivery when busy. Its entries stay as they
// are when the cache drops them (a purge, a reset, a halted subscription
// that no longer pins them).
type streamQueue struct {
	items []*entry
	busy  bool
}

// safe is the subscription's position: every record at or below it is
// done (delivered, parked, or of no concern). It is never past the
// cursor, nor past the first unresolved event.
func (s *subState) safe() int64 {
	for len(s.unresolved) > 0 && s.resolved[s.unresolved[0]] {
		delete(s.resolved, s.unresolved[0])
		s.unresolved = s.unresolved[1:]
	}
	if len(s.unresolved) > 0 {
		return min(s.cursor, s.unresolved[0]-1)
	}
	return s.cursor
}

// halt stops a subscription (faulted): what it queued is dropped, what
// it has in delivery is cancelled, and its cursor goes back to its
// position, so that it reads them again when it resumes, once the
// cancelled deliveries have ended (inflight is 0).
func (s *subState) halt(parent context.Context) {
	s.cursor = s.safe()
	s.unresolved, s.resolved = nil, make(map[int64]bool)
	s.streams, s.ready = make(map[string]*streamQueue), nil
	s.faulted = true
	s.gen++
	s.end()
	s.ctx, s.cancel = context.WithCancel(parent)
}

// deliveryCtx is the context a delivery of s starts with under lease,
// the agent's lease context: it ends with the subscription's generation
// (a halt, a removal) or with the lease, whose cause it takes. One
// serves every delivery of a generation under one lease context, rather
// than two contexts made for each delivery: a replay delivers thousands
// a second, and what each allocates is garbage the whole process pays
// to collect.
func (s *subState) deliveryCtx(lease context.Context) context.Context {
	if s.dctx != nil && s.dlease == lease {
		return s.dctx
	}
	s.releaseDelivery()
	ctx, cancel := context.WithCancelCause(s.ctx)
	s.dstop = context.AfterFunc(lease, func() { cancel(context.Cause(lease)) })
	s.dctx, s.dlease, s.dcancel = ctx, lease, cancel
	return ctx
}

// releaseDelivery drops the delivery context, which a halt, a removal or
// the lease ended already (or which no delivery holds any more).
func (s *subState) releaseDelivery() {
	if s.dctx == nil {
		return
	}
	s.dstop()
	s.dcancel(nil)
	s.dctx, s.dlease, s.dstop, s.dcancel = nil, nil, nil, nil
}

// end cancels the deliveries of the subscription's generation: it was
// halted or removed.
func (s *subState) end() {
	s.cancel()
	s.releaseDelivery()
}

// draining reports deliveries of an earlier generation still running:
// after a halt, nothing starts until they have ended, so that no stream
// has two deliveries at once.
func (s *subState) draining() bool { return s.inflight > 0 && s.startedGen < s.gen }

// active reports whether the subscription delivers on this node.
func (s *subState) active() bool { return s.c != nil && !s.faulted }

func (s *subState) matches(r *sluicetype.Record) bool {
	return r.Namespace == s.sub.Namespace && (s.sub.Key == "" || r.Key == s.sub.Key)
}

// walk moves the cursor over what its window holds after it, queueing
// the events of the subscription's streams, each at the end of its
// stream's queue, while the cursor stays within lookahead of the safe
// position (0: no bound). A position the window covers without a record
// is a hole retention left: the cursor passes it. It reports false, and
// moves nothing, when the window starts after the cursor: the
// subscription must join a window again.
func (s *subState) walk(w *window, lookahead int64) bool {
	if s.cursor+1 < w.start {
		return false
	}
	for s.cursor < w.end && (lookahead == 0 || s.cursor-s.safe() < lookahead) {
		pos := s.cursor + 1
		if e := w.get(pos); e != nil && s.matches(&e.rec) {
			s.queue(e)
		}
		s.cursor = pos
	}
	return true
}

// queue adds an event at the end of its stream's queue, unresolved.
func (s *subState) queue(e *entry) {
	key := e.rec.Key
	q := s.streams[key]
	if q == nil {
		q = &streamQueue{}
		s.streams[key] = q
	}
	q.items = append(q.items, e)
	if len(q.items) == 1 && !q.busy {
		s.ready = append(s.ready, key)
	}
	s.unresolved = append(s.unresolved, e.rec.Position)
	s.lastMatch = e.rec.Position
}

// next takes the next event to deliver: the first of a ready stream with
// none in delivery. It counts it in flight, in the current generation.
// The record is the cache's entry's, which nothing changes.
func (s *subState) next() (*sluicetype.Record, bool) {
	for len(s.ready) > 0 {
		key := s.ready[0]
		s.ready = s.ready[1:]
		q := s.streams[key]
		if q == nil || q.busy || len(q.items) == 0 {
			continue
		}
		q.busy = true
		s.inflight++
		s.startedGen = s.gen
		return &q.items[0].rec, true
	}
	return nil, false
}

// hasNext reports whether next would return an event.
func (s *subState) hasNext() bool {
	for _, key := range s.ready {
		if q := s.streams[key]; q != nil && !q.busy && len(q.items) > 0 {
			return true
		}
	}
	return false
}

// delivered resolves the event in delivery at the head of a stream's
// queue: the stream's next event is ready.
func (s *subState) delivered(key string, pos int64) {
	q := s.streams[key]
	q.busy = false
	q.items[0] = nil
	q.items = q.items[1:]
	s.resolved[pos] = true
	if len(q.items) > 0 {
		s.ready = append(s.ready, key)
	} else {
		delete(s.streams, key)
	}
}
