package stream

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// WindowLimitPolicy says what a partition's cache does when a
// subscription needs a window of its own and the cache has as many as it
// may keep.
type WindowLimitPolicy int

const (
	// WindowLimitShare shares a window: a subscription that starts behind
	// every window moves the nearest window above it back to its
	// position (that window's subscriptions wait while it reads again,
	// passing what they have seen), and a lagging subscription that pins
	// a full window holds its window's subscriptions back with it, as
	// with one window.
	WindowLimitShare WindowLimitPolicy = iota
	// WindowLimitFault faults the subscription instead, with a reason
	// that names ErrWindowLimit; ClearFault or a reposition lets it try
	// again.
	WindowLimitFault
)

func (p WindowLimitPolicy) String() string {
	if p == WindowLimitFault {
		return "fault"
	}
	return "share"
}

// cacheConfig bounds a partition's cache.
type cacheConfig struct {
	records int   // at most this many records held
	bytes   int64 // reads stop once this many bytes are held
	batch   int   // one read's bound
	windows int   // at most this many windows (1: one contiguous window)
	policy  WindowLimitPolicy
}

// The cache's shape follows from its bounds, B records (and bytes) and M
// windows:
//
//   - With M = 1 it is one contiguous window, as the cache always was: a
//     member may walk the whole window, and one that pins its oldest
//     record holds everyone back once it is full.
//   - With M > 1, a member walks at most lookahead = B/(2(M-1)) records
//     past its safe position (its oldest unresolved event). That is what
//     lets a split leave it behind without moving any cursor back, and
//     what bounds a lagging window to about lookahead records (plus a
//     read): M-1 lagging windows then hold at most half the budget, and
//     the head window keeps the rest. With two windows it is half the
//     budget, the bound as large as memory allows.
//   - Each window keeps reserve = B/(2M) of the budget for itself: the
//     others may borrow what it does not use, never that.
//   - A split needs a gap of splitLag = reserve records between the
//     lagging members' cursors and the others' safe positions, and a
//     window splits again only after admitting splitLag records since it
//     was last split or merged: borderline lag does not split and merge
//     over and over.
type cacheShape struct {
	lookahead    int64
	reserve      int
	reserveBytes int64
	splitLag     int64
}

func (cfg cacheConfig) shape() cacheShape {
	if cfg.windows <= 1 {
		return cacheShape{splitLag: int64(cfg.records)}
	}
	m := int64(cfg.windows)
	return cacheShape{
		lookahead:    max(1, int64(cfg.records)/(2*(m-1))),
		reserve:      max(1, cfg.records/(2*cfg.windows)),
		reserveBytes: max(1, cfg.bytes/(2*m)),
		splitLag:     max(1, int64(cfg.records)/(2*m)),
	}
}

// windows is the cache of one partition: resident windows, disjoint and
// ascending; the last one, the head window, reads ahead of its members
// (as the one contiguous cache did), the others (lagging windows) read
// only for members that need more. Each window holds every record of the
// log in its range, but for holes retention left: a member walking it
// skips nothing.
type windows struct {
	cfg     cacheConfig
	shape   cacheShape
	ws      []*window
	of      map[Member]*window
	records int
	bytes   int64
	avgSize int64
	st      CacheStats
	// lagNext is where the next lagging read looks first (see Plan).
	lagNext int
	// wanted is a position past the head window's end that a member
	// waiting at that end wants (0: none known), found by a probe or in
	// the tail's records; probed is how far probes have looked.
	wanted, probed int64
}

// newCache returns a cache whose head window reads after after.
func newCache(cfg cacheConfig, after int64) *windows {
	cfg.windows = max(cfg.windows, 1)
	cfg.batch = max(cfg.batch, 1)
	if cfg.windows == 1 {
		cfg.policy = WindowLimitShare // one window is shared by all
	}
	return &windows{cfg: cfg, shape: cfg.shape(), of: make(map[Member]*window),
		ws: []*window{{start: after + 1, end: after, admitted: int64(cfg.records)}}}
}

var errStalePlan = errors.New("stream: read plan no longer matches its window")

func (c *windows) head() *window { return c.ws[len(c.ws)-1] }

func (c *windows) index(w *window) int { return slices.Index(c.ws, w) }

func (c *windows) Window(m Member) *window { return c.of[m] }

func (c *windows) Lookahead() int64 { return c.shape.lookahead }

func (c *windows) ReadThrough() int64 { return c.head().end }

func (c *windows) Size() (int, int64) { return c.records, c.bytes }

func (c *windows) Join(m Member) error {
	if w := c.of[m]; w != nil {
		return nil
	}
	c.probed = 0 // who waits changed: probes look again from the head's end
	cur := m.Cursor()
	for _, w := range c.ws {
		if w.start-1 <= cur && cur <= w.end {
			if w.filters(m) {
				// It holds only another stream's records past m's
				// cursor: it goes back to there, and reads everything
				// on (its members past it wait; they pass what they
				// examined).
				c.forget(w.dropAbove(cur))
				w.end, w.filtered = cur, min(w.filtered, cur)
			}
			c.add(w, m)
			return nil
		}
	}
	// Ahead of every window: the head window reads up to it, unless it is
	// far ahead (a restart, a subscription at the log's head while the
	// agent has a backlog): then it starts a head window of its own, and
	// the old one lags, read for its members only.
	if h := c.head(); cur > h.end {
		if cur-h.end > c.shape.splitLag && len(c.ws) < c.cfg.windows {
			c.add(c.insert(len(c.ws), cur), m)
			return nil
		}
		c.add(h, m)
		return nil
	}
	// Behind the head window, in no window: a window just below reads up
	// to it if it is near; otherwise it gets a window of its own, read
	// from storage, and moves no one else.
	i, _ := slices.BinarySearchFunc(c.ws, cur, func(w *window, cur int64) int { return cmp.Compare(w.start-1, cur) })
	if i > 0 && cur-c.ws[i-1].end <= c.shape.splitLag {
		c.add(c.ws[i-1], m)
		return nil
	}
	if len(c.ws) < c.cfg.windows {
		c.add(c.insert(i, cur), m)
		return nil
	}
	if c.cfg.policy == WindowLimitFault {
		return fmt.Errorf("%d windows: %w", len(c.ws), sluicetype.ErrWindowLimit)
	}
	// At the limit, shared: the nearest window above goes back to the
	// member's cursor, and its members wait while it reads again (they
	// pass what they have examined).
	w := c.ws[i]
	c.forget(w.reset(cur))
	w.admitted = int64(c.cfg.records)
	c.add(w, m)
	c.st.Resets++
	return nil
}

// insert makes an empty window that reads after after, at index i.
func (c *windows) insert(i int, after int64) *window {
	w := &window{start: after + 1, end: after, admitted: c.shape.splitLag}
	c.ws = slices.Insert(c.ws, i, w)
	return w
}

func (c *windows) add(w *window, m Member) {
	w.members = append(w.members, m)
	c.of[m] = w
}

func (c *windows) Leave(m Member) {
	if w := c.of[m]; w != nil {
		w.remove(m)
		delete(c.of, m)
	}
}

func (c *windows) forget(records int, bytes int64) {
	c.records -= records
	c.bytes -= bytes
}

// room is what window w may read now: what the budget has left once
// every other window's unused reserve is set aside (the byte bound stops
// reads once reached).
func (c *windows) room(w *window) (int, int64) {
	records, bytes := c.cfg.records-c.records, c.cfg.bytes-c.bytes
	for _, v := range c.ws {
		if v != w {
			n, b := v.size()
			records -= max(0, c.shape.reserve-n)
			bytes -= max(0, c.shape.reserveBytes-b)
		}
	}
	if records <= 0 || bytes <= 0 {
		return 0, 0
	}
	return records, bytes
}

// readMax is how many records a read for w asks for.
func (c *windows) readMax(w *window) int {
	records, bytes := c.room(w)
	n := min(records, c.cfg.batch)
	if c.avgSize > 0 && n > 0 {
		n = int(min(int64(n), bytes/c.avgSize+1))
	}
	return n
}

// wants is how many records past its end w's members may walk now: 0
// unless one has walked all of it, and at most what the lookahead
// leaves the one with most leeway (a read batch without a lookahead).
func (c *windows) wants(w *window) int {
	n := int64(0)
	for _, m := range w.members {
		if m.Cursor() < w.end {
			continue
		}
		if c.shape.lookahead == 0 {
			return c.cfg.batch
		}
		n = max(n, m.Safe()+c.shape.lookahead-w.end)
	}
	return int(min(n, int64(c.cfg.batch)))
}

// minLagRead is the least a lagging window reads while a member at its
// end still has events to deliver: half a read, or of the lookahead.
// Read each time a delivery ended, a lagging window that replays at full
// speed would read a record or two at a time, a query each, and take
// from the others the time and the database those cost.
func (c *windows) minLagRead() int {
	n := c.cfg.batch
	if c.shape.lookahead > 0 {
		n = int(min(int64(n), c.shape.lookahead))
	}
	return max(1, n/2)
}

// idle reports whether a member that walked all of w has nothing left to
// deliver: it waits for a read, however small.
func (c *windows) idle(w *window) bool {
	return slices.ContainsFunc(w.members, func(m Member) bool { return m.Cursor() >= w.end && m.Safe() >= m.Cursor() })
}

func (c *windows) Plan(now time.Time, head, lagging bool) (ReadPlan, bool) {
	if head {
		h := c.head()
		n := c.readMax(h)
		if n == 0 && c.wanted <= h.end && len(c.waiting(h)) > 0 {
			// Full, with a member waiting at the end for nothing it
			// knows of: look on for a record it wants.
			c.probed = max(c.probed, h.end)
			return ReadPlan{w: h, After: c.probed, Max: c.cfg.batch, Head: true, Probe: true}, true
		}
		return ReadPlan{w: h, After: h.end, Max: n, Head: true}, true
	}
	if !lagging {
		return ReadPlan{}, false
	}
	// Lagging windows take turns, starting after the one read last: the
	// lowest one, whose members walk what it reads at once, would
	// otherwise take every lagging read while the others wait.
	lag := len(c.ws) - 1
	for k := range lag {
		i := (c.lagNext + k) % lag
		w := c.ws[i]
		want := c.wants(w)
		if want == 0 || now.Before(w.retryAt) || want < c.minLagRead() && !c.idle(w) {
			continue
		}
		// What its members may walk (a lagging window holds no more than
		// the lookahead), up to the next window and never into it: what
		// that one holds is not read again.
		n := min(c.readMax(w), want, int(min(int64(c.cfg.batch), c.ws[i+1].start-w.end-1)))
		if n > 0 {
			c.lagNext = i + 1
			p := ReadPlan{w: w, After: w.end, Max: n}
			if s, ok := c.oneStream(w); ok {
				p.Namespace, p.Key, p.Through = s.namespace, s.key, c.ws[i+1].start-1
			}
			return p, true
		}
	}
	return ReadPlan{}, false
}

func (c *windows) Admit(p ReadPlan, recs []sluicetype.Record) error {
	w := p.w
	i := c.index(w)
	if p.Probe {
		return c.probe(p, recs)
	}
	if i < 0 || w.end != p.After {
		return errStalePlan
	}
	if len(recs) > p.Max {
		return fmt.Errorf("stream: a read returned %d records, asked for %d", len(recs), p.Max)
	}
	filtered := p.Namespace != ""
	for i := range recs {
		if recs[i].Position <= p.After || i > 0 && recs[i].Position <= recs[i-1].Position {
			return fmt.Errorf("stream: a read after %d returned position %d out of order", p.After, recs[i].Position)
		}
		if filtered && (recs[i].Namespace != p.Namespace || recs[i].Key != p.Key) {
			return fmt.Errorf("stream: a read of stream %s/%s returned a record of %s/%s", p.Namespace, p.Key, recs[i].Namespace, recs[i].Key)
		}
	}
	if filtered {
		// Only a lagging window reads one stream, and only while its
		// members all read that one (one may have joined since the plan).
		if s, ok := c.oneStream(w); p.Head || i+1 >= len(c.ws) || !ok || s != (streamID{p.Namespace, p.Key}) {
			return errStalePlan
		}
	}
	if !p.Head {
		c.st.RehydrationReads++
	}
	// A read of one stream that returned fewer than asked for found all
	// of that stream's records through p.Through, the position before
	// the next window when planned.
	short := filtered && len(recs) < p.Max
	// What the next window holds stays there: the read reached it, so the
	// two meet (they merge).
	meets := false
	if i+1 < len(c.ws) {
		next := c.ws[i+1].start
		k, _ := slices.BinarySearchFunc(recs, next, func(r sluicetype.Record, pos int64) int { return cmp.Compare(r.Position, pos) })
		if k < len(recs) {
			c.st.DuplicateReads += int64(len(recs) - k)
			recs, meets = recs[:k], true
		}
	}
	// A lagging window's read runs while the agent goes on (see the
	// agent's readLagging): the other windows may have taken the room it
	// was planned with since. What fits goes in; it reads the rest later.
	if !p.Head {
		if room, _ := c.room(w); len(recs) > room {
			recs, meets, short = recs[:room], false, false
		}
	}
	if len(recs) > 0 {
		records, bytes := w.add(recs)
		c.records += records
		c.bytes += bytes
		c.avgSize = bytes / int64(records)
		c.reshape()
		if !p.Head {
			c.st.RehydratedRecords += int64(records)
		}
	}
	switch {
	case meets:
		w.end = c.ws[i+1].start - 1 // nothing between: the read said so
	case short:
		// It read through p.Through, which the next window's start may
		// have passed since the plan (a purge moved it on): then the
		// window reaches only that far, and reads on from there.
		w.end = max(w.end, min(p.Through, c.ws[i+1].start-1))
	}
	if filtered {
		w.filtered, w.filter = w.end, streamID{p.Namespace, p.Key}
	}
	return nil
}

// oneStream is the stream every member of w reads, when they all read
// that one stream, and w holds no other stream's records only: a read
// for w may then pass over the partition's other records.
func (c *windows) oneStream(w *window) (streamID, bool) {
	if len(w.members) == 0 {
		return streamID{}, false
	}
	s, ok := streamOf(w.members[0])
	if !ok || w.filtered >= w.start && w.filter != s {
		return streamID{}, false
	}
	for _, m := range w.members[1:] {
		if t, ok := streamOf(m); !ok || t != s {
			return streamID{}, false
		}
	}
	return s, true
}

func (c *windows) Follow(recs []sluicetype.Record) bool {
	h := c.head()
	next := h.end + 1
	i, _ := slices.BinarySearchFunc(recs, next, func(r sluicetype.Record, pos int64) int { return cmp.Compare(r.Position, pos) })
	recs = recs[i:]
	if len(recs) == 0 {
		return true
	}
	if recs[0].Position != next {
		return false // a gap: appended elsewhere, or not handed over
	}
	room, bytes := c.room(h)
	var size int64
	for i := range recs {
		size += recordSize(&recs[i])
	}
	if room < len(recs) || bytes < size {
		c.look(h, recs)
		return false
	}
	records, bytes := h.add(recs)
	c.records += records
	c.bytes += bytes
	c.reshape()
	return true
}

// reshape works the cache's shape out again from the records it can
// hold: CacheRecords, or fewer when CacheBytes is reached first (records
// of 40 KiB fill 16 MiB at about 400). Shaped on the record bound alone,
// a window bound by bytes would never hold what a split needs, and one
// lagging subscription would hold the others back again.
func (c *windows) reshape() {
	if c.cfg.windows <= 1 || c.records == 0 {
		return
	}
	capacity := c.cfg.records
	if avg := c.bytes / int64(c.records); avg > 0 {
		capacity = int(min(int64(capacity), max(1, c.cfg.bytes/avg)))
	}
	cfg := c.cfg
	cfg.records = capacity
	c.shape = cfg.shape()
}

func (c *windows) Backoff(p ReadPlan, until time.Time) { p.w.retryAt = until }

func (c *windows) Gap(p ReadPlan, trimmed int64) []Member {
	w := p.w
	i := c.index(w)
	if i < 0 || w.end != p.After || trimmed <= w.end {
		return nil
	}
	var stranded []Member
	for _, m := range slices.Clone(w.members) {
		if m.Cursor() < trimmed {
			stranded = append(stranded, m)
			c.Leave(m)
		}
	}
	// Whoever is left starts after the gap: nothing held is theirs. What
	// the next window holds of the gap (read before the trim) stays
	// there; the two meet.
	if i+1 < len(c.ws) {
		trimmed = min(trimmed, c.ws[i+1].start-1)
	}
	c.forget(w.reset(trimmed))
	return stranded
}

func (c *windows) Purge() {
	kept := c.ws[:0]
	for i, w := range c.ws {
		// A window no one reads goes; the head window too when a lower
		// one stays (the highest of those becomes the head): reading
		// ahead for no one, it would only make the lagging windows read
		// the same range again behind it.
		if len(w.members) == 0 && (i < len(c.ws)-1 || len(kept) > 0) {
			c.forget(w.reset(w.end))
			continue
		}
		from := w.end + 1
		for _, m := range w.members {
			from = min(from, m.Safe()+1)
		}
		if from > w.start {
			w.start = from
			c.forget(w.dropBelow(from))
		}
		kept = append(kept, w)
	}
	clear(c.ws[len(kept):])
	c.ws = kept
}

func (c *windows) Rebalance() (changed bool, refused []Member) {
	if c.merge() {
		changed = true
	}
	if c.reclaim() {
		changed = true
	}
	for i := len(c.ws) - 1; i >= 0; i-- {
		if len(c.ws) < c.cfg.windows {
			if lower, ok := c.splitPoint(c.ws[i], true); ok {
				c.split(i, lower)
				return true, nil // one split a step; the next waits for the purge after it
			}
			continue
		}
		// At the limit, the Fault policy refuses the members that pin a
		// window under pressure while others starve.
		if lower, ok := c.splitPoint(c.ws[i], false); ok && c.cfg.policy == WindowLimitFault {
			for _, m := range lower {
				c.Leave(m)
			}
			refused = append(refused, lower...)
		}
	}
	return changed, refused
}

// merge joins the windows whose ranges meet: the lower one has read up to
// where the upper one starts.
func (c *windows) merge() bool {
	merged := false
	for i := 0; i+1 < len(c.ws); {
		lo, hi := c.ws[i], c.ws[i+1]
		if lo.end+1 < hi.start {
			i++
			continue
		}
		if slices.ContainsFunc(lo.members, hi.filters) {
			// hi holds only its stream's records where lo's members
			// would walk it: its members go to lo, which reads
			// everything on (they wait at their cursors until it
			// reaches them), and what hi held is read again.
			c.forget(hi.reset(hi.end))
		} else {
			c.forget(lo.dropAbove(hi.start - 1)) // none, as reads stop short of hi
			if len(lo.members) > 0 {
				c.st.ReadsAvoided += int64(len(hi.entries))
			}
			lo.entries = append(lo.entries, hi.entries...)
			lo.bytes += hi.bytes
			lo.end = hi.end
			if hi.filtered >= hi.start {
				lo.filtered, lo.filter = hi.filtered, hi.filter // lo's members read hi's stream
			}
		}
		for _, m := range hi.members {
			c.add(lo, m)
		}
		lo.admitted, lo.retryAt = 0, time.Time{}
		c.ws = slices.Delete(c.ws, i+1, i+2)
		c.st.Merges++
		merged = true
	}
	return merged
}

// reclaim gives a window whose members want more, and which has neither
// room nor its reserve, its reserve back from the window that read
// furthest ahead of its members: records above every member's cursor,
// which no one has walked, are dropped (read again later), and that
// window's end moves back to before them. No cursor or safe position
// moves.
func (c *windows) reclaim() bool {
	done := false
	for _, w := range c.ws {
		n, _ := w.size()
		need := c.shape.reserve - n
		if need <= 0 || c.wants(w) == 0 {
			continue
		}
		if room, _ := c.room(w); room > 0 {
			continue
		}
		var from *window
		most := 0
		for _, v := range c.ws {
			if t := c.tail(v); v != w && t > most {
				from, most = v, t
			}
		}
		if from == nil {
			continue
		}
		k := min(need, most)
		cut := from.entries[len(from.entries)-k].rec.Position - 1
		c.forget(from.dropAbove(cut))
		from.end, from.filtered = cut, min(from.filtered, cut)
		c.st.Reclaimed += int64(k)
		done = true
	}
	return done
}

// tail counts the records of w above every member's cursor.
func (c *windows) tail(w *window) int {
	reach := w.start - 1
	for _, m := range w.members {
		reach = max(reach, m.Cursor())
	}
	i, _ := slices.BinarySearchFunc(w.entries, reach+1, func(e *entry, pos int64) int { return cmp.Compare(e.rec.Position, pos) })
	return len(w.entries) - i
}

// splitPoint says whether window w splits, and which members go to the
// lagging window: only under pressure (w has no room), only when a member
// demonstrably pins its oldest record (an event there is still
// unresolved), and only when a member further on is starved with demand
// (it has walked all of w and matched records in it: a subscription
// quietly passing records of other streams is not). The lagging members
// are those below the first gap of splitLag records between their
// cursors and the next members' safe positions, so that members near the
// pinning one go with it, and the window must have admitted splitLag
// records since it was last split or merged. Unless gap is set (for the
// Fault policy at the window limit) those are the members at the pinning
// one's safe position, whatever the gap.
func (c *windows) splitPoint(w *window, gap bool) ([]Member, bool) {
	if len(w.members) < 2 || gap && w.admitted < c.shape.splitLag || c.shape.lookahead == 0 {
		return nil, false
	}
	if n, _ := c.room(w); n > 0 {
		return nil, false
	}
	if n, _ := w.size(); n < c.shape.reserve {
		return nil, false // short of room, but not for what it holds
	}
	ms := slices.Clone(w.members)
	safe := make(map[Member]int64, len(ms))
	for _, m := range ms {
		safe[m] = m.Safe()
	}
	slices.SortStableFunc(ms, func(a, b Member) int { return cmp.Compare(safe[a], safe[b]) })
	if pin := ms[0]; safe[pin]+1 != w.start || safe[pin] >= pin.Cursor() {
		return nil, false
	}
	// Starved: a member that has walked all of w and either matched
	// records in it or, done with all it walked, waits at the head's end
	// while a probe found a record past it that a waiting member wants (a
	// sparse subscription, none of whose events are in w). One quietly
	// passing records it does not want is not.
	wanted := w == c.head() && c.wanted > w.end
	starved := func(ms []Member) bool {
		return slices.ContainsFunc(ms, func(m Member) bool {
			return m.Cursor() >= w.end && (m.LastMatch() >= w.start || wanted && m.Safe() >= w.end)
		})
	}
	if !gap {
		pinning := func(m Member) bool { return safe[m] == safe[ms[0]] && safe[m] < m.Cursor() }
		others := slices.DeleteFunc(slices.Clone(ms), pinning)
		return slices.DeleteFunc(ms, func(m Member) bool { return !pinning(m) }), starved(others)
	}
	// The lower members' furthest cursor within w: a member may be past
	// w's end (a Share reset moved w back), and positions w never read
	// are no lagging window's.
	reach := int64(-1)
	for k := 1; k < len(ms); k++ {
		reach = max(reach, min(ms[k-1].Cursor(), w.end))
		if safe[ms[k]]-reach >= c.shape.splitLag {
			if reach >= w.end {
				// The lower members walked all of w: the lagging window
				// would be all of it, and the other one would start
				// right after it, the two meeting (merged again at once).
				return nil, false
			}
			return ms[:k], starved(ms[k:])
		}
	}
	return nil, false
}

// split moves the lower members of window i to a lagging window of the
// records they have walked; the others keep window i from their lowest
// safe position on. The records between stay in storage only, and the
// lagging window reads them again after its end.
func (c *windows) split(i int, lower []Member) {
	w := c.ws[i]
	reach := w.start - 1
	for _, m := range lower {
		reach = max(reach, min(m.Cursor(), w.end)) // what w read, as in splitPoint
	}
	l := &window{start: w.start, end: reach, filtered: min(w.filtered, reach), filter: w.filter}
	k, _ := slices.BinarySearchFunc(w.entries, reach+1, func(e *entry, pos int64) int { return cmp.Compare(e.rec.Position, pos) })
	l.entries = slices.Clone(w.entries[:k])
	for _, e := range l.entries {
		l.bytes += e.size
	}
	for _, m := range lower {
		w.remove(m)
		c.add(l, m)
	}
	from := w.end + 1
	for _, m := range w.members {
		from = min(from, m.Safe()+1)
	}
	clear(w.entries[:k])
	w.entries = w.entries[k:]
	w.bytes -= l.bytes
	w.start = reach + 1
	if from > w.start {
		w.start = from
		c.forget(w.dropBelow(from))
	}
	w.admitted = 0
	c.ws = slices.Insert(c.ws, i, l)
	c.st.Splits++
}

func (c *windows) Stats() CacheStats {
	st := c.st
	st.Windows = make([]WindowStats, len(c.ws))
	for i, w := range c.ws {
		records, bytes := w.size()
		room, _ := c.room(w)
		st.Windows[i] = WindowStats{Start: w.start, End: w.end, Records: records, Bytes: bytes,
			Head: i == len(c.ws)-1, Members: len(w.members), Room: room, Wanted: c.wants(w)}
		if s, ok := c.oneStream(w); ok && i < len(c.ws)-1 {
			st.Windows[i].Stream = s.namespace + "/" + s.key
		}
	}
	return st
}

func (c *windows) Lagging(m Member) bool {
	w := c.of[m]
	return w != nil && w != c.head()
}

func (c *windows) Index(m Member) int {
	if w := c.of[m]; w != nil {
		return c.index(w)
	}
	return -1
}

// waiting returns the members of w at its end with nothing unresolved:
// those a full w holds back, if the log holds what they want.
func (c *windows) waiting(w *window) []Member {
	var out []Member
	for _, m := range w.members {
		if m.Cursor() >= w.end && m.Safe() >= w.end {
			out = append(out, m)
		}
	}
	return out
}

// probe takes a probe's records: it admits none, and notes the first one
// a member waiting at the head's end wants.
func (c *windows) probe(p ReadPlan, recs []sluicetype.Record) error {
	if p.w != c.head() || p.After < p.w.end {
		return errStalePlan
	}
	for i := range recs {
		if recs[i].Position <= p.After || i > 0 && recs[i].Position <= recs[i-1].Position {
			return fmt.Errorf("stream: a read after %d returned position %d out of order", p.After, recs[i].Position)
		}
	}
	if n := len(recs); n > 0 {
		c.probed = recs[n-1].Position
	}
	c.look(p.w, recs)
	return nil
}

// look notes the first of recs, past head window h, that a member
// waiting at h's end wants.
func (c *windows) look(h *window, recs []sluicetype.Record) {
	if c.wanted > h.end {
		return
	}
	waiting := c.waiting(h)
	for i := range recs {
		if recs[i].Position <= h.end {
			continue
		}
		for _, m := range waiting {
			if m.Matches(&recs[i]) {
				c.wanted = recs[i].Position
				return
			}
		}
	}
}
