package stream

import "testing"

// A split whose lagging members have walked all of their window leaves
// the others nothing of it: the lagging window would be the whole
// window, and the other one, empty, would start right after it, the two
// meeting. The next rebalance would merge them again, counting a split
// and a merge that changed nothing and resetting the hysteresis (the
// merged window then waits for splitLag records before it may split).
// Such a window does not split.
func TestWindowSplitLeavesNoMeetingWindows(t *testing.T) {
	c := newCache(cacheConfig{records: 16, bytes: 1 << 30, batch: 16, windows: 2}, 0) // lookahead 8, splitLag 4
	pin, near, ahead := at("pin", 0), at("near", 0), at("ahead", 0)
	for _, m := range []*fakeMember{pin, near, ahead} {
		if err := c.Join(m); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, c, records(1, 16)) // full
	// pin holds the window's first record; near, within splitLag of it,
	// has walked all of the window; ahead is past the window's end, and
	// starved (it matched records in it).
	pin.cursor, pin.safe = 8, 0
	near.cursor, near.safe = 16, 5
	ahead.cursor, ahead.safe, ahead.last = 30, 30, 16
	for range 3 {
		c.Purge()
		c.Rebalance()
		ws := c.Stats().Windows
		for i := 1; i < len(ws); i++ {
			if ws[i-1].End+1 >= ws[i].Start {
				t.Fatalf("windows %+v meet after a rebalance", ws)
			}
		}
	}
	if st := c.Stats(); st.Splits != st.Merges+int64(len(st.Windows)-1) || st.Merges > 0 {
		t.Fatalf("%d splits, %d merges, windows %+v: a split undone at once", st.Splits, st.Merges, st.Windows)
	}
}
