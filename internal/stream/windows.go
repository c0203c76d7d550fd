package stream

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// cacheConfig bounds a partition's cache.
type cacheConfig struct {
	records int   // at most this many records held
	bytes   int64 // reads stop once this many bytes are held
	batch   int   // one read's bound
	windows int   // at most this many windows (1: one contiguous window)
}

// windows is the cache of one partition: resident windows, disjoint and
// ascending; the last one, the head window, reads ahead of its members
// (as the one contiguous cache did), the others read only for members
// that need more.
type windows struct {
	cfg     cacheConfig
	ws      []*window
	of      map[Member]*window
	records int
	bytes   int64
	avgSize int64
	st      CacheStats
}

// newCache returns a cache whose head window reads after after.
func newCache(cfg cacheConfig, after int64) *windows {
	cfg.windows = max(cfg.windows, 1)
	cfg.batch = max(cfg.batch, 1)
	return &windows{cfg: cfg, ws: []*window{{start: after + 1, end: after}}, of: make(map[Member]*window)}
}

var errStalePlan = errors.New("stream: read plan no longer matches its window")

func (c *windows) head() *window { return c.ws[len(c.ws)-1] }

func (c *windows) index(w *window) int { return slices.Index(c.ws, w) }

func (c *windows) Window(m Member) *window { return c.of[m] }

func (c *windows) Lookahead() int64 { return 0 }

func (c *windows) ReadThrough() int64 { return c.head().end }

func (c *windows) Size() (int, int64) { return c.records, c.bytes }

func (c *windows) Join(m Member) error {
	if w := c.of[m]; w != nil {
		return nil
	}
	cur := m.Cursor()
	for _, w := range c.ws {
		if w.start-1 <= cur && cur <= w.end {
			c.add(w, m)
			return nil
		}
	}
	if h := c.head(); cur > h.end {
		c.add(h, m) // it waits for the head window to read up to it
		return nil
	}
	// Before every window that covers it: the nearest window above goes
	// back to the member's cursor, and its members wait while it reads
	// again (they pass what they have examined).
	i, _ := slices.BinarySearchFunc(c.ws, cur, func(w *window, cur int64) int { return cmp.Compare(w.start-1, cur) })
	w := c.ws[i]
	c.forget(w.reset(cur))
	c.add(w, m)
	return nil
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

// room is what window w may read now: what the budget has left (the
// byte bound stops reads once reached).
func (c *windows) room(w *window) (int, int64) {
	records, bytes := c.cfg.records-c.records, c.cfg.bytes-c.bytes
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

func (c *windows) Plan(now time.Time, head, lagging bool) (ReadPlan, bool) {
	if head {
		h := c.head()
		return ReadPlan{w: h, After: h.end, Max: c.readMax(h), Head: true}, true
	}
	return ReadPlan{}, false
}

func (c *windows) Admit(p ReadPlan, recs []sluicetype.Record) error {
	w := p.w
	if c.index(w) < 0 || w.end != p.After {
		return errStalePlan
	}
	if len(recs) == 0 {
		return nil
	}
	if len(recs) > p.Max {
		return fmt.Errorf("stream: a read returned %d records, asked for %d", len(recs), p.Max)
	}
	for i := range recs {
		if recs[i].Position <= p.After || i > 0 && recs[i].Position <= recs[i-1].Position {
			return fmt.Errorf("stream: a read after %d returned position %d out of order", p.After, recs[i].Position)
		}
	}
	records, bytes := w.add(recs)
	c.records += records
	c.bytes += bytes
	c.avgSize = bytes / int64(records)
	if !p.Head {
		c.st.RehydrationReads++
		c.st.RehydratedRecords += int64(records)
	}
	return nil
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
		return false
	}
	records, bytes := h.add(recs)
	c.records += records
	c.bytes += bytes
	return true
}

func (c *windows) Backoff(p ReadPlan, until time.Time) { p.w.retryAt = until }

func (c *windows) Gap(p ReadPlan, trimmed int64) []Member {
	w := p.w
	if c.index(w) < 0 || w.end != p.After || trimmed <= w.end {
		return nil
	}
	var stranded []Member
	for _, m := range slices.Clone(w.members) {
		if m.Cursor() < trimmed {
			stranded = append(stranded, m)
			c.Leave(m)
		}
	}
	// Whoever is left starts after the gap: nothing held is theirs.
	c.forget(w.reset(trimmed))
	return stranded
}

func (c *windows) Purge() {
	for _, w := range c.ws {
		from := w.end + 1
		for _, m := range w.members {
			from = min(from, m.Safe()+1)
		}
		if from > w.start {
			w.start = from
			c.forget(w.dropBelow(from))
		}
	}
}

func (c *windows) Rebalance() (bool, []Member) { return false, nil }

func (c *windows) Stats() CacheStats {
	st := c.st
	st.Windows = make([]WindowStats, len(c.ws))
	for i, w := range c.ws {
		records, bytes := w.size()
		st.Windows[i] = WindowStats{Start: w.start, End: w.end, Records: records, Bytes: bytes,
			Head: i == len(c.ws)-1, Members: len(w.members)}
	}
	return st
}

// Index is the index of m's window in Stats (-1: none).
func (c *windows) Index(m Member) int {
	if w := c.of[m]; w != nil {
		return c.index(w)
	}
	return -1
}
