package sluice_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store"
)

// tenantStore returns the store of the client's tenant, to look at what
// the library does not show (a partition's retention watermark).
func tenantStore(t *testing.T, kind, service string) store.Store {
	t.Helper()
	st, err := shared.Backend(t, kind).Store(store.Tenant{Service: service, Provider: sluice.DefaultProvider})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitFor polls cond every 20 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %s: %s", within, what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Age retention acts on time: records a consumer is done with go once
// they are older than MaxAge, although nothing is published after them
// (the partition is quiet, its checkpoint no longer moves).
func TestStreamAgeRetentionOnQuietPartition(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		const maxAge = 2 * time.Second
		if err := c.SetStreamRetention(ctx, "quiet", sluice.StreamRetention{MaxAge: maxAge}); err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("c", col.handle, &sluice.ConsumerOptions{Namespace: "quiet"})
		})
		id := sluice.StreamID{Namespace: "quiet", Key: "k"}
		bodies := make([]string, 50)
		for i := range bodies {
			bodies[i] = "e"
		}
		published := time.Now()
		pos := publish(t, c, id, bodies...)
		col.waitCount(t, 50, 30*time.Second)
		st := tenantStore(t, kind, service)
		part := sluice.PartitionOf(id, c.StreamPartitions())
		info, err := st.PartitionInfo(ctx, part)
		if err != nil {
			t.Fatal(err)
		}
		if young := time.Since(published) < maxAge; young && info.Trimmed != 0 {
			t.Fatalf("records younger than %v were trimmed through %d", maxAge, info.Trimmed)
		}
		last := pos[len(pos)-1]
		waitFor(t, 30*time.Second, "the consumed records past their age are not trimmed", func() (bool, string) {
			info, err := st.PartitionInfo(ctx, part)
			if err != nil {
				t.Fatal(err)
			}
			return info.Trimmed == last, "trimmed through " + itoa(info.Trimmed) + ", want " + itoa(last)
		})
		if age := time.Since(published); age < maxAge {
			t.Fatalf("trimmed %v after publishing, before MaxAge %v", age, maxAge)
		}
	})
}

// A processor's stats show both checkpoints, each for what it is: the
// one its agent proposes (its consumers' lowest position) and the one
// stored, which a subscription no node handles holds back.
func TestStreamStatsCheckpoints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		id := sluice.StreamID{Namespace: "cp", Key: "k"}
		// "idle" is handled by no processor: it holds the checkpoint at 0.
		if _, err := c.Subscribe(ctx, id, "idle", sluice.FromNow()); err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		p := startStreamProcessor(t, c, &sluice.StreamProcessorOptions{ProgressInterval: 20 * time.Millisecond}, func(p *sluice.StreamProcessor) {
			p.Handle("c", col.handle, &sluice.ConsumerOptions{Namespace: "cp"})
		})
		pos := publish(t, c, id, "1", "2", "3", "4", "5")
		col.waitCount(t, 5, 30*time.Second)
		part := sluice.PartitionOf(id, c.StreamPartitions())
		last := pos[len(pos)-1]
		waitFor(t, 30*time.Second, "the stats do not show both checkpoints", func() (bool, string) {
			for _, ps := range p.Stats() {
				if ps.Partition == part {
					return ps.ProposedCheckpoint == last && ps.StoredCheckpoint == 0,
						"proposed " + itoa(ps.ProposedCheckpoint) + ", stored " + itoa(ps.StoredCheckpoint) + "; want " + itoa(last) + " and 0"
				}
			}
			return false, "the partition is not pulled"
		})
		cs, err := c.ClusterStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := cs.Partitions[part].Checkpoint; got != 0 {
			t.Fatalf("ClusterStatus shows checkpoint %d, want 0 (stored)", got)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
