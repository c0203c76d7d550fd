package stream

import "github.com/sluicehq/sluice/sluicetype"

// Cache holds a window of one partition's log between the agent's reads
// and its subscriptions' cursors. It is bounded in records and bytes: the
// agent reads only while it has room, and purges records once every
// subscription it serves is done with them, so a slow subscription
// pauses reading instead of making the cache drop anything. The windowed
// recoverable cache will implement it too.
type Cache interface {
	// Add appends records that follow the last one added.
	Add(recs []sluicetype.Record)
	// Room says how many more records may be read now, and about how many
	// bytes; 0 records when full.
	Room() (records int, bytes int64)
	// Get returns the record at a position when it is resident.
	Get(pos int64) (*sluicetype.Record, bool)
	// First is the position of the first record held, or Next when the
	// cache is empty.
	First() int64
	// Next is the position after the last record added.
	Next() int64
	// Purge drops the records at or below a position.
	Purge(through int64)
	// Reset drops every record; the next one added follows after.
	Reset(after int64)
	// Size reports the records and bytes held.
	Size() (records int, bytes int64)
}

// recordOverhead approximates what a cached record costs beside its
// payload, key, namespace and properties.
const recordOverhead = 128

// recordSize is what a record counts against a cache's byte bound.
func recordSize(r *sluicetype.Record) int64 {
	n := len(r.Payload) + len(r.Namespace) + len(r.Key) + recordOverhead
	for k, v := range r.Properties {
		n += len(k) + len(v) + 32
	}
	return int64(n)
}

// ringCache is a contiguous window of the log in a ring buffer that
// grows as it fills, up to its bound: a cache costs what it holds.
type ringCache struct {
	maxRecords int
	maxBytes   int64
	buf        []sluicetype.Record
	head, n    int   // index of the first record, and how many
	first      int64 // position of the first record (when n > 0)
	next       int64 // position after the last record added
	bytes      int64
}

// NewCache returns a contiguous cache of at most maxRecords records and
// about maxBytes bytes: it stops admitting reads once maxBytes is
// reached, so it may exceed it by one read's records.
func NewCache(maxRecords int, maxBytes int64) Cache {
	return &ringCache{maxRecords: maxRecords, maxBytes: maxBytes, buf: make([]sluicetype.Record, min(maxRecords, 64)), next: 1}
}

func (c *ringCache) Add(recs []sluicetype.Record) {
	for i := range recs {
		if c.n == len(c.buf) {
			c.grow()
		}
		if c.n == 0 {
			c.first = recs[i].Position
		}
		c.buf[(c.head+c.n)%len(c.buf)] = recs[i]
		c.n++
		c.bytes += recordSize(&recs[i])
		c.next = recs[i].Position + 1
	}
}

// grow doubles the ring, up to its bound, keeping the records in order.
func (c *ringCache) grow() {
	if c.n == c.maxRecords {
		panic("stream: cache overfilled")
	}
	buf := make([]sluicetype.Record, min(2*len(c.buf), c.maxRecords))
	for i := range c.n {
		buf[i] = c.buf[(c.head+i)%len(c.buf)]
	}
	c.buf, c.head = buf, 0
}

func (c *ringCache) Room() (int, int64) {
	if c.bytes >= c.maxBytes {
		return 0, 0
	}
	return c.maxRecords - c.n, c.maxBytes - c.bytes
}

func (c *ringCache) Get(pos int64) (*sluicetype.Record, bool) {
	if c.n == 0 || pos < c.first {
		return nil, false
	}
	// Positions are gap-free, except where retention trimmed a range the
	// agent then skipped: search from the offset they would have.
	i := int(pos - c.first)
	if i >= c.n {
		i = c.n - 1
	}
	for ; i >= 0; i-- {
		r := &c.buf[(c.head+i)%len(c.buf)]
		if r.Position == pos {
			return r, true
		}
		if r.Position < pos {
			return nil, false
		}
	}
	return nil, false
}

func (c *ringCache) First() int64 {
	if c.n == 0 {
		return c.next
	}
	return c.first
}

func (c *ringCache) Next() int64 { return c.next }

func (c *ringCache) Purge(through int64) {
	for c.n > 0 && c.buf[c.head].Position <= through {
		c.bytes -= recordSize(&c.buf[c.head])
		c.buf[c.head] = sluicetype.Record{}
		c.head = (c.head + 1) % len(c.buf)
		c.n--
		if c.n > 0 {
			c.first = c.buf[c.head].Position
		}
	}
}

func (c *ringCache) Reset(after int64) {
	for c.n > 0 {
		c.buf[c.head] = sluicetype.Record{}
		c.head = (c.head + 1) % len(c.buf)
		c.n--
	}
	c.head, c.bytes, c.next = 0, 0, after+1
}

func (c *ringCache) Size() (int, int64) { return c.n, c.bytes }
