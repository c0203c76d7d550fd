package server_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/server"
)

// cacheNodes are stream nodes with a cache small enough that a few
// hundred events fill it many times over.
func cacheNodes() sluice.StreamProcessorOptions {
	o := streamNodes
	o.CacheRecords, o.ReadBatch = 64, 16
	return o
}

// lagging is a consumer the server runs whose cache split: one
// subscription holds its first event, the other got past it.
type lagging struct {
	partition  int32
	fast, slow sluice.StreamSubscription
	// slowAt is the position of the event slow holds.
	slowAt int64
}

// startLagging runs consumer "reader" through e's server (started with
// cacheNodes) with two subscriptions on one partition: slow, whose
// handler holds its first event until the test ends, and fast, which
// then gets three times the cache's capacity of events. It waits until
// the server's node shows the partition's cache split in two windows.
func startLagging(t *testing.T, e *env) lagging {
	t.Helper()
	ctx := t.Context()
	c := e.remote(t, nil)
	fastID := sluice.StreamID{Namespace: "shop", Key: "fast"}
	part := sluice.PartitionOf(fastID, e.lib.StreamPartitions())
	slowID := sluice.StreamID{Namespace: "shop"}
	for i := 0; ; i++ {
		slowID.Key = fmt.Sprint("slow", i)
		if sluice.PartitionOf(slowID, e.lib.StreamPartitions()) == part {
			break
		}
	}
	l := lagging{partition: part}
	var err error
	if l.fast, err = c.Subscribe(ctx, fastID, "reader", sluice.FromNow()); err != nil {
		t.Fatal(err)
	}
	if l.slow, err = c.Subscribe(ctx, slowID, "reader", sluice.FromNow()); err != nil {
		t.Fatal(err)
	}
	got := newEvents()
	hold := make(chan struct{})
	startRemote(t, c, "", func(p *client.StreamProcessor) {
		p.Handle("reader", func(ctx context.Context, ev *sluice.StreamEvent) error {
			if ev.Key == slowID.Key {
				select {
				case <-hold:
				case <-ctx.Done():
				}
				return ctx.Err()
			}
			got.add(ev)
			return nil
		}, &sluice.ConsumerOptions{DeliveryTimeout: 10 * time.Minute})
	})
	t.Cleanup(func() { close(hold) }) // before the processor stops
	var fastAt []int64
	for i := range 24 {
		pos, err := e.lib.Publish(ctx, fastID, slices.Repeat([]sluice.Event{{Body: []byte("f")}}, 10)...)
		if err != nil {
			t.Fatal(err)
		}
		fastAt = append(fastAt, pos...)
		pos, err = e.lib.Publish(ctx, slowID, sluice.Event{Body: []byte("s")}, sluice.Event{Body: []byte("s")})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			l.slowAt = pos[0]
		}
	}
	waitFor(t, "fast to get its 240 events", 2*time.Minute, func() bool {
		return slices.Equal(firstSeen(got.positions(l.fast.ID, fastID.Key)), fastAt)
	})
	waitFor(t, "the server's node to show the split", 30*time.Second, func() bool {
		ps, ok := consumerPartition(t, c, part)
		return ok && len(ps.Windows) >= 2 && ps.Splits >= 1
	})
	return l
}

// consumerPartition returns reader's stats of a partition on the
// server's node, through the API.
func consumerPartition(t *testing.T, c *client.Client, part int32) (sluice.StreamPartitionStats, bool) {
	t.Helper()
	_, stats, err := c.ConsumerStats(t.Context(), "reader")
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range stats {
		if ps.Partition == part {
			return ps, true
		}
	}
	return sluice.StreamPartitionStats{}, false
}

// subscriptionWindow returns the window a subscription reads in ps (-2:
// it is not there).
func subscriptionWindow(ps sluice.StreamPartitionStats, id string) int {
	for _, s := range ps.Subscriptions {
		if s.ID == id {
			return s.Window
		}
	}
	return -2
}

// metricValue returns the value of the series of name with exactly
// labels in a scrape's body.
func metricValue(t *testing.T, body, name, labels string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s{%s}:\n%s", name, labels, body)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// subscriptionStats returns a subscription's stats in ps.
func subscriptionStats(t *testing.T, ps sluice.StreamPartitionStats, id string) stream.SubscriptionStats {
	t.Helper()
	for _, s := range ps.Subscriptions {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no subscription %s in %+v", id, ps)
	return stream.SubscriptionStats{}
}

// A consumer whose cache split shows it through the API and on
// /metrics: two windows, the slow subscription in the lagging one and
// the fast one in the head window, a split, the records held within the
// cache's bound, the slow subscription's cursor past the event it
// holds, each window's room and wanted records, and the cache's
// counters.
func TestStreamCacheMetrics(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{StreamNodes: cacheNodes()})
		l := startLagging(t, e)
		c := e.remote(t, nil)

		ps, _ := consumerPartition(t, c, l.partition)
		slowWin, fastWin := subscriptionWindow(ps, l.slow.ID), subscriptionWindow(ps, l.fast.ID)
		if fastWin != len(ps.Windows)-1 || !ps.Windows[fastWin].Head || slowWin < 0 || slowWin >= fastWin ||
			ps.Windows[slowWin].Start > l.slowAt || ps.StoredCheckpoint >= l.slowAt || ps.CachedRecords > 64 {
			t.Fatalf("through the API: %+v; want slow (holding %d) in a lagging window, fast in the head window", ps, l.slowAt)
		}
		// slow's position stops short of the event it holds; its cursor
		// examined it.
		if s := subscriptionStats(t, ps, l.slow.ID); s.Position >= l.slowAt || s.Cursor < l.slowAt {
			t.Errorf("slow: position %d, cursor %d; want the position below %d and the cursor at or past it", s.Position, s.Cursor, l.slowAt)
		}
		if s := subscriptionStats(t, ps, l.fast.ID); s.Cursor < s.Position {
			t.Errorf("fast: cursor %d behind its position %d", s.Cursor, s.Position)
		}

		_, body := scrape(t, e, "")
		labels := fmt.Sprintf(`consumer="reader",partition="%d"`, l.partition)
		if n := metricValue(t, body, "sluice_stream_cache_windows", labels); n < 2 {
			t.Errorf("sluice_stream_cache_windows = %v, want 2 or more", n)
		}
		if n := metricValue(t, body, "sluice_stream_cache_splits_total", labels); n < 1 {
			t.Errorf("sluice_stream_cache_splits_total = %v, want 1 or more", n)
		}
		if n := metricValue(t, body, "sluice_stream_cache_resident_records", labels); n < 1 || n > 64 {
			t.Errorf("sluice_stream_cache_resident_records = %v, want 1 to 64", n)
		}
		if n := metricValue(t, body, "sluice_stream_cache_resident_bytes", labels); n <= 0 {
			t.Errorf("sluice_stream_cache_resident_bytes = %v", n)
		}
		if n := metricValue(t, body, "sluice_stream_cache_window_records", labels+`,window="0"`); n < 1 {
			t.Errorf("the lagging window holds %v records, want its held event at least", n)
		}
		for _, name := range []string{"sluice_stream_cache_merges_total", "sluice_stream_cache_rehydration_reads_total",
			"sluice_stream_cache_rehydrated_records_total", "sluice_stream_cache_resets_total",
			"sluice_stream_cache_reads_avoided_total", "sluice_stream_cache_duplicate_reads_total",
			"sluice_stream_cache_reclaimed_records_total", "sluice_stream_cache_retention_gaps_total",
			"sluice_stream_cache_lagging_held_total"} {
			if n := metricValue(t, body, name, labels); n < 0 {
				t.Errorf("%s = %v", name, n)
			}
		}
		// Room and wanted of each window, the head one's included.
		for _, w := range []string{"0", strconv.Itoa(len(ps.Windows) - 1)} {
			for _, name := range []string{"sluice_stream_cache_window_room", "sluice_stream_cache_window_wanted"} {
				if n := metricValue(t, body, name, labels+`,window="`+w+`"`); n < 0 || n > 64 {
					t.Errorf("%s{window=%q} = %v, want 0 to 64", name, w, n)
				}
			}
		}
		// The windows may have moved since the API call, not the order of
		// the two subscriptions' windows.
		slow := metricValue(t, body, "sluice_stream_subscription_cache_window", labels+`,subscription="`+l.slow.ID+`"`)
		fast := metricValue(t, body, "sluice_stream_subscription_cache_window", labels+`,subscription="`+l.fast.ID+`"`)
		if slow < 0 || fast <= slow {
			t.Errorf("on /metrics slow reads window %v and fast %v; want slow's below fast's", slow, fast)
		}
		for _, want := range []string{"# TYPE sluice_stream_cache_splits_total counter", "# TYPE sluice_stream_cache_windows gauge",
			"# TYPE sluice_stream_cache_resets_total counter", "# TYPE sluice_stream_cache_window_room gauge",
			"# TYPE sluice_stream_cache_window_wanted gauge"} {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(body) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
}
