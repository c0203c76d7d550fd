package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/stream"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// statsAPI answers consumerStats with fixed stats; the other methods of
// sluiceAPI are not called.
type statsAPI struct {
	sluiceAPI
	node  string
	parts []sluice.StreamPartitionStats
}

func (a statsAPI) consumerStats(context.Context, string) (string, []sluice.StreamPartitionStats, error) {
	return a.node, a.parts, nil
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got\n%s\nwant\n%s", name, got, want)
	}
}

// stream stats prints each partition's cache windows (the head one
// marked), splits, merges and resets, the records lagging windows read
// again, the reads avoided and duplicated, the records reclaimed and the
// retention gaps; each window's room and wanted records, its pressure
// and its stream; and each subscription with its cursor and the window
// it reads ("-" for none), in a table and as JSON (window absent for
// none).
func TestStreamStatsOutput(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	api := statsAPI{node: "node-1", parts: []sluice.StreamPartitionStats{
		{Partition: 3, Epoch: 7, Read: 900, ProposedCheckpoint: 120, StoredCheckpoint: 110, CachedRecords: 96, CachedBytes: 48_000,
			Windows: []sluice.StreamCacheWindow{
				{Start: 111, End: 140, Records: 30, Bytes: 15_000, Members: 1, Wanted: 12, Stream: "shop/slow"},
				{Start: 835, End: 900, Records: 66, Bytes: 33_000, Head: true, Members: 1, Room: 20},
			},
			Splits: 2, Merges: 1, Resets: 3, RehydrationReads: 5, RehydratedRecords: 80, ReadsAvoided: 40, DuplicateReads: 6,
			Reclaimed: 9, RetentionGaps: 1, LaggingHeld: 14, SavedAt: at,
		},
		{Partition: 4, Epoch: 2, Read: 50, ProposedCheckpoint: 50, StoredCheckpoint: 40,
			Windows: []sluice.StreamCacheWindow{{Start: 51, End: 50, Head: true}}, Stopped: "fenced"},
	}}
	api.parts[0].Subscriptions = []stream.SubscriptionStats{
		{ID: "ns/shop/fast", Consumer: "fast", Position: 880, Cursor: 895, Handled: true, InFlight: 2, Window: 1},
		{ID: "ns/shop/slow", Consumer: "slow", Position: 110, Cursor: 110, Handled: true, InFlight: 1, Window: 0},
		{ID: "ns/shop/gone", Consumer: "gone", Position: 50, Cursor: 50, Handled: true, Fault: "retention gap", Window: -1},
	}
	api.parts[1].Subscriptions = []stream.SubscriptionStats{{ID: "ns/other/x", Consumer: "x", Position: 40, Cursor: 40, Window: -1}}

	for _, c := range []struct {
		json bool
		file string
	}{{false, "stream_stats.txt"}, {true, "stream_stats.json"}} {
		var out bytes.Buffer
		if err := opStreamStats().run(t.Context(), &env{api: api, json: c.json, stdout: &out}, []string{"shop"}); err != nil {
			t.Fatal(err)
		}
		golden(t, c.file, out.Bytes())
	}
}
