package stream

import (
	"cmp"
	"slices"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// window is one resident range of a partition's log: it covers positions
// start through end (empty when end is start-1), and holds the records
// read there, ascending. A position of the range without a record is a
// hole: retention deleted it, and a cursor passes it.
type window struct {
	start, end int64
	entries    []*entry
	bytes      int64
	members    []Member
	// retryAt delays a lagging window's reads after one failed.
	retryAt time.Time
	// admitted counts the records read into the window since it was made
	// by a split or a merge: a window splits again only after some.
	admitted int64
	// filtered is the last position through which the window may lack
	// records of other streams than filter (it read that one stream for
	// its members, which all read it only): their positions there are
	// holes for it, so a member that reads anything else joins or merges
	// into it only at or past filtered. 0: it holds every record in its
	// range.
	filtered int64
	filter   streamID
}

// streamID names a stream.
type streamID struct{ namespace, key string }

// filters reports whether w holds only some streams' records where m
// would walk it.
func (w *window) filters(m Member) bool {
	if w.filtered < w.start || m.Cursor() >= w.filtered {
		return false
	}
	s, ok := streamOf(m)
	return !ok || s != w.filter
}

// streamOf is the one stream m reads, if it reads one only.
func streamOf(m Member) (streamID, bool) {
	if sm, ok := m.(streamMember); ok {
		if ns, key, ok := sm.Stream(); ok {
			return streamID{ns, key}, true
		}
	}
	return streamID{}, false
}

func (w *window) size() (int, int64) { return len(w.entries), w.bytes }

// get returns the record at pos, when the window holds it.
func (w *window) get(pos int64) *entry {
	n := len(w.entries)
	if n == 0 || pos < w.entries[0].rec.Position || pos > w.entries[n-1].rec.Position {
		return nil
	}
	// Positions are gap-free but for holes: look where pos would be
	// first.
	if i := int(pos - w.entries[0].rec.Position); i < n && w.entries[i].rec.Position == pos {
		return w.entries[i]
	}
	i, ok := slices.BinarySearchFunc(w.entries, pos, func(e *entry, pos int64) int { return cmp.Compare(e.rec.Position, pos) })
	if !ok {
		return nil
	}
	return w.entries[i]
}

// add appends records that follow the window's end.
func (w *window) add(recs []sluicetype.Record) (records int, bytes int64) {
	for i := range recs {
		e := &entry{rec: recs[i], size: recordSize(&recs[i])}
		w.entries = append(w.entries, e)
		bytes += e.size
	}
	w.bytes += bytes
	w.end = recs[len(recs)-1].Position
	w.admitted += int64(len(recs))
	return len(recs), bytes
}

// dropBelow drops the records before pos, and reports how many and how
// many bytes.
func (w *window) dropBelow(pos int64) (records int, bytes int64) {
	k := 0
	for k < len(w.entries) && w.entries[k].rec.Position < pos {
		bytes += w.entries[k].size
		w.entries[k] = nil
		k++
	}
	w.entries = w.entries[k:]
	if len(w.entries) == 0 {
		w.entries = nil // let the array go
	}
	w.bytes -= bytes
	return k, bytes
}

// dropAbove drops the records after pos.
func (w *window) dropAbove(pos int64) (records int, bytes int64) {
	k := len(w.entries)
	for k > 0 && w.entries[k-1].rec.Position > pos {
		k--
		bytes += w.entries[k].size
		w.entries[k] = nil
		records++
	}
	w.entries = w.entries[:k]
	w.bytes -= bytes
	return records, bytes
}

func (w *window) remove(m Member) {
	if i := slices.Index(w.members, m); i >= 0 {
		w.members = slices.Delete(w.members, i, i+1)
	}
}

// reset empties the window and moves it to read after after.
func (w *window) reset(after int64) (records int, bytes int64) {
	records, bytes = len(w.entries), w.bytes
	clear(w.entries)
	w.entries, w.bytes = nil, 0
	w.start, w.end = after+1, after
	w.filtered = 0
	return records, bytes
}
