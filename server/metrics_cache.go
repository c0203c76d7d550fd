package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
)

// cacheCollector reports the stream caches of the consumers this server
// runs, from their nodes' Stats at each scrape (memory only, no database
// read): per consumer and partition, the resident windows and what they
// hold, the splits, merges and rehydration reads since the partition's
// agent started, and the window each subscription reads. A counter
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
	subscriptionWindowDesc = prometheus.NewDesc("sluice_stream_subscription_cache_window",
		"The index of the window of its partition's stream cache a subscription reads (-1: none, as when it is faulted).",
		[]string{"consumer", "partition", "subscription"}, nil)
)

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheWindowsDesc, cacheRecordsDesc, cacheBytesDesc, cacheWindowRecordsDesc, cacheSplitsDesc,
		cacheMergesDesc, cacheRehydrationReadsDesc, cacheRehydratedRecordsDesc, subscriptionWindowDesc} {
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
		gauge(cacheWindowRecordsDesc, float64(w.Records), strconv.Itoa(i))
	}
	counter(cacheSplitsDesc, ps.Splits)
	counter(cacheMergesDesc, ps.Merges)
	counter(cacheRehydrationReadsDesc, ps.RehydrationReads)
	counter(cacheRehydratedRecordsDesc, ps.RehydratedRecords)
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
