package stream

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
)

func records(from, to int64) []sluicetype.Record {
	var out []sluicetype.Record
	for p := from; p <= to; p++ {
		out = append(out, sluicetype.Record{Position: p, Namespace: "ns", Key: "k", Payload: make([]byte, 100)})
	}
	return out
}

// The ring keeps records in order through growth, wrap-around, purges
// and resets, and admits no more than its bounds.
func TestRingCache(t *testing.T) {
	c := NewCache(200, 1<<30)
	if n, _ := c.Room(); n != 200 || c.First() != 1 || c.Next() != 1 {
		t.Fatalf("empty cache: room %d, first %d, next %d", n, c.First(), c.Next())
	}
	c.Add(records(1, 150)) // grows from 64 past 128
	c.Purge(100)
	c.Add(records(151, 250)) // wraps
	if n, _ := c.Size(); n != 150 {
		t.Fatalf("cache holds %d records, want 150", n)
	}
	if c.First() != 101 || c.Next() != 251 {
		t.Fatalf("first %d next %d, want 101 and 251", c.First(), c.Next())
	}
	for p := int64(101); p <= 250; p++ {
		if r, ok := c.Get(p); !ok || r.Position != p {
			t.Fatalf("Get(%d) = %v, %v", p, r, ok)
		}
	}
	for _, p := range []int64{100, 251, 0} {
		if _, ok := c.Get(p); ok {
			t.Fatalf("Get(%d) found a record the cache does not hold", p)
		}
	}
	if n, _ := c.Room(); n != 50 {
		t.Fatalf("room %d, want 50", n)
	}
	c.Add(records(251, 300))
	if n, _ := c.Room(); n != 0 {
		t.Fatalf("room %d in a full cache", n)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("adding to a full cache did not panic")
			}
		}()
		c.Add(records(301, 301))
	}()
	c.Reset(40)
	if n, b := c.Size(); n != 0 || b != 0 || c.First() != 41 || c.Next() != 41 {
		t.Fatalf("after Reset(40): %d records, %d bytes, first %d, next %d", n, b, c.First(), c.Next())
	}
	// A gap (records retention trimmed) is searched around.
	c.Add(append(records(41, 45), records(50, 52)...))
	if r, ok := c.Get(50); !ok || r.Position != 50 {
		t.Fatalf("Get(50) after a gap = %v, %v", r, ok)
	}
	if _, ok := c.Get(47); ok {
		t.Fatal("Get(47) found a record inside the gap")
	}
}

// The byte bound stops reads once reached.
func TestRingCacheBytes(t *testing.T) {
	one := records(1, 1)
	c := NewCache(1000, 10*recordSize(&one[0]))
	c.Add(records(1, 9))
	if n, b := c.Room(); n == 0 || b <= 0 {
		t.Fatalf("room %d records, %d bytes below the byte bound", n, b)
	}
	c.Add(records(10, 10))
	if n, _ := c.Room(); n != 0 {
		t.Fatalf("room %d at the byte bound", n)
	}
	c.Purge(5)
	if n, _ := c.Room(); n == 0 {
		t.Fatal("no room after a purge")
	}
}
