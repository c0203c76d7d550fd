package engine

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/store"
)

// Hub wakes watchers of a key (a queue or a partition of one tenant). A
// signal reaches every current watcher of its key; a watcher that has not
// yet taken its previous wake-up keeps just one, so signalling never
// blocks.
type Hub struct {
	origin   string
	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{
		origin:   strconv.FormatUint(rand.Uint64(), 36),
		watchers: make(map[string]map[chan struct{}]struct{}),
	}
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

// Signal wakes the watchers of key.
func (h *Hub) Signal(key string) {
	h.mu.Lock()
	for ch := range h.watchers[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
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
