package stream

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
)

// The spec's bounds scenario: window count and quota limits prevent
// unbounded memory or reader growth. Twelve members read one partition
// from twelve positions, 250 records apart, each at its own pace (one
// to four events a step) and now and then stalled for a hundred steps,
// while records keep coming; the cache may keep four windows. At every
// step (the harness checks after each operation): at most four windows
// (four readers), at most the record budget held, at most a read over
// the byte budget, no read into what other windows reserve, each plan
// one read of at most a batch, a lagging read only for a window whose
// members have walked all of it and no further than they may walk
// (lookahead), and, per step, at most maxReadsPerStep reads of which
// simLagReads lagging. At the end every member gets all its events.
func TestWindowBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  cacheConfig
	}{
		{"records", cacheConfig{records: 64, bytes: 1 << 30, batch: 16, windows: 4}},
		// Records of 234 bytes: the byte bound holds 48 of them, and the
		// record bound is not the one reached.
		{"bytes", cacheConfig{records: 4096, bytes: 48 * 234, batch: 16, windows: 4}},
		{"fault", cacheConfig{records: 64, bytes: 1 << 30, batch: 16, windows: 4, policy: WindowLimitFault}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &modelLog{next: 1}
			appendKeyed := func(n int) {
				for range n {
					log.add(fmt.Sprint("k", log.next%6), 100, 0)
				}
			}
			appendKeyed(3000)
			h := newHarness(t, tc.cfg, log, 0)
			h.late = true // as the agent reads for lagging windows
			pace := make(map[*modelMember]int)
			offset := make(map[*modelMember]int) // it stalls 100 steps in 500, from its offset
			for i := range 12 {
				key := ""
				if i%2 == 1 {
					key = fmt.Sprint("k", i%6)
				}
				if x := h.join(key, int64(i)*250, false); x != nil {
					pace[x], offset[x] = 1+i%4, 100*(i%5)
				}
			}
			if len(h.live) < 12 && tc.cfg.policy != WindowLimitFault {
				t.Fatalf("%d of 12 members joined", len(h.live))
			}
			lagging := 0
			h.onRead = func(p ReadPlan, recs []sluicetype.Record) {
				if !p.Head {
					lagging++
				}
			}
			resolve := func(x *modelMember) {
				if (h.steps+offset[x])%500 < 100 {
					return
				}
				for range min(pace[x], len(x.unresolved)) {
					x.unresolved = x.unresolved[1:]
				}
			}
			var maxWindows, maxRecords int
			var maxBytes int64
			for range 1500 {
				appendKeyed(4)
				lagging = 0
				if reads := h.step(resolve); reads > maxReadsPerStep || lagging > simLagReads {
					t.Fatalf("step %d: %d reads, %d lagging", h.steps, reads, lagging)
				}
				n, b := h.c.Size()
				maxWindows, maxRecords, maxBytes = max(maxWindows, len(h.c.ws)), max(maxRecords, n), max(maxBytes, b)
				// Between steps, a lagging read is due only for a window
				// whose members want more (plan checks which).
				if p, ok := h.plan(false, true); ok && !wantsMore(p.w) {
					t.Fatalf("step %d: a lagging read due for window %d-%d", h.steps, p.w.start, p.w.end)
				}
			}
			st := h.c.Stats()
			t.Logf("at most %d windows, %d records, %d bytes held; %d splits, %d merges, %d rehydration reads",
				maxWindows, maxRecords, maxBytes, st.Splits, st.Merges, st.RehydrationReads)
			if maxWindows != tc.cfg.windows || maxRecords < tc.cfg.records*3/4 && maxBytes < tc.cfg.bytes*3/4 {
				t.Fatalf("at most %d windows, %d records, %d bytes: the scenario did not reach the bounds", maxWindows, maxRecords, maxBytes)
			}
			h.drain()
		})
	}
}

// Split/merge hysteresis prevents oscillation under borderline lag. Two
// members read a partition whose log grows by four records a step: F
// takes every event at once, S holds its lag (F's safe position minus
// its own) at a target that swings every other step. A window splits
// only when full (S pins a window of the budget, B records, with F
// starving at its end) and the two merge only when S's lagging window
// reads up to the head window, which it does once S's lag is within the
// lookahead (B/(2(M-1)) for M windows). Between the two points lies a
// band of at least B/2 records, well over splitLag (B/(2M)): a lag that
// swings within it never changes the windows, however often it swings,
// and one that swings across it splits and merges at most once a swing.
// And whatever the lag, a window splits again only after admitting
// splitLag records since it was last split or merged (the harness counts
// them). The bounds, with W the number of swings across the band: no
// split or merge below the full window, one split and no merge about
// it, one of each about the merge point, and at most W+1 splits and as
// many merges across the band, never two changes in consecutive steps.
func TestWindowHysteresis(t *testing.T) {
	for _, windows := range []int{2, 4} {
		cfg := cacheConfig{records: 64, bytes: 1 << 30, batch: 16, windows: windows}
		la, lag := cfg.shape().lookahead, cfg.shape().splitLag
		for _, tc := range []struct {
			name string
			// The lag swings between lo and hi every period steps, after
			// first steps at first.
			first, lo, hi int64
			period        int
			// At most splits and merges (and at least, when floor).
			splits, merges int64
			floor          bool
		}{
			// About the threshold of the split's gap (lookahead plus
			// splitLag): no pressure, so no split.
			{name: "below the full window", lo: la - 2, hi: la + lag + 2, period: 2},
			{name: "about the full window", lo: 60, hi: 70, period: 2, splits: 1, floor: true},
			{name: "about the merge point", first: 80, lo: la - 4, hi: la + 4, period: 2, splits: 1, merges: 1, floor: true},
			// 1000 steps of swings of 2×20: 25 swings.
			{name: "across the band", lo: la - 8, hi: 72, period: 20, splits: 26, merges: 26},
		} {
			t.Run(fmt.Sprintf("%d windows %s", windows, tc.name), func(t *testing.T) {
				log := &modelLog{next: 1}
				for range 64 {
					log.add("k", 10, 0)
				}
				h := newHarness(t, cfg, log, 0)
				f := h.join("", 0, true)
				s := h.join("", 0, false)
				changed := -2 // the last step the windows changed
				for step := range 1000 {
					for range 4 {
						log.add("k", 10, 0)
					}
					target := tc.lo
					if (step/tc.period)%2 == 1 {
						target = tc.hi
					}
					if step < 50 && tc.first > 0 {
						target = tc.first
					}
					n := len(h.c.ws)
					h.step(func(x *modelMember) {
						if x != s {
							resolveAll(x)
							return
						}
						for len(x.unresolved) > 0 && x.unresolved[0] <= f.Safe()-target {
							x.unresolved = x.unresolved[1:]
						}
					})
					if len(h.c.ws) != n {
						if step == changed+1 {
							t.Fatalf("step %d: the windows changed two steps running", h.steps)
						}
						changed = step
					}
				}
				st := h.c.Stats()
				t.Logf("%d splits, %d merges; lag %d at the end, lookahead %d, splitLag %d", st.Splits, st.Merges, f.Safe()-s.Safe(), la, lag)
				if st.Splits > tc.splits || st.Merges > tc.merges || st.Merges > st.Splits {
					t.Fatalf("%d splits, %d merges; want at most %d and %d", st.Splits, st.Merges, tc.splits, tc.merges)
				}
				if tc.floor && (st.Splits != tc.splits || st.Merges != tc.merges) || !tc.floor && tc.splits > 1 && st.Splits < tc.splits/2 {
					t.Fatalf("%d splits, %d merges: the lag did not move the windows as it should", st.Splits, st.Merges)
				}
				h.drain()
			})
		}
	}
}
