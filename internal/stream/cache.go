package stream

import (
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// Cache holds what an agent has read of its partition's log, between its
// reads and its subscriptions' cursors, as resident windows: ranges of
// the log, each read after its end. Every subscription that reads here
// is a member of one window and walks it; the cache reads for a window,
// purges what its members are done with, and bounds what it holds in
// records and bytes. It never touches a member's cursor or safe
// position, so no cache operation moves the checkpoint (the agent
// derives it from safe positions alone).
type Cache interface {
	// Join makes m a member of a window that covers its cursor, or that
	// will read up to it. When none does, it gets a window of its own, or
	// at the window limit the policy applies: Share moves the nearest
	// window above m's cursor back to it (its members wait while it reads
	// again), Fault refuses m with ErrWindowLimit.
	Join(m Member) error
	// Leave drops m from its window (it halted, moved or went).
	Leave(m Member)
	// Window is m's window (nil when m has not joined).
	Window(m Member) *window
	// Plan returns the next read due: the head window's when head is set
	// (the agent paces it), then, when lagging is set, that of a window
	// whose members need more. A plan's Max is 0 when the window is full.
	Plan(now time.Time, head, lagging bool) (ReadPlan, bool)
	// Admit adds what a plan read to its window, all or nothing: records
	// that do not follow the window's end, or a plan the window no longer
	// matches, change nothing and fail.
	Admit(p ReadPlan, recs []sluicetype.Record) error
	// Follow adds records the partition's tail handed over to the head
	// window, if they follow its end and fit. It reports whether the head
	// window has everything up to the last of them.
	Follow(recs []sluicetype.Record) bool
	// Backoff makes a lagging window's reads wait until then (its read
	// failed).
	Backoff(p ReadPlan, until time.Time)
	// Gap handles a plan's read that found records retention deleted
	// through trimmed: it returns the members of the plan's window that
	// had not read them, which it drops, and moves the window past them.
	// Other windows are untouched.
	Gap(p ReadPlan, trimmed int64) []Member
	// Purge drops, in each window, the records all its members are done
	// with, and the windows no one reads but the head.
	Purge()
	// Rebalance reshapes the windows after a purge: it merges those that
	// meet, gives a starved window its reserve back from another's
	// read-ahead, and splits one under pressure. It reports whether it changed
	// any, and the members the Fault policy refuses.
	Rebalance() (changed bool, refused []Member)
	// Lookahead bounds how far a member walks past its safe position
	// (0: no bound).
	Lookahead() int64
	// ReadThrough is the last position the head window read: the
	// checkpoint never passes it.
	ReadThrough() int64
	// Size reports the records and bytes held.
	Size() (records int, bytes int64)
	// Stats describes the windows and counts what the cache did; Index
	// is the index of m's window there (-1: none).
	Stats() CacheStats
	Index(m Member) int
	// Lagging reports whether m is in a window other than the head one.
	Lagging(m Member) bool
}

// Member is a subscription as the cache sees it.
type Member interface {
	// Cursor: every record at or below it was examined.
	Cursor() int64
	// Safe: every record at or below it is done; never past Cursor.
	Safe() int64
	// LastMatch is the position of the last record it queued (0: none).
	LastMatch() int64
	// Matches reports whether it wants r (it would queue it).
	Matches(r *sluicetype.Record) bool
}

// streamMember is a Member that may read one stream only: Stream
// reports it (ok false: it reads a whole namespace).
type streamMember interface {
	Stream() (namespace, key string, ok bool)
}

// ReadPlan is a read the cache asks for: at most Max records after
// After, for one window.
type ReadPlan struct {
	w     *window
	After int64
	Max   int
	// Namespace and Key, when set, read that stream's records only,
	// through Through (the next window's start, less one): a lagging
	// window whose members all read that one stream passes over the
	// partition's other records (see window.filtered).
	Namespace, Key string
	Through        int64
	// Head: the head window's read (read ahead, paced by the agent);
	// otherwise a lagging window's, for members that need more.
	Head bool
	// Probe: a read past a full head window, which the cache admits
	// nothing of: it looks for a record that a member waiting at the
	// window's end wants (that member is then held back: see splitPoint).
	Probe bool
}

// CacheStats describe a cache.
type CacheStats struct {
	Windows []WindowStats
	// Splits and Merges count the windows split off and merged;
	// RehydrationReads and RehydratedRecords the reads of windows other
	// than the head (the log read again for lagging members) and the
	// records they brought.
	Splits, Merges                      int64
	RehydrationReads, RehydratedRecords int64
	// Reclaimed counts the records dropped from a window's read-ahead
	// to give another window its reserve (read again later).
	Reclaimed int64
	// Resets counts the windows the Share policy moved back to a
	// subscription's position at the window limit (their members read
	// again what they had passed).
	Resets int64
	// ReadsAvoided counts the records a lagging window took over from
	// the window above it when the two met, rather than reading them
	// again; DuplicateReads the records a read returned that another
	// window held already (dropped: a record is held once).
	ReadsAvoided, DuplicateReads int64
}

// WindowStats describe one resident window: it covers positions Start
// through End (empty when End is Start-1), holding Records records of
// about Bytes bytes. Head is the window that reads ahead; Members counts
// the subscriptions that read it.
type WindowStats struct {
	Start, End int64
	Records    int
	Bytes      int64
	Head       bool
	Members    int
	// Room is how many records it may read now, what the budget leaves it
	// once the other windows' unused reserves are set aside (0: full, its
	// reads wait for a purge). Wanted is how many records past its end
	// its members may walk now (0: none has walked all of it); a window
	// with Wanted and no Room is under pressure.
	Room, Wanted int
	// Stream names the one stream ("namespace/key") whose records the
	// window reads, when every member reads that stream only (see
	// ReadPlan.Namespace); empty: the whole partition's.
	Stream string
}

// entry is one resident record. It is never changed once read, so a
// stream queue holds it by reference: a purge or a reset of the window
// does not change what is in delivery.
type entry struct {
	rec  sluicetype.Record
	size int64
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
