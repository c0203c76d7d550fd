package stream

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/sluicetype"
)

// The model-based test drives the window manager with random sequences
// of what an agent and its subscriptions do (appends, joins, leaves,
// reads, hand-offs from the tail, walks, resolutions, purges,
// rebalances, retention trims) and checks it, after every step, against
// a reference that cannot be wrong: the log itself and, per member, the
// positions it has walked. At the end every member reads on to the log's
// end, and must have seen each record of the log after its start that
// it matches, once, in order.
//
// The harness here (the log, the members, the checks) is deterministic;
// the bounds and hysteresis tests drive it step by step too.

// modelLog is the partition's log: records in ascending positions, with
// holes (positions that never got a record). Positions through next-1
// are final; retention deleted those through trimmed, which the log
// keeps here to compare what a window holds with what was read.
type modelLog struct {
	recs    []sluicetype.Record
	next    int64
	trimmed int64
	// maxSize is the largest record's recordSize.
	maxSize int64
}

// add appends a record of stream key with a payload of size bytes, after
// skip holes.
func (l *modelLog) add(key string, size int, skip int64) {
	l.next += skip
	r := sluicetype.Record{Position: l.next, Namespace: "ns", Key: key, Payload: make([]byte, size)}
	l.recs = append(l.recs, r)
	l.maxSize = max(l.maxSize, recordSize(&r))
	l.next++
}

// index is the index of the first record at or after pos.
func (l *modelLog) index(pos int64) int {
	i, _ := slices.BinarySearchFunc(l.recs, pos, func(r sluicetype.Record, pos int64) int { return cmp.Compare(r.Position, pos) })
	return i
}

// at is the record at pos (nil: a hole, or not appended yet).
func (l *modelLog) at(pos int64) *sluicetype.Record {
	if i := l.index(pos); i < len(l.recs) && l.recs[i].Position == pos {
		return &l.recs[i]
	}
	return nil
}

// last is the last position taken, record or hole.
func (l *modelLog) last() int64 { return l.next - 1 }

// end is the last record's position (0: none).
func (l *modelLog) end() int64 {
	if len(l.recs) == 0 {
		return 0
	}
	return l.recs[len(l.recs)-1].Position
}

// read is store.Read: at most max records after after, or ErrTrimmed
// when retention deleted some of them.
func (l *modelLog) read(after int64, max int) ([]sluicetype.Record, error) {
	if after < l.trimmed {
		return nil, sluicetype.ErrTrimmed
	}
	i := l.index(after + 1)
	return slices.Clone(l.recs[i:min(len(l.recs), i+max)]), nil
}

// readPlan is store.Read for a plan: with a namespace and key, that
// stream's records only, through p.Through.
func (l *modelLog) readPlan(p ReadPlan) ([]sluicetype.Record, error) {
	if p.Namespace == "" {
		return l.read(p.After, p.Max)
	}
	if p.After < l.trimmed {
		return nil, sluicetype.ErrTrimmed
	}
	var out []sluicetype.Record
	for _, r := range l.recs[l.index(p.After+1):] {
		if len(out) == p.Max || p.Through > 0 && r.Position > p.Through {
			break
		}
		if r.Namespace == p.Namespace && r.Key == p.Key {
			out = append(out, r)
		}
	}
	return out, nil
}

// passedOver reports whether window w holds only another stream's
// records than r's at r's position, which a member reading w's stream
// only passes over.
func passedOver(w *window, r *sluicetype.Record) bool {
	return r.Position <= w.filtered && (r.Namespace != w.filter.namespace || r.Key != w.filter.key)
}

func sameRecord(a, b *sluicetype.Record) bool {
	return a.Position == b.Position && a.Namespace == b.Namespace && a.Key == b.Key && len(a.Payload) == len(b.Payload)
}

func positionsOf(recs []sluicetype.Record) []int64 {
	out := make([]int64, len(recs))
	for i := range recs {
		out[i] = recs[i].Position
	}
	return out
}

func entryPositions(w *window) []int64 {
	out := make([]int64, len(w.entries))
	for i, e := range w.entries {
		out[i] = e.rec.Position
	}
	return out
}

// modelMember is a subscription as the reference sees it: its cursor,
// what it queued and has not resolved, and every position it queued.
type modelMember struct {
	id         int
	key        string // "" for every record
	from       int64  // it must see every record it matches after from
	cursor     int64
	unresolved []int64 // ascending
	last       int64
	seen       []int64
	// fast: it resolves all it walked at each agent step (the others
	// only when a test says so).
	fast bool
}

func (m *modelMember) Cursor() int64 { return m.cursor }

func (m *modelMember) Safe() int64 {
	if len(m.unresolved) > 0 {
		return min(m.cursor, m.unresolved[0]-1)
	}
	return m.cursor
}

func (m *modelMember) LastMatch() int64 { return m.last }

func (m *modelMember) Matches(r *sluicetype.Record) bool {
	return r.Namespace == "ns" && (m.key == "" || r.Key == m.key)
}

// Stream makes a member of one stream (a key) read only that stream's
// records in a lagging window of its own stream's members.
func (m *modelMember) Stream() (string, string, bool) { return "ns", m.key, m.key != "" }

func (m *modelMember) String() string {
	return fmt.Sprintf("member %d (key %q, from %d, cursor %d, safe %d)", m.id, m.key, m.from, m.cursor, m.Safe())
}

// resolveAll resolves everything a member walked.
func resolveAll(x *modelMember) { x.unresolved = nil }

// resolveFast resolves what fast members walked.
func resolveFast(x *modelMember) {
	if x.fast {
		x.unresolved = nil
	}
}

// harness is the cache under test beside its reference, with the
// operations an agent does, each checked.
type harness struct {
	t      rapid.TB
	cfg    cacheConfig
	c      *windows
	log    *modelLog
	live   []*modelMember
	nextID int
	steps  int
	// hard is set once retention trimmed past the checkpoint: until
	// then, a gap strands no one.
	hard bool
	// admitted counts the records each window made by a split or a
	// merge admitted since (windows made otherwise are not counted).
	admitted map[*window]int64
	// late: lagging reads are admitted a step after they were planned
	// and read, as the agent's goroutine reads them while it goes on;
	// otherwise up to simLagReads a step are admitted at once. pending is
	// the lagging read in flight (nil: none).
	late    bool
	pending *lagRead
	// onRead, when set, sees each read's plan and what it brought.
	onRead func(p ReadPlan, recs []sluicetype.Record)
}

func newHarness(t rapid.TB, cfg cacheConfig, log *modelLog, after int64) *harness {
	return &harness{t: t, cfg: cfg, c: newCache(cfg, after), log: log, admitted: make(map[*window]int64)}
}

func (h *harness) now() time.Time { return time.Time{}.Add(time.Duration(h.steps)) }

// state is what a failed or refused operation must leave as it was.
func (h *harness) state() string {
	n, b := h.c.Size()
	return fmt.Sprintf("%+v %d/%d %v", h.c.Stats().Windows, n, b, h.positions())
}

// positions are the members' cursors and safe positions, which no cache
// operation changes.
func (h *harness) positions() []int64 {
	var out []int64
	for _, x := range h.live {
		out = append(out, x.cursor, x.Safe())
	}
	return out
}

// op runs a cache operation and checks that it moved no member.
func (h *harness) op(name string, f func()) {
	h.t.Helper()
	before := h.positions()
	f()
	if after := h.positions(); !slices.Equal(before, after) {
		h.t.Fatalf("step %d: %s moved the members from %v to %v", h.steps, name, before, after)
	}
}

// join makes a new member at cursor cur, as the agent does when a
// subscription starts, restarts or is repositioned; nil when the Fault
// policy refuses it (it never joined, and has nothing to see).
func (h *harness) join(key string, cur int64, fast bool) *modelMember {
	h.t.Helper()
	x := &modelMember{id: h.nextID, key: key, from: cur, cursor: cur, fast: fast}
	h.nextID++
	before := h.state()
	ends := make(map[*window]int64, len(h.c.ws))
	for _, w := range h.c.ws {
		ends[w] = w.end
	}
	var err error
	h.op("Join", func() { err = h.c.Join(x) })
	for w, end := range ends {
		if w.end != end {
			delete(h.admitted, w) // moved back (Share): a window anew
		}
	}
	if err != nil {
		if !errors.Is(err, sluicetype.ErrWindowLimit) || h.cfg.policy != WindowLimitFault || len(h.c.ws) < h.cfg.windows {
			h.t.Fatalf("step %d: Join(%v) with %d windows, policy %v: %v", h.steps, x, len(h.c.ws), h.cfg.policy, err)
		}
		if h.c.Window(x) != nil || h.state() != before {
			h.t.Fatalf("step %d: a refused Join changed the cache: %s, then %s", h.steps, before, h.state())
		}
		return nil
	}
	h.live = append(h.live, x)
	return x
}

// leave takes x out of the cache, and out of the reference.
func (h *harness) leave(x *modelMember) {
	h.t.Helper()
	h.op("Leave", func() { h.c.Leave(x) })
	h.remove(x)
}

// remove takes x out of the reference, once the cache has let it go:
// it must have seen, in order, exactly what the log holds for it
// through its cursor.
func (h *harness) remove(x *modelMember) {
	h.t.Helper()
	if h.c.Window(x) != nil {
		h.t.Fatalf("step %d: %v left, and is still in a window", h.steps, x)
	}
	h.checkSeen(x, x.cursor)
	h.live = slices.DeleteFunc(h.live, func(y *modelMember) bool { return y == x })
}

// walk moves x's cursor over its window as subState.walk does, and
// checks each position it passes against the log.
func (h *harness) walk(x *modelMember) {
	h.t.Helper()
	w := h.c.Window(x)
	if w == nil {
		h.t.Fatalf("step %d: %v is in no window", h.steps, x)
	}
	if x.cursor+1 < w.start {
		h.t.Fatalf("step %d: %v is before its window %d-%d", h.steps, x, w.start, w.end)
	}
	la := h.c.Lookahead()
	for x.cursor < w.end && (la == 0 || x.cursor-x.Safe() < la) {
		pos := x.cursor + 1
		e, want := w.get(pos), h.log.at(pos)
		switch {
		case e == nil && want != nil && passedOver(w, want) && !streamMatch(x, w.filter):
			h.t.Fatalf("step %d: %v passes position %d, which window %d-%d holds only stream %v through %d", h.steps, x, pos, w.start, w.end, w.filter, w.filtered)
		case e == nil && want != nil && !passedOver(w, want):
			h.t.Fatalf("step %d: %v passes position %d, which window %d-%d lacks", h.steps, x, pos, w.start, w.end)
		case e != nil && (want == nil || !sameRecord(&e.rec, want)):
			h.t.Fatalf("step %d: window %d-%d holds %+v at %d, the log %+v", h.steps, w.start, w.end, e.rec, pos, want)
		}
		if e != nil && x.Matches(&e.rec) {
			x.unresolved = append(x.unresolved, pos)
			x.seen = append(x.seen, pos)
			x.last = pos
		}
		x.cursor = pos
	}
}

func (h *harness) walkAll() {
	h.t.Helper()
	for _, x := range h.live {
		h.walk(x)
	}
}

// wantsMore reports whether a member of w has walked all of it (a
// lagging read is for them only).
func wantsMore(w *window) bool {
	return slices.ContainsFunc(w.members, func(x Member) bool { return x.Cursor() >= w.end })
}

// mayWalk is how far past w's end its members may walk, within the
// lookahead of their safe positions.
func mayWalk(w *window, lookahead int64) int64 {
	n := int64(0)
	for _, x := range w.members {
		n = max(n, x.Safe()+lookahead-w.end)
	}
	return n
}

// unreserved is what the windows other than w keep of their reserves
// and do not use: what w may not read into.
func (h *harness) unreserved(w *window) (int, int64) {
	records, bytes := 0, int64(0)
	for _, v := range h.c.ws {
		if v != w {
			n, b := v.size()
			records += max(0, h.c.shape.reserve-n)
			bytes += max(0, h.c.shape.reserveBytes-b)
		}
	}
	return records, bytes
}

// plan asks for a read and checks what it says: the head window's when
// asked, and a lagging window's only for members that want more, no
// more than a batch, up to the next window and never into it.
func (h *harness) plan(head, lagging bool) (ReadPlan, bool) {
	h.t.Helper()
	var p ReadPlan
	var ok bool
	h.op("Plan", func() { p, ok = h.c.Plan(h.now(), head, lagging) })
	switch {
	case head && (!ok || !p.Head || p.w != h.c.head()):
		h.t.Fatalf("step %d: Plan(head) = %+v, %v; want the head window's", h.steps, p, ok)
	case !head && !lagging && ok:
		h.t.Fatalf("step %d: Plan(neither) = %+v", h.steps, p)
	case !ok:
		return p, false
	case p.Max > h.cfg.batch || p.Max < 0:
		h.t.Fatalf("step %d: a plan for %d records, batch %d", h.steps, p.Max, h.cfg.batch)
	case p.Probe && (!p.Head || p.After < p.w.end):
		h.t.Fatalf("step %d: a probe %+v of window %d-%d", h.steps, p, p.w.start, p.w.end)
	case !p.Probe && p.After != p.w.end:
		h.t.Fatalf("step %d: a plan after %d for window %d-%d", h.steps, p.After, p.w.start, p.w.end)
	}
	if !p.Head {
		i := h.c.index(p.w)
		switch {
		case i < 0 || i == len(h.c.ws)-1:
			h.t.Fatalf("step %d: a lagging plan for window %d of %d", h.steps, i, len(h.c.ws))
		case p.Max == 0 || !wantsMore(p.w):
			h.t.Fatalf("step %d: a lagging plan %+v for window %d-%d, whose members want nothing", h.steps, p, p.w.start, p.w.end)
		case h.c.Lookahead() > 0 && int64(p.Max) > mayWalk(p.w, h.c.Lookahead()):
			h.t.Fatalf("step %d: a lagging plan %+v for window %d-%d, whose members may walk %d records past it",
				h.steps, p, p.w.start, p.w.end, mayWalk(p.w, h.c.Lookahead()))
		case p.After+int64(p.Max) >= h.c.ws[i+1].start:
			h.t.Fatalf("step %d: a lagging plan %+v reads into the next window, from %d", h.steps, p, h.c.ws[i+1].start)
		case h.now().Before(p.w.retryAt):
			h.t.Fatalf("step %d: a lagging plan for a window backed off until %v", h.steps, p.w.retryAt)
		}
	}
	return p, true
}

// execute reads a plan from the log and admits it, as the agent's read
// does, and returns how many records the read brought. A probe admits
// nothing; a read admits only while the byte bound is not reached.
func (h *harness) execute(p ReadPlan) int {
	h.t.Helper()
	if p.Max == 0 && !p.Probe {
		return 0 // the agent reads nothing for it
	}
	recs, err := h.log.readPlan(p)
	return h.admitRead(p, recs, err, false)
}

// lagRead is a lagging window's read in flight: read when planned,
// admitted a step later (the agent reads for a lagging window in a
// goroutine, and goes on meanwhile).
type lagRead struct {
	p    ReadPlan
	recs []sluicetype.Record
	err  error
}

// admitRead admits what a plan's read brought, and checks what changed.
// late: the plan was made before the steps since, so it may be stale
// (nothing changes) and the window may have less room (what fits goes
// in).
func (h *harness) admitRead(p ReadPlan, recs []sluicetype.Record, err error, late bool) int {
	h.t.Helper()
	if errors.Is(err, sluicetype.ErrTrimmed) {
		h.gap(p)
		return 0
	}
	before := h.state()
	records, bytes := h.c.Size()
	keep, keepBytes := h.unreserved(p.w)
	endBefore := p.w.end
	h.op("Admit", func() { err = h.c.Admit(p, recs) })
	if late && errors.Is(err, errStalePlan) {
		if h.state() != before {
			h.t.Fatalf("step %d: a stale plan changed the cache: %s, then %s", h.steps, before, h.state())
		}
		return 0
	}
	if err != nil {
		h.t.Fatalf("step %d: Admit(%+v, %d records): %v", h.steps, p, len(recs), err)
	}
	read := len(recs)
	if n, _ := h.c.Size(); late && n-records < len(recs) {
		// Only what fitted went in (or what was short of the next
		// window): the window ends at its last record, or where it was.
		recs = recs[:n-records]
		if i := h.c.index(p.w); len(recs) > 0 && p.w.end != recs[len(recs)-1].Position &&
			!(i+1 < len(h.c.ws) && p.w.end == h.c.ws[i+1].start-1) || len(recs) == 0 && p.w.end != endBefore && !(i+1 < len(h.c.ws) && p.w.end == h.c.ws[i+1].start-1) {
			h.t.Fatalf("step %d: window %d-%d after a late read of %v admitted %v", h.steps, p.w.start, p.w.end, read, positionsOf(recs))
		}
		return read
	}
	if n, _ := h.c.Size(); n > records {
		if n+keep > h.cfg.records || bytes+keepBytes >= h.cfg.bytes {
			h.t.Fatalf("step %d: a read took %d records (%d bytes held before), into what other windows reserve (%d, %d bytes)",
				h.steps, n-records, bytes, keep, keepBytes)
		}
		if _, ok := h.admitted[p.w]; ok {
			h.admitted[p.w] += int64(n - records)
		}
	}
	if h.onRead != nil {
		h.onRead(p, recs)
	}
	switch {
	case len(recs) == 0:
	case p.Probe:
		if h.state() != before {
			h.t.Fatalf("step %d: a probe admitted records: %s, then %s", h.steps, before, h.state())
		}
	case bytes >= h.cfg.bytes:
		h.t.Fatalf("step %d: a read admitted with %d bytes held, bound %d", h.steps, bytes, h.cfg.bytes)
	default:
		// The window ends where the read did, or where the next window
		// starts, when the read reached it (a read of one stream that
		// brought less than asked for reached it).
		i, last := h.c.index(p.w), recs[len(recs)-1].Position
		meets := i+1 < len(h.c.ws) && h.c.ws[i+1].start <= last
		short := i+1 < len(h.c.ws) && p.Namespace != "" && len(recs) < p.Max
		switch {
		case meets && p.w.end != h.c.ws[i+1].start-1,
			short && !meets && p.w.end != min(p.Through, h.c.ws[i+1].start-1),
			!meets && !short && p.w.end != last:
			h.t.Fatalf("step %d: window %d-%d after a read of %v", h.steps, p.w.start, p.w.end, positionsOf(recs))
		}
	}
	return read
}

// fail is a read that failed: a lagging window backs off until then,
// and nothing else changes.
func (h *harness) fail(p ReadPlan, until time.Time) {
	h.t.Helper()
	before := h.state()
	if !p.Head {
		h.op("Backoff", func() { h.c.Backoff(p, until) })
	}
	if h.state() != before {
		h.t.Fatalf("step %d: a failed read changed the cache: %s, then %s", h.steps, before, h.state())
	}
}

// gap declares what retention deleted under a plan: exactly the members
// of its window that had not read through the trim are stranded, and
// no other window changes. Retention that trims only what every member
// is done with strands no one.
func (h *harness) gap(p ReadPlan) {
	h.t.Helper()
	var want []Member
	if i := h.c.index(p.w); i >= 0 && p.w.end == p.After && h.log.trimmed > p.w.end {
		for _, x := range p.w.members {
			if x.Cursor() < h.log.trimmed {
				want = append(want, x)
			}
		}
	}
	others := func() string {
		var out []WindowStats
		for _, w := range h.c.ws {
			if w != p.w {
				n, b := w.size()
				out = append(out, WindowStats{Start: w.start, End: w.end, Records: n, Bytes: b, Members: len(w.members)})
			}
		}
		return fmt.Sprint(out)
	}
	before := others()
	var stranded []Member
	h.op("Gap", func() { stranded = h.c.Gap(p, h.log.trimmed) })
	if !slices.Equal(stranded, want) || others() != before {
		h.t.Fatalf("step %d: a gap through %d for window %d-%d stranded %v, want %v; other windows %s, then %s",
			h.steps, h.log.trimmed, p.w.start, p.w.end, stranded, want, before, others())
	}
	if len(stranded) > 0 && !h.hard {
		h.t.Fatalf("step %d: a gap through %d, below every safe position, stranded %v", h.steps, h.log.trimmed, stranded)
	}
	for _, x := range stranded {
		h.remove(x.(*modelMember)) // faulted: what it missed is gone
	}
}

func (h *harness) purge() {
	h.t.Helper()
	h.op("Purge", func() { h.c.Purge() })
}

// rebalance rebalances, and checks that a split happened only in a
// window under pressure (no room before the rebalance: merges and
// reclaims only make more) that had admitted splitLag records since it
// was last split or merged, and that the merge left no windows that
// meet.
func (h *harness) rebalance() {
	h.t.Helper()
	type was struct {
		admitted int64
		room     int
		next     *window
	}
	before := make(map[*window]was, len(h.c.ws))
	for i, w := range h.c.ws {
		n, _ := h.c.room(w)
		v := was{admitted: w.admitted, room: n}
		if i+1 < len(h.c.ws) {
			v.next = h.c.ws[i+1]
		}
		before[w] = v
	}
	splitLag, st := h.c.shape.splitLag, h.c.Stats()
	var refused []Member
	h.op("Rebalance", func() { _, refused = h.c.Rebalance() })
	merged := make(map[*window]bool) // the windows that took in the next one
	for w, v := range before {
		if v.next != nil && h.c.index(v.next) < 0 {
			merged[w] = true
		}
	}
	after := h.c.Stats()
	for w := range before {
		if merged[w] {
			h.admitted[w] = 0
		} else if h.c.index(w) < 0 {
			delete(h.admitted, w)
		}
	}
	var split *window // the lagging window a split made
	if d := after.Splits - st.Splits; d > 1 {
		h.t.Fatalf("step %d: %d splits in one rebalance", h.steps, d)
	} else if d == 1 {
		i := slices.IndexFunc(h.c.ws, func(w *window) bool { _, old := before[w]; return !old })
		split = h.c.ws[i]
		w := h.c.ws[i+1] // what it split from
		n, counted := h.admitted[w]
		switch v := before[w]; {
		case merged[w] || v.admitted < splitLag || counted && n < splitLag:
			h.t.Fatalf("step %d: window %d-%d split having admitted %d records (counted here: %d; merged now: %v), splitLag %d",
				h.steps, w.start, w.end, v.admitted, n, merged[w], splitLag)
		case v.room > 0:
			h.t.Fatalf("step %d: window %d-%d split with room for %d records", h.steps, w.start, w.end, v.room)
		}
		h.admitted[w], h.admitted[split] = 0, 0
	}
	// The merge comes first, and a split leaves a gap of at least
	// splitLag: no windows meet.
	for i := 1; i < len(h.c.ws); i++ {
		if lo, hi := h.c.ws[i-1], h.c.ws[i]; lo.end+1 >= hi.start {
			h.t.Fatalf("step %d: windows %d-%d and %d-%d meet after a rebalance", h.steps, lo.start, lo.end, hi.start, hi.end)
		}
	}
	if len(refused) > 0 && h.cfg.policy != WindowLimitFault {
		h.t.Fatalf("step %d: the Share policy refused %d members", h.steps, len(refused))
	}
	for _, r := range refused {
		h.remove(r.(*modelMember))
	}
}

// step is one agent step (see agent.step): reads, the head window's
// while they come back full and up to simLagReads lagging ones, at
// most maxReadsPerStep in all, each that brought records followed by
// walks, a purge and a rebalance; then walks, resolutions, a purge and a
// rebalance. It returns how many reads it made.
func (h *harness) step(resolve func(*modelMember)) int {
	h.t.Helper()
	h.steps++
	head, lagging, reads := true, 0, 0
	if r := h.pending; r != nil {
		h.pending = nil
		if got := h.admitRead(r.p, r.recs, r.err, true); got > 0 {
			h.walkAll()
			h.purge()
			h.rebalance()
		} else if r.err == nil && r.p.Namespace == "" {
			h.fail(r.p, h.now().Add(1)) // nothing there: look again next step
		}
	}
	for {
		p, ok := h.plan(head, h.late && h.pending == nil || !h.late && lagging < simLagReads)
		if !ok || reads == maxReadsPerStep {
			break
		}
		reads++
		if !p.Head && h.late {
			// Read now, admitted next step, as the agent's goroutine
			// reads while the agent goes on.
			lagging++
			recs, err := h.log.readPlan(p)
			h.pending = &lagRead{p, recs, err}
			continue
		}
		if !p.Head {
			lagging++
		}
		got := h.execute(p)
		if got > 0 {
			h.walkAll()
			h.purge()
			h.rebalance()
		}
		switch {
		case !p.Head && got == 0:
			h.fail(p, h.now().Add(1)) // nothing there: look again next step
		case p.Head && (got == 0 || got < p.Max):
			head = false
		}
	}
	h.walkAll()
	for _, x := range h.live {
		resolve(x)
	}
	h.purge()
	h.rebalance()
	h.check()
	return reads
}

// drain steps, resolving everything, until every member has reached the
// log's end, then checks what each saw.
func (h *harness) drain() {
	h.t.Helper()
	limit := 50 + 4*len(h.log.recs)
	for range limit {
		if !slices.ContainsFunc(h.live, func(x *modelMember) bool { return x.cursor < h.log.end() }) {
			break
		}
		h.step(resolveAll)
	}
	for _, x := range h.live {
		if x.cursor < h.log.end() {
			h.t.Fatalf("after %d steps draining, %v has not reached the log's end, %d; windows %+v",
				limit, x, h.log.end(), h.c.Stats().Windows)
		}
		h.checkSeen(x, x.cursor)
	}
}

// check verifies the cache's invariants against the reference.
func (h *harness) check() {
	h.t.Helper()
	c := h.c
	if n := len(c.ws); n == 0 || n > h.cfg.windows {
		h.t.Fatalf("step %d: %d windows, at most %d", h.steps, n, h.cfg.windows)
	}
	records, bytes, members := 0, int64(0), 0
	for i, w := range c.ws {
		if w.end < w.start-1 || i > 0 && c.ws[i-1].end >= w.start {
			h.t.Fatalf("step %d: windows %+v are not disjoint and ascending", h.steps, c.Stats().Windows)
		}
		// Exactly the log's records of its range (trimmed ones too, read
		// before retention deleted them), ascending; where it read one
		// stream only, the others' records may be missing (those it
		// read before are not).
		want := slices.DeleteFunc(slices.Clone(h.log.recs[h.log.index(w.start):h.log.index(w.end+1)]),
			func(r sluicetype.Record) bool { return passedOver(w, &r) && w.get(r.Position) == nil })
		if len(w.entries) != len(want) {
			h.t.Fatalf("step %d: window %d-%d holds %d records at %v, the log %d at %v", h.steps, w.start, w.end,
				len(w.entries), entryPositions(w), len(want), positionsOf(want))
		}
		var wb int64
		for k, e := range w.entries {
			if !sameRecord(&e.rec, &want[k]) || e.size != recordSize(&e.rec) {
				h.t.Fatalf("step %d: window %d-%d holds %+v where the log has %+v", h.steps, w.start, w.end, e.rec, want[k])
			}
			wb += e.size
		}
		if wb != w.bytes {
			h.t.Fatalf("step %d: window %d-%d counts %d bytes, holds %d", h.steps, w.start, w.end, w.bytes, wb)
		}
		records, bytes = records+len(w.entries), bytes+wb
		for _, x := range w.members {
			if c.of[x] != w || !slices.Contains(h.live, x.(*modelMember)) {
				h.t.Fatalf("step %d: window %d-%d lists %v, which the cache places in %p", h.steps, w.start, w.end, x, c.of[x])
			}
			if x.Cursor() < w.start-1 {
				h.t.Fatalf("step %d: %v is before its window %d-%d", h.steps, x, w.start, w.end)
			}
		}
		members += len(w.members)
	}
	if n, b := c.Size(); n != records || b != bytes {
		h.t.Fatalf("step %d: the cache counts %d records, %d bytes; its windows hold %d, %d", h.steps, n, b, records, bytes)
	}
	if records > h.cfg.records {
		h.t.Fatalf("step %d: %d records held, bound %d", h.steps, records, h.cfg.records)
	}
	// Reads stop once the byte bound is reached: at most a read over.
	if over := bytes - h.cfg.bytes; over > int64(h.cfg.batch)*h.log.maxSize {
		h.t.Fatalf("step %d: %d bytes held, bound %d and a read of %d records", h.steps, bytes, h.cfg.bytes, h.cfg.batch)
	}
	if members != len(h.live) || len(c.of) != len(h.live) {
		h.t.Fatalf("step %d: windows list %d members, the cache places %d, %d live", h.steps, members, len(c.of), len(h.live))
	}
	for _, x := range h.live {
		if w := c.of[x]; w == nil || c.index(w) < 0 || c.Index(x) != c.index(w) {
			h.t.Fatalf("step %d: %v has no window", h.steps, x)
		}
	}
}

// checkSeen verifies that x saw, in order, every record of the log it
// matches after its start and through pos, and nothing else.
func (h *harness) checkSeen(x *modelMember, pos int64) {
	h.t.Helper()
	var want []int64
	for i := h.log.index(x.from + 1); i < len(h.log.recs) && h.log.recs[i].Position <= pos; i++ {
		if x.Matches(&h.log.recs[i]) {
			want = append(want, h.log.recs[i].Position)
		}
	}
	if !slices.Equal(x.seen, want) {
		h.t.Fatalf("step %d: %v saw %v; the log holds %v for it", h.steps, x, x.seen, want)
	}
}

// trace logs the windows and members (rapid shows it for the failing
// case).
func (h *harness) trace() {
	var ms []string
	for _, x := range h.live {
		ms = append(ms, fmt.Sprintf("%d:%d/%d@%d", x.id, x.cursor, x.Safe(), h.c.Index(x)))
	}
	h.t.Logf("step %d: log through %d (trimmed %d), windows %+v, members %v", h.steps, h.log.last(), h.log.trimmed, h.c.Stats().Windows, ms)
}

// model drives a harness with random actions.
type model struct {
	*harness
	rt *rapid.T
	// pressure: a few members near each other, a log many times the
	// budget (see drawConfig).
	pressure bool
	// most bounds the members at once: a few, so that they group and
	// split rather than spread over every window.
	most int
	// held is a plan kept back to admit after its window changed.
	held *ReadPlan
}

// drawConfig draws a cache's bounds. Under pressure, a few members
// share a budget that a log many times as long fills, with reads of a
// fair size: what makes windows split and merge (in a fully random
// configuration that is rare).
func drawConfig(t *rapid.T, pressure bool) cacheConfig {
	policy := rapid.SampledFrom([]WindowLimitPolicy{WindowLimitShare, WindowLimitFault})
	if pressure {
		return cacheConfig{
			records: rapid.IntRange(16, 64).Draw(t, "records"),
			bytes:   1 << 30,
			batch:   rapid.IntRange(4, 16).Draw(t, "batch"),
			windows: rapid.IntRange(2, 4).Draw(t, "windows"),
			policy:  policy.Draw(t, "policy"),
		}
	}
	cfg := cacheConfig{
		records: rapid.IntRange(8, 64).Draw(t, "records"),
		bytes:   1 << 30,
		batch:   rapid.IntRange(1, 16).Draw(t, "batch"),
		windows: rapid.IntRange(1, 4).Draw(t, "windows"),
		policy:  policy.Draw(t, "policy"),
	}
	if rapid.IntRange(0, 2).Draw(t, "byte bound") == 0 {
		// Records are 131 to 331 bytes: this holds 4 to 150 of them.
		cfg.bytes = int64(rapid.IntRange(4, 150).Draw(t, "bytes in records")) * 230
	}
	return cfg
}

func newModel(t *rapid.T, pressure bool) *model {
	cfg := drawConfig(t, pressure)
	m := &model{harness: newHarness(t, cfg, &modelLog{next: 1}, 0), rt: t, pressure: pressure}
	m.late = rapid.Bool().Draw(t, "late lagging reads")
	var initial int
	if pressure {
		m.most = rapid.IntRange(2, 4).Draw(t, "members")
		initial = rapid.IntRange(4*cfg.records, 8*cfg.records).Draw(t, "initial records")
	} else {
		m.most = rapid.IntRange(1, 8).Draw(t, "members")
		initial = rapid.IntRange(0, 100).Draw(t, "initial records")
	}
	m.append(initial)
	m.c = newCache(cfg, rapid.Int64Range(0, m.log.last()).Draw(t, "cache after"))
	return m
}

// append adds n records to the log, some positions of it left as holes.
func (m *model) append(n int) {
	for range n {
		skip := int64(0)
		if rapid.IntRange(0, 7).Draw(m.rt, "hole") == 0 {
			skip = 1
		}
		m.log.add(rapid.SampledFrom([]string{"a", "b", "c"}).Draw(m.rt, "key"), rapid.IntRange(0, 200).Draw(m.rt, "payload"), skip)
	}
}

func (m *model) pick(label string) *modelMember {
	if len(m.live) == 0 {
		return nil
	}
	return m.live[rapid.IntRange(0, len(m.live)-1).Draw(m.rt, label)]
}

func (m *model) actJoin() {
	if len(m.live) >= m.most {
		return
	}
	key := rapid.SampledFrom([]string{"", "a", "b", "c"}).Draw(m.rt, "member key")
	last, h := m.log.last(), m.c.head()
	var cur int64
	// Mostly near the head or another member (where windows are shared
	// and split), now and then anywhere (a window of its own).
	where := []int{1, 1, 2, 3, 4, 4, 0}
	if m.pressure {
		where = []int{1, 4}
	}
	switch rapid.SampledFrom(where).Draw(m.rt, "join where") {
	case 0: // anywhere retention left
		cur = rapid.Int64Range(m.log.trimmed, last).Draw(m.rt, "cursor")
	case 1: // about the head window's end
		cur = h.end + rapid.Int64Range(-3, 3).Draw(m.rt, "from the head")
	case 2: // at the log's head
		cur = last
	case 3: // ahead of the head window
		cur = h.end + rapid.Int64Range(1, 4*max(1, m.c.shape.splitLag)).Draw(m.rt, "ahead")
	case 4: // near another member
		if x := m.pick("near"); x != nil {
			cur = x.cursor + rapid.Int64Range(-3, 3).Draw(m.rt, "from the member")
		}
	}
	m.join(key, min(max(cur, m.log.trimmed), last), rapid.Bool().Draw(m.rt, "fast"))
}

// actJoinAgain joins a member that is in a window already: nothing
// changes.
func (m *model) actJoinAgain() {
	if x := m.pick("joining again"); x != nil {
		before := m.state()
		w := m.c.Window(x)
		if err := m.c.Join(x); err != nil || m.c.Window(x) != w || m.state() != before {
			m.t.Fatalf("step %d: Join(%v) again: %v; %s, then %s", m.steps, x, err, before, m.state())
		}
	}
}

func (m *model) actLeave() {
	if x := m.pick("leaving"); x != nil {
		m.leave(x)
	}
}

// actRestart halts a member and starts it again at its safe position,
// as a fault that is cleared, a reposition or a restart does: the new
// one sees again what the old one had not resolved.
func (m *model) actRestart() {
	if x := m.pick("restarting"); x != nil {
		m.leave(x)
		m.join(x.key, max(x.Safe(), m.log.trimmed), x.fast)
	}
}

func (m *model) actWalk() {
	if rapid.Bool().Draw(m.rt, "walk all") {
		m.walkAll()
	} else if x := m.pick("walker"); x != nil {
		m.walk(x)
	}
}

// actResolve finishes some of a member's events, in any order (its
// streams deliver independently): its safe position moves up to the
// first one left.
func (m *model) actResolve() {
	x := m.pick("resolver")
	if x == nil || len(x.unresolved) == 0 {
		return
	}
	for range rapid.IntRange(1, len(x.unresolved)).Draw(m.rt, "resolved") {
		i := rapid.IntRange(0, len(x.unresolved)-1).Draw(m.rt, "which")
		x.unresolved = slices.Delete(x.unresolved, i, i+1)
	}
}

// actRead plans a read (the head's, a lagging one's, or either) and
// reads it, or fails it, or holds it back to admit later.
func (m *model) actRead() {
	p, ok := m.plan(rapid.Bool().Draw(m.rt, "head read"), rapid.Bool().Draw(m.rt, "lagging read"))
	switch {
	case !ok:
	case rapid.IntRange(0, 9).Draw(m.rt, "hold the plan") == 0 && !p.Probe:
		m.held = &p
	case rapid.IntRange(0, 9).Draw(m.rt, "read fails") == 0:
		m.fail(p, m.now().Add(time.Duration(rapid.IntRange(1, 5).Draw(m.rt, "backoff"))))
	default:
		m.execute(p)
	}
}

// actStale admits a plan held back while its window changed: it must
// fail and change nothing.
func (m *model) actStale() {
	p := m.held
	m.held = nil
	if p == nil || m.c.index(p.w) >= 0 && p.w.end == p.After {
		return // still current: the agent never holds one
	}
	recs, err := m.log.read(p.After, p.Max)
	if err != nil {
		return
	}
	before := m.state()
	m.op("Admit", func() { err = m.c.Admit(*p, recs) })
	if !errors.Is(err, errStalePlan) || m.state() != before {
		m.t.Fatalf("step %d: a stale plan %+v: %v; %s, then %s", m.steps, *p, err, before, m.state())
	}
}

// actBadRead admits what no read returns: more than asked for, out of
// order, or not after the plan's position. Each fails and changes
// nothing.
func (m *model) actBadRead() {
	p, ok := m.plan(rapid.Bool().Draw(m.rt, "bad head read"), true)
	if !ok || p.Probe || p.Max == 0 {
		return
	}
	recs, err := m.log.read(p.After, p.Max+1)
	if err != nil {
		return
	}
	var bad []sluicetype.Record
	switch rapid.IntRange(0, 2).Draw(m.rt, "bad read") {
	case 0:
		if len(recs) <= p.Max {
			return
		}
		bad = recs
	case 1:
		if len(recs) < 2 || p.Max < 2 {
			return
		}
		bad = append([]sluicetype.Record{recs[1], recs[0]}, recs[2:min(len(recs), p.Max)]...)
	case 2:
		i := m.log.index(p.After + 1)
		if i == 0 {
			return
		}
		bad = append([]sluicetype.Record{m.log.recs[i-1]}, recs[:min(len(recs), p.Max-1)]...)
	}
	before := m.state()
	m.op("Admit", func() { err = m.c.Admit(p, bad) })
	if err == nil || m.state() != before {
		m.t.Fatalf("step %d: a bad read %v for %+v: %v; %s, then %s", m.steps, positionsOf(bad), p, err, before, m.state())
	}
}

// actFollow hands the head window a run of the log, as the tail does
// after an append: from before its end, from just after, or with a gap
// (records after its end that the run lacks), which it must refuse.
func (m *model) actFollow() {
	h := m.c.head()
	end := h.end
	next := m.log.index(end + 1)
	from := next - rapid.IntRange(0, 3).Draw(m.rt, "overlap")
	if rapid.IntRange(0, 3).Draw(m.rt, "follow gap") == 0 {
		from = next + rapid.IntRange(1, 3).Draw(m.rt, "gap")
	}
	from = min(max(from, 0), len(m.log.recs))
	recs := slices.Clone(m.log.recs[from:min(len(m.log.recs), from+rapid.IntRange(1, 8).Draw(m.rt, "follow"))])
	if len(recs) == 0 {
		return
	}
	before := m.state()
	records, bytes := m.c.Size()
	keep, keepBytes := m.unreserved(h)
	var ok bool
	m.op("Follow", func() { ok = m.c.Follow(recs) })
	if n, b := m.c.Size(); n > records {
		if n+keep > m.cfg.records || b+keepBytes > m.cfg.bytes {
			m.t.Fatalf("step %d: Follow took %d records, %d bytes, into what other windows reserve (%d, %d bytes)",
				m.steps, n-records, b-bytes, keep, keepBytes)
		}
		if _, counted := m.admitted[h]; counted {
			m.admitted[h] += int64(n - records)
		}
	}
	switch {
	case next < from && (ok || m.state() != before):
		m.t.Fatalf("step %d: Follow(%v) past a gap after %d: %v; %s, then %s", m.steps, positionsOf(recs), end, ok, before, m.state())
	case ok && h.end < recs[len(recs)-1].Position:
		m.t.Fatalf("step %d: Follow(%v) = true, the head window ends at %d", m.steps, positionsOf(recs), h.end)
	case !ok && m.state() != before:
		m.t.Fatalf("step %d: Follow(%v) = false changed the cache: %s, then %s", m.steps, positionsOf(recs), before, m.state())
	}
}

// actTrim deletes what retention may: records at or below the
// checkpoint the agent would store (every member is done with them), or
// now and then further, as hard retention does.
func (m *model) actTrim() {
	cp := m.c.ReadThrough()
	for _, x := range m.live {
		cp = min(cp, x.Safe())
	}
	if rapid.IntRange(0, 3).Draw(m.rt, "hard retention") == 0 {
		cp, m.hard = m.log.last(), true
	}
	if cp > m.log.trimmed {
		m.log.trimmed = rapid.Int64Range(m.log.trimmed, cp).Draw(m.rt, "trim through")
	}
}

// run draws actions, weighted as a random run or one under pressure
// (members stay, near each other, and the cache reads more than they
// take), checks the invariants after each, and drains. The first
// action, harmless, is what rapid shrinks to.
func (m *model) run() {
	actions := []struct {
		name             string
		random, pressure int
		do               func()
	}{
		{"append", 4, 2, func() { m.append(rapid.IntRange(1, 16).Draw(m.rt, "appended")) }},
		{"join", 3, 1, m.actJoin},
		{"join again", 1, 0, m.actJoinAgain},
		{"leave", 2, 0, m.actLeave},
		{"restart", 1, 1, m.actRestart},
		{"read", 8, 8, m.actRead},
		{"stale", 1, 1, m.actStale},
		{"bad read", 1, 1, m.actBadRead},
		{"follow", 2, 1, m.actFollow},
		{"walk", 5, 4, m.actWalk},
		{"resolve", 2, 2, m.actResolve},
		{"purge", 2, 1, m.purge},
		{"rebalance", 2, 1, m.rebalance},
		{"trim", 1, 1, m.actTrim},
		{"step", 6, 8, func() { m.step(resolveFast) }},
	}
	var names []string
	do := make(map[string]func())
	for _, a := range actions {
		do[a.name] = a.do
		weight := a.random
		if m.pressure {
			weight = a.pressure
		}
		for range weight {
			names = append(names, a.name)
		}
	}
	for range rapid.IntRange(1, 600).Draw(m.rt, "actions") {
		m.steps++
		do[rapid.SampledFrom(names).Draw(m.rt, "action")]()
		m.trace()
		m.check()
	}
	m.drain()
}

func TestWindowModel(t *testing.T) {
	for _, pressure := range []bool{false, true} {
		t.Run(map[bool]string{false: "random", true: "pressure"}[pressure], func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) { newModel(t, pressure).run() })
		})
	}
}
