package stream

import "testing"

// A subscription to one stream that rewinds (here: starts far behind the
// head window) reads that stream's records only, not its partition's:
// its lagging window's reads return one record in ten (the stream's
// share of the log), and it gets every one of them, in order.
func TestWindowLaggingReadsOneStream(t *testing.T) {
	log := newSimLog(2000, everyTenth)
	s := newSim(t, fourWindows, log, 1900)
	s.sub("fast", "fast", 1900)
	s.run(100, "fast at the head", func() bool { return s.c.head().end == 2000 })
	slow := s.sub("slow", "slow", 0) // a rewind: a window of its own
	s.run(4000, "slow complete", func() bool { return s.complete(slow) })
	st := s.c.Stats()
	wanted := int64(1900 / 10) // the slow stream's records the head window does not hold
	if st.RehydratedRecords < wanted || st.RehydratedRecords > wanted+int64(fourWindows.batch) {
		t.Fatalf("lagging windows read %d records for the %d of the slow stream behind the head window; want that many (within a read)",
			st.RehydratedRecords, wanted)
	}
	if st.DuplicateReads != 0 {
		t.Fatalf("%d records read again that another window held", st.DuplicateReads)
	}
}

// A subscription of a whole namespace that joins inside a window which
// holds one stream's records only (the others' positions are holes for
// it) sends that window back to its cursor and reads everything on: it
// skips nothing. The stream's subscription there loses nothing either.
func TestWindowJoinInsideOneStreamWindow(t *testing.T) {
	log := newSimLog(2000, everyTenth)
	s := newSim(t, fourWindows, log, 1900)
	s.sub("fast", "fast", 1900)
	s.run(100, "fast at the head", func() bool { return s.c.head().end == 2000 })
	slow := s.sub("slow", "slow", 0)
	s.run(200, "the slow window reads one stream", func() bool {
		w := s.c.Window(slow.subState)
		return w != nil && w != s.c.head() && w.filtered > w.start+20
	})
	w := s.c.Window(slow.subState)
	all := s.sub("all", "", w.start) // inside it, before what it passed over
	s.run(8000, "all complete", func() bool { return s.complete(all) && s.complete(slow) })
}

// A window of one stream that meets a window whose members read other
// streams below it dissolves into that one: its members wait there,
// and nobody walks the other streams' holes.
func TestWindowMeetsOneStreamWindowFromBelow(t *testing.T) {
	log := newSimLog(3000, everyTenth)
	s := newSim(t, fourWindows, log, 2900)
	s.sub("fast", "fast", 2900)
	s.run(100, "fast at the head", func() bool { return s.c.head().end == 3000 })
	slow := s.sub("slow", "slow", 1000)
	s.run(200, "the slow window reads one stream", func() bool {
		w := s.c.Window(slow.subState)
		return w != nil && w.filtered > 1200
	})
	slow.blocked = true // it stays where it is
	all := s.sub("all", "", 0)
	s.run(20000, "all and fast complete", func() bool { return s.complete(all) })
	slow.blocked = false
	s.run(20000, "slow complete", func() bool { return s.complete(slow) })
}
