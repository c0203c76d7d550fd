package engine

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Hub wakes watchers of a key (a queue or a partition of one tenant). A
// signal reaches every current watcher of its key; a watcher that has not
// yet taken its previous wake-up keeps just one, so signalling never
// blocks. Tails of a partition also get the records its appends commit.
type Hub struct {
	origin   string
	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
	tails    map[string]map[*tail]struct{}
	// dead holds the observers of dead-letterings, by registration;
	// deadMu is held for reading while they are called, so that a stop
	// returns only once its observer will not be called again.
	deadMu sync.RWMutex
	dead   map[*func(store.DeadLettered)]store.Tenant
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{
		origin:   strconv.FormatUint(rand.Uint64(), 36),
		watchers: make(map[string]map[chan struct{}]struct{}),
		tails:    make(map[string]map[*tail]struct{}),
		dead:     make(map[*func(store.DeadLettered)]store.Tenant),
	}
}

// ObserveDeadLetters registers fn for the dead-letterings of tenant t
// (see store.DeadLetterObserver) until stop.
func (h *Hub) ObserveDeadLetters(t store.Tenant, fn func(store.DeadLettered)) (stop func()) {
	key := &fn
	h.deadMu.Lock()
	h.dead[key] = t
	h.deadMu.Unlock()
	return func() {
		h.deadMu.Lock()
		delete(h.dead, key)
		h.deadMu.Unlock()
	}
}

// DeadLettered tells the observers of each note's tenant about it.
func (h *Hub) DeadLettered(notes []store.DeadLettered) {
	if len(notes) == 0 {
		return
	}
	h.deadMu.RLock()
	defer h.deadMu.RUnlock()
	for _, d := range mergeNotes(notes) {
		for fn, t := range h.dead {
			if t == d.Tenant {
				(*fn)(d)
			}
		}
	}
}

// mergeNotes adds up the notes of one tenant, queue and reason (a group
// of settles, or an arrival's copies by description, make several), in
// the order each first appears.
func mergeNotes(notes []store.DeadLettered) []store.DeadLettered {
	if len(notes) == 1 {
		return notes
	}
	type key struct {
		t             store.Tenant
		queue, reason string
	}
	at := make(map[key]int, len(notes))
	var out []store.DeadLettered
	for _, d := range notes {
		k := key{d.Tenant, d.Queue, d.Reason}
		if i, ok := at[k]; ok {
			out[i].Count += d.Count
			continue
		}
		at[k] = len(out)
		out = append(out, d)
	}
	return out
}

// NotifyPayload is what a backend sends other processes to signal key:
// the key behind this hub's origin, so that the hub's own listener can
// drop the echo of a signal its watchers already had at commit. (An echo
// would wake every watcher a second time, for nothing.)
func (h *Hub) NotifyPayload(key string) string {
	return h.origin + "|" + key
}

// SignalRemote signals the key of a payload another hub sent. A payload
// of this hub, or anything not shaped like a payload, is ignored.
func (h *Hub) SignalRemote(payload string) {
	origin, key, ok := strings.Cut(payload, "|")
	if !ok || origin == h.origin || !ValidKey(key) {
		return
	}
	h.Signal(key)
}

// Watch returns a channel woken by Signal(key) and a function that stops
// the watch.
func (h *Hub) Watch(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	set := h.watchers[key]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		h.watchers[key] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(set, ch)
			if len(set) == 0 && h.watchers[key] != nil && len(h.watchers[key]) == 0 {
				delete(h.watchers, key)
			}
			h.mu.Unlock()
		})
	}
}

// Signal wakes the watchers of key, and its tails to read.
func (h *Hub) Signal(key string) {
	h.mu.Lock()
	for ch := range h.watchers[key] {
		wake(ch)
	}
	for t := range h.tails[key] {
		t.mark()
	}
	h.mu.Unlock()
}

// Appended wakes the watchers of a partition's key after a commit
// appended records to it, and hands its tails the records, which recs
// makes (once, and only if there is a tail).
func (h *Hub) Appended(key string, recs func() []sluicetype.Record) {
	h.mu.Lock()
	for ch := range h.watchers[key] {
		wake(ch)
	}
	tails := slices.Collect(maps.Keys(h.tails[key]))
	h.mu.Unlock()
	if len(tails) == 0 {
		return
	}
	rs := recs()
	for _, t := range tails {
		t.add(rs)
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Tail returns a tail of key (a partition's), stopped by its Stop.
func (h *Hub) Tail(key string) store.Tail {
	t := &tail{ready: make(chan struct{}, 1)}
	h.mu.Lock()
	set := h.tails[key]
	if set == nil {
		set = make(map[*tail]struct{})
		h.tails[key] = set
	}
	set[t] = struct{}{}
	h.mu.Unlock()
	t.stop = func() {
		h.mu.Lock()
		delete(set, t)
		if len(set) == 0 && len(h.tails[key]) == 0 {
			delete(h.tails, key)
		}
		h.mu.Unlock()
	}
	return t
}

// Bounds of what a tail keeps for its follower.
const (
	maxTailRecords = 1024
	maxTailBytes   = 1 << 20
)

// tail keeps the records committed to a partition until its follower
// takes them, as one run of positions. Records that would not fit, or
// that do not follow the last one kept (groups of several committers may
// finish out of order), and any after them, are left for the follower to
// read; so are records it never got (a signal).
type tail struct {
	ready chan struct{}
	stop  func()
	once  sync.Once

	mu    sync.Mutex
	recs  []sluicetype.Record
	bytes int
	read  bool
}

func (t *tail) Ready() <-chan struct{} { return t.ready }

func (t *tail) Take() ([]sluicetype.Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	recs, read := t.recs, t.read
	t.recs, t.bytes, t.read = nil, 0, false
	return recs, read
}

func (t *tail) Stop() { t.once.Do(t.stop) }

// add keeps recs for the follower, unless it must read anyway.
func (t *tail) add(recs []sluicetype.Record) {
	t.mu.Lock()
	if !t.read {
		n := 0
		for i := range recs {
			n += len(recs[i].Payload) + len(recs[i].Key) + len(recs[i].Namespace)
		}
		switch {
		case len(t.recs) > 0 && recs[0].Position != t.recs[len(t.recs)-1].Position+1,
			len(t.recs)+len(recs) > maxTailRecords, t.bytes+n > maxTailBytes:
			t.read = true
		default:
			t.recs = append(t.recs, recs...)
			t.bytes += n
		}
	}
	t.mu.Unlock()
	wake(t.ready)
}

// mark tells the follower to read (after the records kept, which are
// still what they are).
func (t *tail) mark() {
	t.mu.Lock()
	t.read = true
	t.mu.Unlock()
	wake(t.ready)
}

// QueueKey is the hub key of a tenant's queue.
func QueueKey(t store.Tenant, queue string) string {
	return "q|" + t.Service + "|" + t.Provider + "|" + queue
}

// PartitionKey is the hub key of a tenant's partition log.
func PartitionKey(t store.Tenant, partition int32) string {
	return "p|" + t.Service + "|" + t.Provider + "|" + strconv.Itoa(int(partition))
}

// ValidKey reports whether s has the shape of a hub key.
func ValidKey(s string) bool {
	parts := strings.Split(s, "|")
	return len(parts) == 4 && (parts[0] == "q" || parts[0] == "p")
}
