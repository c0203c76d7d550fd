package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
)

// cacheCollector reports the stream caches of the consumers this server
// runs, from their nodes' Stats at each scrape (memory only, no database
// read): per consumer and partition, the resident windows and what they
// hold and the records each may read (room) and its members want
// (wanted), the splits, merges, resets, rehydration reads, reads avoided
// and duplicated, reclaimed records and retention gaps since the
// partition's agent started, and the window each subscription reads.
// Windows are labelled by their index, which the cache's limit of
// windows bounds (MaxCacheWindows), as the consumers and partitions of
// one server bound the rest. A counter
// starts again from zero when an agent does (another node took the
// partition, or the consumer stopped and started again), which
// Prometheus takes as a counter reset.
type cacheCollector struct{ h *streams }

var (
	cacheWindowsDesc = prometheus.NewDesc("sluice_stream_cache_windows",
		"Resident windows of the stream cache of a partition a consumer's node on this server pulls.",
		[]string{"consumer", "partition"}, nil)
	cacheRecordsDesc = prometheus.NewDesc("sluice_stream_cache_resident_records",
		"Records the stream cache of a partition holds, in all its windows (a record is held once).",
		[]string{"consumer", "partition"}, nil)
	cacheBytesDesc = prometheus.NewDesc("sluice_stream_cache_resident_bytes",
		"About how many bytes the records the stream cache of a partition holds take.",
		[]string{"consumer", "partition"}, nil)
	cacheWindowRecordsDesc = prometheus.NewDesc("sluice_stream_cache_window_records",
		"Records one resident window of a partition's stream cache holds, by window (its index, ascending by "+
			"position; the last is the head window, which reads ahead).",
		[]string{"consumer", "partition", "window"}, nil)
	cacheWindowRoomDesc = prometheus.NewDesc("sluice_stream_cache_window_room",
		"Records one resident window of a partition's stream cache may read now, what the cache's budget leaves it once the "+
			"other windows' unused reserves are set aside (0: full, its reads wait for a purge), by window.",
		[]string{"consumer", "partition", "window"}, nil)
	cacheWindowWantedDesc = prometheus.NewDesc("sluice_stream_cache_window_wanted",
		"Records past the end of one resident window of a partition's stream cache its members may walk now (0: none has "+
			"walked all of it), by window; with no room, the window is under pressure.",
		[]string{"consumer", "partition", "window"}, nil)
	cacheSplitsDesc = prometheus.NewDesc("sluice_stream_cache_splits_total",
		"Windows split off a partition's stream cache for lagging subscriptions.",
		[]string{"consumer", "partition"}, nil)
	cacheMergesDesc = prometheus.NewDesc("sluice_stream_cache_merges_total",
		"Windows of a partition's stream cache merged back once their ranges met.",
		[]string{"consumer", "partition"}, nil)
	cacheRehydrationReadsDesc = prometheus.NewDesc("sluice_stream_cache_rehydration_reads_total",
		"Reads of the log for windows other than the head (the log read again for lagging subscriptions).",
		[]string{"consumer", "partition"}, nil)
	cacheRehydratedRecordsDesc = prometheus.NewDesc("sluice_stream_cache_rehydrated_records_total",
		"Records the rehydration reads brought.",
		[]string{"consumer", "partition"}, nil)
	cacheResetsDesc = prometheus.NewDesc("sluice_stream_cache_resets_total",
		"Windows of a partition's stream cache the share policy moved back to a subscription's position at the window "+
			"limit (their members read again what they had passed).",
		[]string{"consumer", "partition"}, nil)
	cacheReadsAvoidedDesc = prometheus.NewDesc("sluice_stream_cache_reads_avoided_total",
		"Records a lagging window of a partition's stream cache took over from the window above it when the two met, "+
			"rather than reading them again.",
		[]string{"consumer", "partition"}, nil)
	cacheDuplicateReadsDesc = prometheus.NewDesc("sluice_stream_cache_duplicate_reads_total",
		"Records a read of a partition's stream cache returned that another of its windows held already (dropped: a "+
			"record is held once).",
		[]string{"consumer", "partition"}, nil)
	cacheReclaimedDesc = prometheus.NewDesc("sluice_stream_cache_reclaimed_records_total",
		"Records dropped from a window's read-ahead in a partition's stream cache to give another window its reserve "+
			"(read again later).",
		[]string{"consumer", "partition"}, nil)
	cacheRetentionGapsDesc = prometheus.NewDesc("sluice_stream_cache_retention_gaps_total",
		"Subscriptions of a partition whose window met a retention gap: retention deleted records they had not read.",
		[]string{"consumer", "partition"}, nil)
	cacheLaggingHeldDesc = prometheus.NewDesc("sluice_stream_cache_lagging_held_total",
		"Times a lagging window of a partition's stream cache had an event to deliver that the node's lagging rate held "+
			"back (a replay going slower than its handlers would).",
		[]string{"consumer", "partition"}, nil)
	subscriptionWindowDesc = prometheus.NewDesc("sluice_stream_subscription_cache_window",
		"The index of the window of its partition's stream cache a subscription reads (-1: none, as when it is faulted).",
		[]string{"consumer", "partition", "subscription"}, nil)
)

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheWindowsDesc, cacheRecordsDesc, cacheBytesDesc, cacheWindowRecordsDesc,
		cacheWindowRoomDesc, cacheWindowWantedDesc, cacheSplitsDesc, cacheMergesDesc, cacheRehydrationReadsDesc,
		cacheRehydratedRecordsDesc, cacheResetsDesc, cacheReadsAvoidedDesc, cacheDuplicateReadsDesc, cacheReclaimedDesc,
		cacheRetentionGapsDesc, cacheLaggingHeldDesc, subscriptionWindowDesc} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	for consumer, proc := range c.h.running() {
		for _, ps := range proc.Stats() {
			collectCache(ch, consumer, &ps)
		}
	}
}

// collectCache reports one partition's cache.
func collectCache(ch chan<- prometheus.Metric, consumer string, ps *sluice.StreamPartitionStats) {
	part := strconv.Itoa(int(ps.Partition))
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{consumer, part}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), consumer, part)
	}
	gauge(cacheWindowsDesc, float64(len(ps.Windows)))
	gauge(cacheRecordsDesc, float64(ps.CachedRecords))
	gauge(cacheBytesDesc, float64(ps.CachedBytes))
	for i, w := range ps.Windows {
		window := strconv.Itoa(i)
		gauge(cacheWindowRecordsDesc, float64(w.Records), window)
		gauge(cacheWindowRoomDesc, float64(w.Room), window)
		gauge(cacheWindowWantedDesc, float64(w.Wanted), window)
	}
	counter(cacheSplitsDesc, ps.Splits)
	counter(cacheMergesDesc, ps.Merges)
	counter(cacheRehydrationReadsDesc, ps.RehydrationReads)
	counter(cacheRehydratedRecordsDesc, ps.RehydratedRecords)
	counter(cacheResetsDesc, ps.Resets)
	counter(cacheReadsAvoidedDesc, ps.ReadsAvoided)
	counter(cacheDuplicateReadsDesc, ps.DuplicateReads)
	counter(cacheReclaimedDesc, ps.Reclaimed)
	counter(cacheRetentionGapsDesc, ps.RetentionGaps)
	counter(cacheLaggingHeldDesc, ps.LaggingHeld)
	// Only the subscriptions this consumer delivers: the others of the
	// partition are another consumer's, reported with it.
	for _, s := range ps.Subscriptions {
		if s.Handled {
			gauge(subscriptionWindowDesc, float64(s.Window), s.ID)
		}
	}
}

// running returns the nodes of the consumers that run on this server
// (started, and not stopping), by consumer.
func (h *streams) running() map[string]*sluice.StreamProcessor {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]*sluice.StreamProcessor, len(h.consumers))
	for name, rc := range h.consumers {
		if !rc.stopping && isClosed(rc.started) && rc.startErr == nil {
			out[name] = rc.proc
		}
	}
	return out
}
