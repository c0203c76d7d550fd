package apiconv_test

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/stream"
)

// everyFieldSet fails the test if a field of v (a struct, with the
// structs of its slices) is zero wherever it occurs: a field the library
// adds to its stats and the sample lacks would cross the wire unseen.
func everyFieldSet(t *testing.T, v any) {
	t.Helper()
	set := map[string]bool{}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		set[path] = set[path] || !v.IsZero()
		switch v.Kind() {
		case reflect.Struct:
			if _, ok := v.Interface().(time.Time); !ok {
				for i := range v.NumField() {
					walk(path+"."+v.Type().Field(i).Name, v.Field(i))
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(path, v.Index(i))
			}
		}
	}
	walk(reflect.TypeOf(v).Name(), reflect.ValueOf(v))
	for path, ok := range set {
		if !ok {
			t.Errorf("%s is zero throughout the sample", path)
		}
	}
}

// The stats of a partition cross the wire whole, each field of the
// library's, windows and subscriptions with their window, and come back
// equal: a subscription that reads no window comes back with Window -1,
// not 0 (the first window's index).
func TestConsumerPartitionStatsRoundTrip(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 8000, time.UTC)
	ps := sluice.StreamPartitionStats{Partition: 3, Epoch: 7, Read: 900, ProposedCheckpoint: 120, StoredCheckpoint: 110,
		CachedRecords: 96, CachedBytes: 48_000,
		Windows: []sluice.StreamCacheWindow{
			{Start: 111, End: 140, Records: 30, Bytes: 15_000, Members: 1, Room: 0, Wanted: 12, Stream: "shop/slow"},
			{Start: 835, End: 900, Records: 66, Bytes: 33_000, Head: true, Members: 2, Room: 20, Wanted: 0},
		},
		Splits: 2, Merges: 1, RehydrationReads: 5, RehydratedRecords: 80,
		Reclaimed: 9, Resets: 3, ReadsAvoided: 40, DuplicateReads: 6, RetentionGaps: 1, LaggingHeld: 12,
		Subscriptions: []stream.SubscriptionStats{
			{ID: "a", Consumer: "fast", Position: 880, Cursor: 895, Handled: true, InFlight: 2, Fault: "f", Window: 1},
			{ID: "b", Consumer: "slow", Position: 110, Cursor: 110, Handled: true, InFlight: 1, Fault: "f", Window: 0},
			{ID: "c", Consumer: "gone", Position: 50, Cursor: 50, Handled: true, InFlight: 1, Fault: "retention gap", Window: -1},
		},
		SavedAt: at, TrimmedAt: at.Add(time.Second), Stopped: "fenced"}
	everyFieldSet(t, ps)

	wire, err := proto.Marshal(apiconv.ConsumerPartitionStats(ps))
	if err != nil {
		t.Fatal(err)
	}
	var back sluicev1.ConsumerPartitionStats
	if err := proto.Unmarshal(wire, &back); err != nil {
		t.Fatal(err)
	}
	if got := apiconv.FromConsumerPartitionStats(&back); !reflect.DeepEqual(got, ps) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, ps)
	}
	if back.Subscriptions[2].Window != nil {
		t.Errorf("a subscription without a window is sent with window %d", back.Subscriptions[2].GetWindow())
	}

	// A server that sends no window (one before windows, or a
	// subscription it does not handle) means none.
	old := apiconv.FromConsumerPartitionStats(&sluicev1.ConsumerPartitionStats{
		Subscriptions: []*sluicev1.ConsumerSubscriptionStats{{Id: "a"}}})
	if len(old.Subscriptions) != 1 || old.Subscriptions[0].Window != -1 || old.Windows != nil {
		t.Errorf("stats without windows convert to %+v, want Window -1", old)
	}
}
