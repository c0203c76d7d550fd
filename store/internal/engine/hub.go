package engine

import (
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
	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{watchers: make(map[string]map[chan struct{}]struct{})}
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

// ValidKey reports whether s has the shape of a hub key, for backends that
// receive keys from other processes.
func ValidKey(s string) bool {
	parts := strings.Split(s, "|")
	return len(parts) == 4 && (parts[0] == "q" || parts[0] == "p")
}
