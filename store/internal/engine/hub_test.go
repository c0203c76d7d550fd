package engine

import "testing"

// TestSignalRemote checks that a hub acts on another hub's payloads only:
// its own echo and ill-formed payloads wake no one.
func TestSignalRemote(t *testing.T) {
	h, other := NewHub(), NewHub()
	key := "q|svc|prov|orders"
	wake, stop := h.Watch(key)
	defer stop()
	woken := func() bool {
		select {
		case <-wake:
			return true
		default:
			return false
		}
	}
	for _, p := range []string{
		h.NotifyPayload(key),
		key,
		"",
		other.NotifyPayload("x|svc|prov|orders"),
		other.NotifyPayload("q|svc|prov"),
	} {
		h.SignalRemote(p)
		if woken() {
			t.Errorf("payload %q woke a watcher", p)
		}
	}
	h.SignalRemote(other.NotifyPayload(key))
	if !woken() {
		t.Error("another hub's payload did not wake the watcher")
	}
}
