package server_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/internal/servertest"
)

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
		e := start(t, kind, server.Config{StreamNodes: servertest.CacheNodes()})
		l := servertest.StartLagging(t, e)
		c := e.Remote(t, nil)

		ps, _ := servertest.ConsumerPartition(t, c, l.Partition)
		slowWin, fastWin := subscriptionWindow(ps, l.Slow.ID), subscriptionWindow(ps, l.Fast.ID)
		if fastWin != len(ps.Windows)-1 || !ps.Windows[fastWin].Head || slowWin < 0 || slowWin >= fastWin ||
			ps.Windows[slowWin].Start > l.SlowAt || ps.StoredCheckpoint >= l.SlowAt || ps.CachedRecords > 64 {
			t.Fatalf("through the API: %+v; want slow (holding %d) in a lagging window, fast in the head window", ps, l.SlowAt)
		}
		// slow's position stops short of the event it holds; its cursor
		// examined it.
		if s := subscriptionStats(t, ps, l.Slow.ID); s.Position >= l.SlowAt || s.Cursor < l.SlowAt {
			t.Errorf("slow: position %d, cursor %d; want the position below %d and the cursor at or past it", s.Position, s.Cursor, l.SlowAt)
		}
		if s := subscriptionStats(t, ps, l.Fast.ID); s.Cursor < s.Position {
			t.Errorf("fast: cursor %d behind its position %d", s.Cursor, s.Position)
		}

		_, body := scrape(t, e, "")
		labels := fmt.Sprintf(`consumer="reader",partition="%d"`, l.Partition)
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
		slow := metricValue(t, body, "sluice_stream_subscription_cache_window", labels+`,subscription="`+l.Slow.ID+`"`)
		fast := metricValue(t, body, "sluice_stream_subscription_cache_window", labels+`,subscription="`+l.Fast.ID+`"`)
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
