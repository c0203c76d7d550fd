package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// HoldCheckpoints locks the checkpoint rows of a tenant's partitions in
// a transaction of its own, as a client paused in the middle of a
// subscription's creation, a save or a trim holds them, and returns a
// function that rolls the transaction back.
type HoldCheckpoints func(ctx context.Context, tn store.Tenant) (release func(), err error)

// LeasesBesideDataLocks checks that lease renewals and acquisitions do
// not wait for a transaction holding partitions' checkpoint rows (the
// retention lock of the data path), while saves, which the checkpoint
// rows order with subscription creations and trims, still do. For the
// server backends: hold locks the rows with the backend's own SQL.
func LeasesBesideDataLocks(t *testing.T, b store.Backend, hold HoldCheckpoints) {
	ctx := t.Context()
	tn := newTenant()
	st, err := b.Store(tn)
	if err != nil {
		t.Fatal(err)
	}
	sub := newStreamSub(t, st, "ns", "", store.NoPartition, 0) // checkpoint rows of partitions 0 to 3
	const lease = 2 * time.Second
	a := leasePartitions(t, st, "node-a", lease, nil, 0, 1)
	if len(a) != 2 {
		t.Fatalf("node-a acquired %v", leased(a))
	}
	release, err := hold(ctx, tn)
	if err != nil {
		t.Fatalf("holding the checkpoint rows: %v", err)
	}
	defer func() {
		if release != nil {
			release()
		}
	}()

	// A save waits for the holder: the hold is real.
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = st.SaveProgress(sctx, []store.ProgressParams{{Partition: 0, Epoch: a[0].Epoch, Positions: map[string]int64{sub: 0}}})
	cancel()
	if err == nil {
		t.Fatal("SaveProgress did not wait for the transaction holding the checkpoint row")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("SaveProgress beside the held rows: %v", err)
	}

	// Renewals and acquisitions do not.
	lctx, cancel := context.WithTimeout(ctx, lease/2)
	defer cancel()
	start := time.Now()
	renewed, err := st.LeasePartitions(lctx, &store.PartitionLeaseParams{Node: "node-a", Renew: a, Duration: lease})
	if err != nil || len(renewed) != 2 {
		t.Fatalf("renewal beside held checkpoint rows = %v, %v (after %v)", leased(renewed), err, time.Since(start))
	}
	got, err := st.LeasePartitions(lctx, &store.PartitionLeaseParams{Node: "node-b", Acquire: []int32{2, 3}, Duration: lease})
	if err != nil || len(got) != 2 {
		t.Fatalf("acquisition beside held checkpoint rows = %v, %v (after %v)", leased(got), err, time.Since(start))
	}
	if err := st.ReleasePartitions(lctx, "node-b", got); err != nil {
		t.Fatalf("release beside held checkpoint rows: %v", err)
	}

	release()
	release = nil
	res, err := st.SaveProgress(ctx, []store.ProgressParams{{Partition: 0, Epoch: a[0].Epoch, Positions: map[string]int64{sub: 0}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("SaveProgress once the rows are free: %v, %+v", err, res)
	}
}
