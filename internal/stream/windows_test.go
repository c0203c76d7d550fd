package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// The tests here drive the cache as an agent does, step by step, with
// real subscription views as members and a fake log: no goroutines, no
// clock, no sleeps. After every step they check the cache's invariants.

// simLagReads is how many lagging reads a simulated step makes at most
// (the agent makes one at a time, off its goroutine: see readLagging).
const simLagReads = 2

// simLog is a partition log in memory: position p at index p-1.
type simLog struct {
	recs    []sluicetype.Record
	trimmed int64
	fail    int // reads that fail from now
	reads   int
	// readOf counts the reads of each position.
	readOf map[int64]int
}

func newSimLog(n int64, key func(int64) string) *simLog {
	return &simLog{recs: keyed("ns", 1, n, key), readOf: make(map[int64]int)}
}

func (l *simLog) append(n int64, key func(int64) string) {
	from := int64(len(l.recs)) + 1
	l.recs = append(l.recs, keyed("ns", from, from+n-1, key)...)
}

var errInjected = errors.New("injected read failure")

func (l *simLog) read(after int64, max int) ([]sluicetype.Record, error) {
	if l.fail > 0 {
		l.fail--
		return nil, errInjected
	}
	if after < l.trimmed {
		return nil, sluicetype.ErrTrimmed
	}
	l.reads++
	from := int(after)
	to := min(len(l.recs), from+max)
	if from >= to {
		return nil, nil
	}
	out := slices.Clone(l.recs[from:to])
	for _, r := range out {
		l.readOf[r.Position]++
	}
	return out, nil
}

// streamMatch reports whether m reads stream s only.
func streamMatch(m Member, s streamID) bool {
	t, ok := streamOf(m)
	return ok && t == s
}

// readPlan reads as the store does for a plan: the partition's records,
// or with a namespace and key that stream's only, through p.Through.
func (l *simLog) readPlan(p ReadPlan) ([]sluicetype.Record, error) {
	if p.Namespace == "" {
		return l.read(p.After, p.Max)
	}
	if l.fail > 0 {
		l.fail--
		return nil, errInjected
	}
	if p.After < l.trimmed {
		return nil, sluicetype.ErrTrimmed
	}
	l.reads++
	var out []sluicetype.Record
	for _, r := range l.recs[min(int(p.After), len(l.recs)):] {
		if len(out) == p.Max || p.Through > 0 && r.Position > p.Through {
			break
		}
		if r.Namespace == p.Namespace && r.Key == p.Key {
			out = append(out, r)
			l.readOf[r.Position]++
		}
	}
	return out, nil
}

// simSub is a subscription: a view, and what was delivered to it.
type simSub struct {
	*subState
	name     string
	from     int64 // it gets every event of its streams after from
	blocked  bool  // its deliveries do not finish
	perStep  int   // deliveries finished per step (0: all)
	inflight []sluicetype.Record
	got      map[string][]int64 // per stream, in order
	halted   bool
	refused  bool // by the Fault policy
}

type sim struct {
	t    *testing.T
	c    *windows
	log  *simLog
	subs []*simSub
	// maxHeld is the most records the cache held after a step.
	maxHeld int
	steps   int
}

func newSim(t *testing.T, cfg cacheConfig, log *simLog, after int64) *sim {
	return &sim{t: t, c: newCache(cfg, after), log: log}
}

// sub adds a subscription to stream key ("" for the namespace) at
// cursor.
func (s *sim) sub(name, key string, cursor int64) *simSub {
	x := &simSub{subState: newView("ns", key, cursor), name: name, from: cursor, got: make(map[string][]int64)}
	x.c = &Consumer{MaxConcurrency: 4}
	s.subs = append(s.subs, x)
	return x
}

func (s *sim) read(p ReadPlan) {
	s.t.Helper()
	recs, err := s.log.readPlan(p)
	if errors.Is(err, sluicetype.ErrTrimmed) {
		for _, m := range s.c.Gap(p, s.log.trimmed) {
			for _, x := range s.subs {
				if x.subState == m {
					x.halted = true
					x.halt(context.Background())
				}
			}
		}
		return
	}
	if err != nil {
		s.c.Backoff(p, time.Time{}.Add(time.Duration(s.steps+2)))
		return
	}
	// Nothing read is held by another window already.
	for _, r := range recs {
		for _, w := range s.c.ws {
			if w != p.w && w.get(r.Position) != nil {
				s.t.Fatalf("step %d: read position %d again, which window %d-%d holds", s.steps, r.Position, w.start, w.end)
			}
		}
	}
	if err := s.c.Admit(p, recs); err != nil {
		s.t.Fatalf("step %d: Admit: %v", s.steps, err)
	}
}

// step is one agent step: joins, a head read, lagging reads, walks,
// deliveries, purge and rebalance; then the invariants.
func (s *sim) step() {
	s.t.Helper()
	s.steps++
	now := time.Time{}.Add(time.Duration(s.steps))
	for _, x := range s.subs {
		if !x.halted && s.c.Window(x.subState) == nil {
			if err := s.c.Join(x.subState); err != nil {
				s.t.Fatalf("step %d: Join(%s): %v", s.steps, x.name, err)
			}
		}
	}
	if p, ok := s.c.Plan(now, true, false); ok && p.Max > 0 {
		s.read(p)
	}
	for range simLagReads {
		p, ok := s.c.Plan(now, false, true)
		if !ok {
			break
		}
		s.read(p)
	}
	for _, x := range s.subs {
		if w := s.c.Window(x.subState); w != nil && !x.walk(w, s.c.Lookahead()) {
			s.t.Fatalf("step %d: %s's cursor %d is before its window %d-%d", s.steps, x.name, x.cursor, w.start, w.end)
		}
	}
	for _, x := range s.subs {
		s.deliver(x)
	}
	s.c.Purge()
	_, refused := s.c.Rebalance()
	for _, m := range refused {
		for _, x := range s.subs {
			if x.subState == m {
				x.halted, x.refused = true, true
				x.halt(context.Background())
			}
		}
	}
	s.check()
}

// deliver starts x's deliveries and finishes them, as many as it may a
// step (all, unless perStep bounds them), starting the next ones as they
// finish.
func (s *sim) deliver(x *simSub) {
	if x.halted {
		return
	}
	done := 0
	for {
		for x.subState.inflight < x.c.MaxConcurrency {
			r, ok := x.next()
			if !ok {
				break
			}
			x.inflight = append(x.inflight, *r)
		}
		if x.blocked || len(x.inflight) == 0 || x.perStep > 0 && done == x.perStep {
			return
		}
		r := x.inflight[0]
		x.inflight = x.inflight[1:]
		got := x.got[r.Key]
		if len(got) > 0 && got[len(got)-1] >= r.Position {
			s.t.Fatalf("step %d: %s got %d after %d on stream %s", s.steps, x.name, r.Position, got[len(got)-1], r.Key)
		}
		x.got[r.Key] = append(got, r.Position)
		x.subState.inflight--
		x.delivered(r.Key, r.Position)
		done++
	}
}

// check verifies the invariants: the budget, disjoint ascending windows
// that each hold every record of their range, members inside their
// window, and a checkpoint (what the agent would propose) before every
// subscription's earliest event not delivered yet.
func (s *sim) check() {
	s.t.Helper()
	c := s.c
	records, bytes := 0, int64(0)
	for i, w := range c.ws {
		n, b := w.size()
		records, bytes = records+n, bytes+b
		if i > 0 && c.ws[i-1].end >= w.start {
			s.t.Fatalf("step %d: windows %d-%d and %d-%d overlap", s.steps, c.ws[i-1].start, c.ws[i-1].end, w.start, w.end)
		}
		for pos := max(w.start, s.log.trimmed+1); pos <= w.end; pos++ {
			if r := s.log.recs[pos-1]; pos <= w.filtered && (r.Namespace != w.filter.namespace || r.Key != w.filter.key) {
				if w.get(pos) != nil {
					s.t.Fatalf("step %d: window %d-%d, which reads %v through %d, holds position %d of %s/%s", s.steps, w.start, w.end, w.filter, w.filtered, pos, r.Namespace, r.Key)
				}
				for _, m := range w.members {
					if m.Cursor() < pos && !streamMatch(m, w.filter) {
						s.t.Fatalf("step %d: member at %d of window %d-%d would walk past position %d of another stream", s.steps, m.Cursor(), w.start, w.end, pos)
					}
				}
				continue // another stream's record, which the window passes over
			}
			if e := w.get(pos); e == nil || e.rec.Position != pos {
				s.t.Fatalf("step %d: window %d-%d misses position %d", s.steps, w.start, w.end, pos)
			}
		}
		for _, m := range w.members {
			if m.Cursor() < w.start-1 {
				s.t.Fatalf("step %d: a member's cursor %d is before its window %d-%d", s.steps, m.Cursor(), w.start, w.end)
			}
		}
	}
	if n, b := c.Size(); n != records || b != bytes {
		s.t.Fatalf("step %d: the cache counts %d records, %d bytes; its windows hold %d, %d", s.steps, n, b, records, bytes)
	}
	if records > c.cfg.records+c.cfg.batch {
		s.t.Fatalf("step %d: %d records held, budget %d and a read of %d", s.steps, records, c.cfg.records, c.cfg.batch)
	}
	s.maxHeld = max(s.maxHeld, records)
	checkpoint := c.ReadThrough()
	for _, x := range s.subs {
		checkpoint = min(checkpoint, x.safe())
	}
	for _, x := range s.subs {
		if first := s.firstMissing(x); checkpoint >= first {
			s.t.Fatalf("step %d: checkpoint %d passes %s's first event not delivered, %d", s.steps, checkpoint, x.name, first)
		}
	}
}

// firstMissing is the first position of x's streams, after x.from, not
// delivered to it yet.
func (s *sim) firstMissing(x *simSub) int64 {
	next := make(map[string]int, len(x.got))
	for _, r := range s.log.recs {
		if r.Position <= x.from || !x.matches(&r) {
			continue
		}
		got := x.got[r.Key]
		if i := next[r.Key]; i < len(got) && got[i] == r.Position {
			next[r.Key] = i + 1
			continue
		}
		return r.Position
	}
	return int64(len(s.log.recs)) + 1
}

// run steps until done holds, at most max steps.
func (s *sim) run(max int, what string, done func() bool) {
	s.t.Helper()
	for range max {
		if done() {
			return
		}
		s.step()
	}
	if !done() {
		s.t.Fatalf("after %d steps, still not %s; windows %+v", max, what, s.c.Stats().Windows)
	}
}

// complete reports whether x got every event of its streams after
// x.from, and nothing else.
func (s *sim) complete(x *simSub) bool {
	n := 0
	for _, r := range s.log.recs {
		if r.Position > x.from && x.matches(&r) {
			n++
		}
	}
	total := 0
	for _, g := range x.got {
		total += len(g)
	}
	return total == n && s.firstMissing(x) > int64(len(s.log.recs))
}

// everyTenth keys every tenth position "slow", the others "fast".
func everyTenth(p int64) string {
	if p%10 == 1 {
		return "slow"
	}
	return "fast"
}

var fourWindows = cacheConfig{records: 64, bytes: 1 << 30, batch: 16, windows: 4}

// T1, T4: a slow subscriber blocked on an old record while a fast one
// reads ten times the cache's capacity past it: the cache splits once,
// the fast one gets everything, the cache stays within its budget, the
// lagging window within the lookahead, and the checkpoint stays before
// the blocked event.
func TestWindowSplitOnPinnedOldest(t *testing.T) {
	log := newSimLog(640, everyTenth)
	s := newSim(t, fourWindows, log, 0)
	slow := s.sub("slow", "slow", 0)
	fast := s.sub("fast", "fast", 0)
	slow.blocked = true
	s.run(2000, "fast complete", func() bool { return s.complete(fast) })
	st := s.c.Stats()
	if st.Splits != 1 || len(st.Windows) != 2 {
		t.Fatalf("%d splits, windows %+v; want 1 split, 2 windows", st.Splits, st.Windows)
	}
	lag := s.c.Window(slow.subState)
	if n, _ := lag.size(); int64(n) > s.c.Lookahead() {
		t.Fatalf("the lagging window holds %d records, lookahead %d", n, s.c.Lookahead())
	}
	if slow.safe() != 0 {
		t.Fatalf("the blocked subscription's safe position moved to %d", slow.safe())
	}
	if s.c.Window(fast.subState) == lag {
		t.Fatal("fast and slow share a window after the split")
	}
}

// T2: a quiet subscription that only passes records of other streams is
// not starved: a full window it waits at the end of does not split.
func TestWindowQuietSubscriberNoSplit(t *testing.T) {
	log := newSimLog(640, func(int64) string { return "busy" })
	s := newSim(t, fourWindows, log, 0)
	busy := s.sub("busy", "busy", 0)
	quiet := s.sub("quiet", "none", 0)
	busy.blocked = true
	for range 200 {
		s.step()
	}
	if st := s.c.Stats(); st.Splits != 0 || len(st.Windows) != 1 {
		t.Fatalf("%d splits, windows %+v; want none", st.Splits, st.Windows)
	}
	if n, _ := s.c.Size(); n < s.c.cfg.records || quiet.cursor != s.c.ReadThrough() {
		t.Fatalf("the window holds %d, quiet at %d of %d: want it full and quiet at its end", n, quiet.cursor, s.c.ReadThrough())
	}
}

// T3: two subscriptions near each other share one window all along, and
// each record is held once (the cache counts what its windows hold, and
// check verifies each window holds its range).
func TestWindowNearbyShareOneWindow(t *testing.T) {
	log := newSimLog(2000, func(p int64) string { return fmt.Sprint("k", p%3) })
	s := newSim(t, fourWindows, log, 0)
	a := s.sub("a", "", 0)
	b := s.sub("b", "", s.c.shape.splitLag)
	a.perStep, b.perStep = 3, 3
	s.run(5000, "both complete", func() bool {
		if len(s.c.ws) != 1 {
			t.Fatalf("step %d: windows %+v, want one", s.steps, s.c.Stats().Windows)
		}
		return s.complete(a) && s.complete(b)
	})
	for range 5 {
		s.step()
	}
	if st := s.c.Stats(); st.Splits != 0 || len(st.Windows) != 1 || s.c.Window(a.subState) != s.c.Window(b.subState) {
		t.Fatalf("%d splits, windows %+v; want one shared window", st.Splits, st.Windows)
	}
	// A subscription joining just past a lagging window's end reads
	// through it rather than take a window of its own.
	log.append(300, func(int64) string { return "k0" })
	c := s.sub("c", "", s.c.ReadThrough()+s.c.shape.splitLag)
	s.step()
	if w := s.c.Window(c.subState); w != s.c.head() || len(s.c.ws) != 1 {
		t.Fatalf("a subscription near the head window's end got a window of its own: %+v", s.c.Stats().Windows)
	}
}

// T5, T6: once the blocked subscription goes on, its lagging window
// reads again from its end, without omission (every event arrives, in
// order, and no record another window held is read again), catches up
// and merges into the head window.
func TestWindowRehydrateAndMerge(t *testing.T) {
	log := newSimLog(640, everyTenth)
	s := newSim(t, fourWindows, log, 0)
	slow := s.sub("slow", "slow", 0)
	fast := s.sub("fast", "fast", 0)
	slow.blocked = true
	s.run(2000, "fast complete", func() bool { return s.complete(fast) })
	slow.blocked = false
	s.run(2000, "slow complete", func() bool { return s.complete(slow) })
	s.run(100, "merged", func() bool { return len(s.c.ws) == 1 })
	st := s.c.Stats()
	if st.Merges < 1 || st.RehydrationReads == 0 {
		t.Fatalf("%d merges, %d rehydration reads", st.Merges, st.RehydrationReads)
	}
	// Rehydration read again only what the split dropped, once: no
	// position was read more than twice, and every second read is a
	// rehydrated record.
	twice := 0
	for pos, n := range log.readOf {
		if n > 2 {
			t.Fatalf("position %d read %d times", pos, n)
		}
		if n == 2 {
			twice++
		}
	}
	if int64(twice) != st.RehydratedRecords {
		t.Fatalf("%d positions read twice, %d rehydrated", twice, st.RehydratedRecords)
	}
	// New records go to both, one window again.
	log.append(100, everyTenth)
	s.run(500, "both complete", func() bool { return s.complete(slow) && s.complete(fast) })
}

// T7: a window that catches up with another reads nothing the other
// holds (every read is checked against the other windows), stops where
// the other starts, and merges with it. Here the head window is full,
// pinned by a blocked subscription: the newcomer's window gets its
// reserve from the head window's read-ahead.
func TestWindowOverlapNotReadTwice(t *testing.T) {
	log := newSimLog(400, func(int64) string { return "k" })
	s := newSim(t, fourWindows, log, 200)
	live := s.sub("live", "", 200)
	live.blocked = true // keeps the head window's records resident
	s.run(100, "the head window full", func() bool { n, _ := s.c.Size(); return n >= s.c.cfg.records })
	replay := s.sub("replay", "", 0)
	s.run(3000, "the replay up to the live one", func() bool { return len(replay.got["k"]) == 200 })
	if st := s.c.Stats(); st.Reclaimed == 0 || len(st.Windows) != 1 || st.Merges != 1 {
		t.Fatalf("stats %+v; want a reclaim and one merge", st)
	}
	if log.readOf[201] != 1 {
		t.Fatalf("position 201, held by the head window, was read %d times", log.readOf[201])
	}
	live.blocked = false
	s.run(3000, "both complete", func() bool { return s.complete(live) && s.complete(replay) })
}

// T8: a failure while admitting records to a window (a read error, a
// stale plan, a batch that does not follow, or more than asked for)
// moves no window, cursor or safe position; reading again delivers
// everything.
func TestWindowAdmitFailureMovesNothing(t *testing.T) {
	log := newSimLog(200, everyTenth)
	s := newSim(t, fourWindows, log, 0)
	slow := s.sub("slow", "slow", 0)
	fast := s.sub("fast", "fast", 0)
	slow.blocked = true
	s.run(1000, "split", func() bool { return len(s.c.ws) == 2 && s.complete(fast) })
	slow.blocked = false
	type state struct {
		ws                   string
		slowCursor, slowSafe int64
		fastCursor, fastSafe int64
		records              int
		through              int64
	}
	snap := func() state {
		n, _ := s.c.Size()
		return state{fmt.Sprint(s.c.Stats().Windows), slow.cursor, slow.safe(), fast.cursor, fast.safe(), n, s.c.ReadThrough()}
	}
	var p ReadPlan
	s.run(100, "a lagging read due", func() bool {
		var ok bool
		p, ok = s.c.Plan(time.Time{}.Add(time.Duration(s.steps+1)), false, true)
		return ok
	})
	if p.Head || p.Max < 2 {
		t.Fatalf("plan %+v, want a lagging read of 2 or more", p)
	}
	before := snap()
	recs := slices.Clone(log.recs[p.After : p.After+int64(p.Max)])
	for name, bad := range map[string][]sluicetype.Record{
		"more than asked": append(slices.Clone(recs), log.recs[p.After+int64(p.Max)]),
		"out of order":    append([]sluicetype.Record{recs[1], recs[0]}, recs[2:]...),
		"not after":       slices.Clone(log.recs[p.After-1 : p.After+int64(p.Max)-1]),
	} {
		if err := s.c.Admit(p, bad); err == nil {
			t.Fatalf("%s: admitted", name)
		}
		if got := snap(); got != before {
			t.Fatalf("%s: state moved from %+v to %+v", name, before, got)
		}
	}
	// A read error backs the window off; nothing moves.
	log.fail = 1
	s.read(p)
	if got := snap(); got != before {
		t.Fatalf("a read error: state moved from %+v to %+v", before, got)
	}
	// A plan made stale by a change to its window is refused.
	if err := s.c.Admit(ReadPlan{w: p.w, After: p.After - 1, Max: p.Max}, recs); !errors.Is(err, errStalePlan) {
		t.Fatalf("a stale plan: %v", err)
	}
	if got := snap(); got != before {
		t.Fatalf("a stale plan: state moved from %+v to %+v", before, got)
	}
	s.run(2000, "slow complete", func() bool { return s.complete(slow) })
}

// X1: a subscription that starts or restarts behind the cache gets a
// window of its own, read from storage, and never moves the others: from
// the beginning, after a reposition, after a fault is cleared, and on a
// restart with a lagging subscription.
func TestWindowJoinBehind(t *testing.T) {
	for _, tc := range []struct {
		name string
		join func(s *sim, live *simSub) *simSub
	}{
		{"from the beginning", func(s *sim, live *simSub) *simSub { return s.sub("replay", "", 0) }},
		{"repositioned", func(s *sim, live *simSub) *simSub {
			x := s.sub("moved", "", s.c.ReadThrough())
			s.step()
			x.halt(context.Background())
			s.c.Leave(x.subState)
			x.cursor, x.faulted, x.from = 0, false, 0
			x.got = make(map[string][]int64)
			return x
		}},
		{"fault cleared", func(s *sim, live *simSub) *simSub {
			x := s.sub("faulted", "", 0)
			x.halted = true
			x.halt(context.Background())
			s.step()
			x.halted, x.faulted = false, false
			return x
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := newSimLog(1500, func(p int64) string { return fmt.Sprint("k", p%7) })
			s := newSim(t, fourWindows, log, 1000)
			live := s.sub("live", "", 1000)
			s.run(1000, "live at the head", func() bool { return s.complete(live) })
			back := tc.join(s, live)
			back.blocked = true // the replay holds after its first events
			through := s.c.ReadThrough()
			s.step()
			if s.c.Window(back.subState) == s.c.Window(live.subState) || s.c.ReadThrough() != through {
				t.Fatalf("the late subscription moved the head window: windows %+v", s.c.Stats().Windows)
			}
			log.append(200, func(p int64) string { return fmt.Sprint("k", p%7) })
			s.run(1000, "live complete", func() bool { return s.complete(live) })
			back.blocked = false
			s.run(5000, "the replay complete", func() bool { return s.complete(back) })
			s.run(100, "merged", func() bool { return len(s.c.ws) == 1 })
		})
	}
	t.Run("restart", func(t *testing.T) {
		// Stored positions 10 (lagging) and 1000 (hot): joined lowest
		// first, the hot one gets a head window of its own at once.
		log := newSimLog(1500, func(p int64) string { return fmt.Sprint("k", p%7) })
		s := newSim(t, fourWindows, log, 10)
		lag := s.sub("lag", "", 10)
		hot := s.sub("hot", "", 1000)
		lag.blocked = true
		s.step()
		if len(s.c.ws) != 2 || s.c.Window(hot.subState) != s.c.head() {
			t.Fatalf("windows %+v after a restart", s.c.Stats().Windows)
		}
		s.run(1000, "hot complete", func() bool { return s.complete(hot) })
		if log.readOf[500] != 0 {
			t.Fatal("the log between the two was read while the lagging one was blocked")
		}
		lag.blocked = false
		s.run(5000, "lag complete", func() bool { return s.complete(lag) })
	})
}

// At the window limit, Share moves the nearest window above back to the
// newcomer (its members wait, and miss nothing), and Fault refuses it
// with ErrWindowLimit.
func TestWindowLimitPolicies(t *testing.T) {
	two := cacheConfig{records: 64, bytes: 1 << 30, batch: 16, windows: 2}
	log := newSimLog(1000, func(p int64) string { return fmt.Sprint("k", p%5) })
	s := newSim(t, two, log, 900)
	hot := s.sub("hot", "", 900)
	s.run(100, "hot complete", func() bool { return s.complete(hot) })
	lag := s.sub("lag", "", 500)
	lag.blocked = true
	s.step()
	if len(s.c.ws) != 2 {
		t.Fatalf("windows %+v, want 2", s.c.Stats().Windows)
	}
	back := s.sub("back", "", 100)
	s.step()
	if len(s.c.ws) != 2 || s.c.Window(back.subState) != s.c.Window(lag.subState) {
		t.Fatalf("at the limit: windows %+v; want the lagging one moved back", s.c.Stats().Windows)
	}
	lag.blocked = false
	s.run(5000, "all complete", func() bool {
		return s.complete(hot) && s.complete(lag) && s.complete(back)
	})

	fault := two
	fault.policy = WindowLimitFault
	c := newCache(fault, 900)
	c.Join(at("hot", 900))
	c.Join(at("lag", 500))
	if err := c.Join(at("back", 100)); !errors.Is(err, sluicetype.ErrWindowLimit) {
		t.Fatalf("Join at the limit under Fault: %v", err)
	}

	// A split the limit does not allow refuses the lagging members, and
	// the others go on.
	log = newSimLog(2000, everyTenth)
	s = newSim(t, fault, log, 1000)
	first := s.sub("first", "", 100) // its own window: the limit is reached
	first.blocked = true
	fast := s.sub("fast", "fast", 1000)
	slow := s.sub("slow", "slow", 1000)
	slow.blocked = true
	s.run(2000, "fast complete", func() bool { return s.complete(fast) })
	if !slow.refused || first.refused || fast.refused || len(s.c.ws) != 2 {
		t.Fatalf("refused: first %v, fast %v, slow %v; windows %+v", first.refused, fast.refused, slow.refused, s.c.Stats().Windows)
	}
}

// A retention gap strands only the members of the window that reads
// into it; the other windows and their members are untouched.
func TestWindowRetentionGapPerWindow(t *testing.T) {
	log := newSimLog(1000, func(p int64) string { return fmt.Sprint("k", p%5) })
	s := newSim(t, fourWindows, log, 900)
	hot := s.sub("hot", "", 900)
	s.run(100, "hot complete", func() bool { return s.complete(hot) })
	old := s.sub("old", "", 100)
	log.trimmed = 200
	s.step()
	old.from = 200 // what it may still miss is gone
	if !old.halted || hot.halted || s.c.Window(hot.subState) == nil {
		t.Fatalf("old halted %v, hot halted %v", old.halted, hot.halted)
	}
	log.append(50, func(p int64) string { return "k1" })
	s.run(100, "hot complete", func() bool { return s.complete(hot) })
}
