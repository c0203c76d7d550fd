package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Backlog sizes of LoadBacklog.
const (
	BacklogInFlight  = 4000
	BacklogScheduled = 2000
	BacklogReady     = 32
)

// LoadBacklog fills a new queue of st, for tests of what a lease costs:
// BacklogInFlight messages leased for an hour (sequence numbers from 1),
// then BacklogScheduled scheduled an hour ahead, then BacklogReady ready
// ones, the last sequence numbers.
func LoadBacklog(t *testing.T, st store.Store, queue string) {
	t.Helper()
	ctx := t.Context()
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: queue}); err != nil {
		t.Fatal(err)
	}
	batch := func(n int, at time.Time) []store.NewMessage {
		ms := make([]store.NewMessage, n)
		for i := range ms {
			ms[i] = store.NewMessage{Payload: []byte("x"), VisibleAt: at}
		}
		return ms
	}
	for range BacklogInFlight / 1000 {
		if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: queue, Messages: batch(1000, time.Time{})}); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Lease(ctx, &store.LeaseParams{Queue: queue, Max: 1000, Visibility: time.Hour}); err != nil || len(got) != 1000 {
			t.Fatalf("Lease: %d, %v", len(got), err)
		}
	}
	for _, ms := range [][]store.NewMessage{
		batch(BacklogScheduled/2, time.Now().Add(time.Hour)),
		batch(BacklogScheduled/2, time.Now().Add(time.Hour)),
		batch(BacklogReady, time.Time{}),
	} {
		if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: queue, Messages: ms}); err != nil {
			t.Fatal(err)
		}
	}
}
