package stream

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// fakeMember is a subscription as a test sets it: its cursor, its safe
// position and the last position it matched.
type fakeMember struct {
	name               string
	cursor, safe, last int64
}

func (m *fakeMember) Cursor() int64    { return m.cursor }
func (m *fakeMember) Safe() int64      { return min(m.safe, m.cursor) }
func (m *fakeMember) LastMatch() int64 { return m.last }

// Matches: a fake member wants every record.
func (m *fakeMember) Matches(*sluicetype.Record) bool { return true }

// at is a member whose cursor and safe position are pos.
func at(name string, pos int64) *fakeMember { return &fakeMember{name: name, cursor: pos, safe: pos} }

func records(from, to int64) []sluicetype.Record {
	var out []sluicetype.Record
	for p := from; p <= to; p++ {
		out = append(out, sluicetype.Record{Position: p, Namespace: "ns", Key: "k", Payload: make([]byte, 100)})
	}
	return out
}

// fill admits recs through the head window's plan, which must ask for
// at least as many.
func fill(t *testing.T, c Cache, recs []sluicetype.Record) {
	t.Helper()
	p, ok := c.Plan(time.Time{}, true, false)
	if !ok || !p.Head {
		t.Fatalf("no head plan: %+v, %v", p, ok)
	}
	if p.Max < len(recs) {
		p.Max = len(recs) // a test's batch, beyond the read bound
	}
	if err := c.Admit(p, recs); err != nil {
		t.Fatalf("Admit(%d-%d): %v", recs[0].Position, recs[len(recs)-1].Position, err)
	}
}

func headMax(c Cache) int {
	p, _ := c.Plan(time.Time{}, true, false)
	return p.Max
}

func holds(c Cache, m Member, pos int64) bool {
	w := c.Window(m)
	e := w.get(pos)
	return e != nil && e.rec.Position == pos
}

// With one window the cache is the contiguous cache it replaces: it
// keeps records in order through purges, admits no more than its bounds,
// goes back for a member before it (its other members wait), and passes
// holes retention left.
func TestWindowSingleMatchesRing(t *testing.T) {
	c := newCache(cacheConfig{records: 200, bytes: 1 << 30, batch: 1000, windows: 1}, 0)
	if n := headMax(c); n != 200 || c.ReadThrough() != 0 {
		t.Fatalf("empty cache: room %d, read through %d", n, c.ReadThrough())
	}
	m := at("m", 0)
	if err := c.Join(m); err != nil {
		t.Fatal(err)
	}
	fill(t, c, records(1, 150))
	m.cursor, m.safe = 150, 100
	c.Purge()
	fill(t, c, records(151, 250))
	if n, _ := c.Size(); n != 150 {
		t.Fatalf("cache holds %d records, want 150", n)
	}
	if st := c.Stats(); len(st.Windows) != 1 || st.Windows[0].Start != 101 || st.Windows[0].End != 250 {
		t.Fatalf("windows %+v, want one of 101-250", st.Windows)
	}
	for p := int64(101); p <= 250; p++ {
		if !holds(c, m, p) {
			t.Fatalf("position %d not held", p)
		}
	}
	for _, p := range []int64{100, 251, 0} {
		if holds(c, m, p) {
			t.Fatalf("position %d held, which the cache does not hold", p)
		}
	}
	if n := headMax(c); n != 50 {
		t.Fatalf("room %d, want 50", n)
	}
	fill(t, c, records(251, 300))
	if n := headMax(c); n != 0 {
		t.Fatalf("room %d in a full cache", n)
	}
	// More than a plan asked for changes nothing.
	p, _ := c.Plan(time.Time{}, true, false)
	if err := c.Admit(p, records(301, 301)); err == nil {
		t.Fatal("a full cache admitted a record")
	}
	if c.ReadThrough() != 300 {
		t.Fatalf("read through %d after a refused admission, want 300", c.ReadThrough())
	}
	// A member before the window moves it back; the others wait there.
	back := at("back", 40)
	if err := c.Join(back); err != nil {
		t.Fatal(err)
	}
	if n, b := c.Size(); n != 0 || b != 0 || c.ReadThrough() != 40 || c.Window(m) != c.Window(back) {
		t.Fatalf("after a join at 40: %d records, %d bytes, read through %d", n, b, c.ReadThrough())
	}
	// A gap (records retention trimmed) is a hole.
	fill(t, c, append(records(41, 45), records(50, 52)...))
	if !holds(c, back, 50) || holds(c, back, 47) {
		t.Fatal("the hole at 46-49 is not one")
	}
	v := newView("ns", "", 40)
	if !v.walk(c.Window(back), 0) || v.cursor != 52 || len(v.unresolved) != 8 {
		t.Fatalf("walk: cursor %d, %d unresolved; want 52 and 8", v.cursor, len(v.unresolved))
	}
}

// The byte bound stops reads once reached.
func TestWindowSingleBytes(t *testing.T) {
	one := records(1, 1)
	c := newCache(cacheConfig{records: 1000, bytes: 10 * recordSize(&one[0]), batch: 1000, windows: 1}, 0)
	m := at("m", 0)
	c.Join(m)
	fill(t, c, records(1, 9))
	if n := headMax(c); n == 0 || n > 2 {
		t.Fatalf("room %d records below the byte bound, want 1 or 2", n)
	}
	fill(t, c, records(10, 10))
	if n := headMax(c); n != 0 {
		t.Fatalf("room %d at the byte bound", n)
	}
	m.cursor, m.safe = 5, 5
	c.Purge()
	if n := headMax(c); n == 0 {
		t.Fatal("no room after a purge")
	}
}

// The tail's hand-off joins the head window when it follows and fits.
func TestWindowFollow(t *testing.T) {
	c := newCache(cacheConfig{records: 10, bytes: 1 << 30, batch: 100, windows: 1}, 0)
	if !c.Follow(records(1, 4)) || c.ReadThrough() != 4 {
		t.Fatalf("a following hand-off: read through %d", c.ReadThrough())
	}
	if !c.Follow(records(3, 6)) || c.ReadThrough() != 6 {
		t.Fatalf("an overlapping hand-off: read through %d", c.ReadThrough())
	}
	if c.Follow(records(8, 9)) || c.ReadThrough() != 6 {
		t.Fatal("a hand-off after a gap was taken")
	}
	if c.Follow(records(7, 11)) || c.ReadThrough() != 6 {
		t.Fatal("a hand-off past the bound was taken")
	}
}

// A read that finds its range trimmed strands the members that had not
// read it, only them, and moves the window past the gap.
func TestWindowRetentionGap(t *testing.T) {
	c := newCache(cacheConfig{records: 100, bytes: 1 << 30, batch: 100, windows: 1}, 10)
	low, high := at("low", 10), at("high", 40)
	c.Join(low)
	c.Join(high)
	p, _ := c.Plan(time.Time{}, true, false)
	stranded := c.Gap(p, 30)
	if !slices.Equal(stranded, []Member{low}) || c.Window(low) != nil || c.Window(high) == nil {
		t.Fatalf("stranded %v", stranded)
	}
	if c.ReadThrough() != 30 {
		t.Fatalf("read through %d after the gap, want 30", c.ReadThrough())
	}
	// A plan that no longer matches its window changes nothing.
	if got := c.Gap(p, 50); got != nil || c.ReadThrough() != 30 {
		t.Fatalf("a stale plan stranded %v, read through %d", got, c.ReadThrough())
	}
	if err := c.Admit(p, records(11, 12)); err == nil {
		t.Fatal("a stale plan was admitted")
	}
}
