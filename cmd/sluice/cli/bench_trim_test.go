package cli

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store"
)

// trimAll leaves the partitions a scenario wrote to empty, through the
// store's own retention path (a checkpoint at the head, then
// TrimConsumed), and its lease on them released.
func TestBenchTrimAll(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := sluice.OpenBackend(ctx, filepath.Join(t.TempDir(), "bench.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	s, err := b.Store(store.Tenant{Service: "bench", Provider: "trim"})
	if err != nil {
		t.Fatal(err)
	}
	const parts = 3
	for p := range int32(parts) {
		recs := make([]store.NewRecord, 1500+int(p)) // more than one TrimConsumed batch
		for i := range recs {
			recs[i] = store.NewRecord{Namespace: "bench", Key: "k", Payload: []byte("x")}
		}
		for i := 0; i < len(recs); i += 500 {
			if _, err := s.Append(ctx, &store.AppendParams{Partition: p, Records: recs[i:min(i+500, len(recs))]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := &benchEnv{store: s}
	e.trimAll(ctx, parts)
	for p := range int32(parts) {
		info, err := s.PartitionInfo(ctx, p)
		if err != nil || info.Head != int64(1500+p) || info.Trimmed != info.Head {
			t.Errorf("partition %d after trimAll: %+v, %v; want every record trimmed", p, info, err)
		}
	}
	leases, err := s.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if l.Held {
			t.Errorf("lease %+v still held after trimAll", l)
		}
	}
}
