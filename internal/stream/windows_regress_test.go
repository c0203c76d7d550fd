package stream

import (
	"fmt"
	"testing"
	"time"
)

// A: byte-bound budget (records ~144 B, budget 20 records' worth): the
// pinned window never splits, the fast subscription stalls.
func TestWindowReviewByteBoundNoSplit(t *testing.T) {
	// Defaults but bytes: 4096 records, 4 windows, batch 256; the byte
	// bound holds ~400 records of 144 B (as 16 MiB holds ~400 of 40 KiB).
	cfg := cacheConfig{records: 4096, bytes: 400 * 144, batch: 256, windows: 4}
	// Ten times the ~400 records the bytes hold.
	log := newSimLog(4000, everyTenth)
	s := newSim(t, cfg, log, 0)
	slow := s.sub("slow", "slow", 0)
	fast := s.sub("fast", "fast", 0)
	slow.blocked = true
	s.run(2000, "fast complete past a blocked subscription, with a cache bound by bytes", func() bool { return s.complete(fast) })
}

// B: a subscription whose events are sparse (none in the full window)
// is never "starved", so a blocked one holds it back for ever.
func TestWindowReviewSparseSubscriberStalls(t *testing.T) {
	log := newSimLog(640, func(int64) string { return "busy" })
	s := newSim(t, fourWindows, log, 0)
	busy := s.sub("busy", "busy", 0)
	quiet := s.sub("quiet", "none", 0)
	busy.blocked = true
	for range 200 {
		s.step()
	}
	log.append(5, func(int64) string { return "none" })
	for range 2000 {
		s.step()
	}
	t.Logf("splits %d windows %+v quiet got %v cursor %d", s.c.Stats().Splits, s.c.Stats().Windows, quiet.got, quiet.cursor)
	if !s.complete(quiet) {
		t.Errorf("quiet never got its 5 events")
	}
}

// C: agent order (dispatch/walk after each read): the lowest lagging
// window takes every lagging read while its member keeps up, and a
// second lagging window starves until the first catches up with it.
func TestWindowReviewLaggingStarvation(t *testing.T) {
	cfg := cacheConfig{records: 4096, bytes: 1 << 30, batch: 256, windows: 4}
	log := newSimLog(30000, func(p int64) string { return fmt.Sprint("k", p%7) })
	s := newSim(t, cfg, log, 29000)
	live := s.sub("live", "", 29000)
	a := s.sub("a", "", 0)
	b := s.sub("b", "", 15000)
	for step := 1; step <= 400; step++ {
		s.steps++
		now := time.Time{}.Add(time.Duration(s.steps))
		for _, x := range s.subs {
			if s.c.Window(x.subState) == nil {
				if err := s.c.Join(x.subState); err != nil {
					t.Fatal(err)
				}
			}
		}
		walk := func() {
			for _, x := range s.subs {
				if w := s.c.Window(x.subState); w != nil {
					x.walk(w, s.c.Lookahead())
				}
			}
		}
		if p, ok := s.c.Plan(now, true, false); ok && p.Max > 0 {
			s.read(p)
			walk()
			s.c.Purge()
			s.c.Rebalance()
		}
		for range simLagReads {
			p, ok := s.c.Plan(now, false, true)
			if !ok {
				break
			}
			s.read(p)
			walk() // the agent dispatches after every read that got records
			s.c.Purge()
			s.c.Rebalance()
		}
		walk()
		for _, x := range s.subs {
			s.deliver(x) // deliveries finish between steps
		}
		s.c.Purge()
		s.c.Rebalance()
		if step%5 == 0 && step <= 40 {
			t.Logf("step %d: a cursor %d, b cursor %d, windows %d", step, a.cursor, b.cursor, len(s.c.ws))
		}
		if step == 20 && b.cursor < 15000+1000 {
			t.Errorf("b starved: cursor %d after 20 steps while a reached %d", b.cursor, a.cursor)
		}
	}
	_ = live
	if b.cursor < 15000+1000 {
		t.Errorf("b starved: cursor %d after 400 steps while a reached %d", b.cursor, a.cursor)
	}
}

// D: split's reach is not capped at the window's end: a lower member
// whose cursor is past the end (after a Share reset or an ahead join)
// makes the lagging window claim positions it never read, which the
// pinning member then walks as holes.
func TestWindowReviewSplitReachPastEnd(t *testing.T) {
	cfg := cacheConfig{records: 64, bytes: 1 << 30, batch: 16, windows: 4} // lookahead 10, reserve 8, splitLag 8
	log := newSimLog(200, func(int64) string { return "k" })
	c := newCache(cfg, 0)
	j := newView("ns", "k", 0)
	j.c = &Consumer{MaxConcurrency: 4}
	if err := c.Join(j); err != nil {
		t.Fatal(err)
	}
	recs, _ := log.read(0, 64)
	p, _ := c.Plan(time.Time{}, true, false)
	p.Max = 64
	if err := c.Admit(p, recs); err != nil {
		t.Fatal(err)
	}
	j.walk(c.Window(j), c.Lookahead()) // queues 1..10, blocked: safe 0, cursor 10
	// X: cursor past the window's end, an unresolved event at 13 (a member
	// of a window that a Share reset moved back); U further on, starved.
	x := &fakeMember{name: "x", cursor: 70, safe: 12}
	u := &fakeMember{name: "u", cursor: 100, safe: 100, last: 50}
	c.add(c.head(), x)
	c.add(c.head(), u)
	c.Purge()
	c.Rebalance()
	lw := c.Window(j)
	t.Logf("windows %+v; j's window %d-%d holds %d", c.Stats().Windows, lw.start, lw.end, len(lw.entries))
	// j's events are delivered; it walks on.
	for _, q := range j.streams {
		for len(q.items) > 0 {
			pos := q.items[0].rec.Position
			q.busy = true
			j.delivered("k", pos)
		}
	}
	seen := map[int64]bool{}
	for range 20 {
		for _, pos := range j.unresolved {
			seen[pos] = true
		}
		for _, q := range j.streams {
			for len(q.items) > 0 {
				j.delivered("k", q.items[0].rec.Position)
			}
		}
		j.walk(lw, c.Lookahead())
	}
	for p := int64(60); p <= 70; p++ {
		t.Logf("position %d queued for j: %v", p, seen[p])
	}
	t.Logf("j cursor %d, safe %d, queued %v", j.cursor, j.safe(), j.unresolved)
	if lw.end > 64 {
		t.Errorf("lagging window claims %d-%d but holds through 64: j passed 65..%d unexamined", lw.start, lw.end, lw.end)
	}
}

// E: a head window with no members (its only subscriber went) still
// reads ahead at full speed, and purges at once, while a lagging window
// reads the same range again behind it.
func TestWindowReviewMemberlessHeadReads(t *testing.T) {
	log := newSimLog(5000, func(p int64) string { return fmt.Sprint("k", p%7) })
	s := newSim(t, fourWindows, log, 10)
	lag := s.sub("lag", "", 10)
	hot := s.sub("hot", "", 1000)
	lag.perStep = 2
	s.step()
	hot.halted = true
	s.c.Leave(hot.subState)
	s.run(100000, "lag complete", func() bool { return s.complete(lag) })
	twice := 0
	for _, n := range log.readOf {
		if n > 1 {
			twice++
		}
	}
	t.Logf("positions read twice: %d of %d; rehydrated %d", twice, len(log.readOf), s.c.Stats().RehydratedRecords)
	if limit := len(log.readOf) / 10; twice > limit {
		t.Errorf("%d of %d positions read twice, want at most %d: a head window no one reads kept reading ahead", twice, len(log.readOf), limit)
	}
}
