package cli

import (
	"context"
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// What the stream-lagging scenario samples and reports.

// lagMarks are what the sampler notes of each partition for lagHandler:
// the head window's start, and the end of lag's window when a sample
// first finds it in a lagging window split off since the sample before
// (what the split carried into it; a window lag joined behind the others
// holds nothing when it starts).
type lagMarks struct {
	head, carried [benchPartitions]atomic.Int64
	// The sampler's own: lag was in a lagging window, and the partition's
	// splits, in the last sample.
	lagging [benchPartitions]bool
	splits  [benchPartitions]int64
}

func (m *lagMarks) note(stats []sluice.StreamPartitionStats) {
	for _, ps := range stats {
		p := ps.Partition
		if p < 0 || p >= benchPartitions {
			continue
		}
		for _, w := range ps.Windows {
			if w.Head {
				m.head[p].Store(w.Start)
			}
		}
		for _, s := range ps.Subscriptions {
			if s.Consumer != "lag" || !s.Handled || s.Window < 0 || s.Window >= len(ps.Windows) {
				continue
			}
			w := ps.Windows[s.Window]
			if !w.Head && !m.lagging[p] && ps.Splits > m.splits[p] {
				m.carried[p].Store(w.End)
			}
			m.lagging[p] = !w.Head
		}
		m.splits[p] = ps.Splits
	}
}

// pacer hands out one turn every `every`, to whoever asks first, until
// release.
type pacer struct {
	mu    sync.Mutex
	next  time.Time
	every time.Duration
}

func (p *pacer) wait(ctx context.Context, release <-chan struct{}) error {
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(p.every)
	p.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
	case <-release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// memSampler samples what the caches hold, the process's resident
// memory and the Go heap's live bytes (as of the last collection) every
// 10 ms, keeping the peaks (the memory peaks in all, and until lagging
// ends), and notes lagMarks.
type memSampler struct {
	done    chan struct{}
	cancel  context.CancelFunc
	once    sync.Once
	base    memPeak // before the processor started
	all     memPeak
	lagging memPeak     // until released
	ended   atomic.Bool // released
	records int         // all partitions' caches at once
	bytes   int64       // likewise
	maxPart int         // one partition's cache
	windows int         // most windows of one partition
	marks   *lagMarks
}

// memPeak is resident memory and live heap, in bytes.
type memPeak struct{ rss, heap int64 }

func (p *memPeak) add(q memPeak) { p.rss, p.heap = max(p.rss, q.rss), max(p.heap, q.heap) }

func (p memPeak) mib() (rss, heap float64) {
	return float64(p.rss) / (1 << 20), float64(p.heap) / (1 << 20)
}

// memNow reads resident memory and the live heap.
func memNow() memPeak {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var heap int64
	if s[0].Value.Kind() == metrics.KindUint64 {
		heap = int64(s[0].Value.Uint64())
	}
	return memPeak{rss: residentBytes(), heap: heap}
}

// prepare takes the memory before the run: what earlier runs left to
// the garbage collector goes back first, so that the peaks are this
// run's.
func (m *memSampler) prepare() {
	debug.FreeOSMemory()
	m.base = memNow()
}

// start samples p from now on, noting marks.
func (m *memSampler) start(ctx context.Context, p *sluice.StreamProcessor, marks *lagMarks) {
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	m.marks = marks
	go func() {
		defer close(m.done)
		for {
			m.sample(p)
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
}

func (m *memSampler) sample(p *sluice.StreamProcessor) {
	now := memNow()
	m.all.add(now)
	if !m.ended.Load() {
		m.lagging.add(now)
	}
	var records int
	var bytes int64
	stats := p.Stats()
	m.marks.note(stats)
	for _, ps := range stats {
		records += ps.CachedRecords
		bytes += ps.CachedBytes
		m.maxPart = max(m.maxPart, ps.CachedRecords)
		m.windows = max(m.windows, len(ps.Windows))
	}
	m.records, m.bytes = max(m.records, records), max(m.bytes, bytes)
}

// stop ends the sampling and waits for it (idempotent).
func (m *memSampler) stop() {
	m.once.Do(func() {
		if m.cancel != nil {
			m.cancel()
			<-m.done
		}
	})
}

// memory reports the sampled peaks.
func (r *benchResult) memory(m *memSampler) {
	records, part, windows := int64(m.records), int64(m.maxPart), int64(m.windows)
	mib := float64(m.bytes) / (1 << 20)
	r.PeakCachedRecords, r.PeakPartitionRecords, r.PeakWindows = &records, &part, &windows
	r.PeakCachedMiB = &mib
	var baseRSS, baseHeap, lagRSS, lagHeap, heap float64
	baseRSS, baseHeap = m.base.mib()
	lagRSS, lagHeap = m.lagging.mib()
	r.PeakRSSMiB, heap = m.all.mib()
	r.BaseRSSMiB, r.BaseHeapMiB, r.LaggingRSSMiB, r.LaggingHeapMiB, r.PeakHeapMiB = &baseRSS, &baseHeap, &lagRSS, &lagHeap, &heap
}

// rehydration reports what the lagging windows read while lag lagged
// and in all, and the splits and merges.
func (r *benchResult) rehydration(while, after []sluice.StreamPartitionStats) {
	sum := func(stats []sluice.StreamPartitionStats, f func(sluice.StreamPartitionStats) int64) *int64 {
		var n int64
		for _, ps := range stats {
			n += f(ps)
		}
		return &n
	}
	r.RehydratedWhileLagging = sum(while, func(ps sluice.StreamPartitionStats) int64 { return ps.RehydratedRecords })
	r.RehydrationReads = sum(after, func(ps sluice.StreamPartitionStats) int64 { return ps.RehydrationReads })
	r.RehydratedRecords = sum(after, func(ps sluice.StreamPartitionStats) int64 { return ps.RehydratedRecords })
	r.Splits = sum(after, func(ps sluice.StreamPartitionStats) int64 { return ps.Splits })
	r.Merges = sum(after, func(ps sluice.StreamPartitionStats) int64 { return ps.Merges })
}

// lagNote describes a stream-lagging line once its figures are the
// medians of the runs.
func lagNote(r benchResult) string {
	f := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	}
	i := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	mem := fmt.Sprintf("caches peak %d records (%.1f MiB; one partition %d) of %d (%d a partition), %d windows at most; "+
		"resident/live heap MiB: %.1f/%.1f before the processor started, peak %.1f/%.1f until fast had all, %.1f/%.1f in all",
		i(r.PeakCachedRecords), f(r.PeakCachedMiB), i(r.PeakPartitionRecords), r.BudgetRecords, r.CacheRecords, i(r.PeakWindows),
		f(r.BaseRSSMiB), f(r.BaseHeapMiB), f(r.LaggingRSSMiB), f(r.LaggingHeapMiB), r.PeakRSSMiB, f(r.PeakHeapMiB))
	got := ""
	if r.Published != nil && r.Count < *r.Published {
		got = fmt.Sprintf("FAST GOT %d OF %d within %v of the end; ", r.Count, *r.Published, lagFastWait)
	}
	if len(r.RunsP99ms) > 1 {
		mem += fmt.Sprintf("; the runs' p99 %s ms", joinFigures(r.RunsP99ms, "%.2f"))
		if len(r.RunsP99Ratio) > 1 {
			mem += fmt.Sprintf(", p99 ratios %s, events/s slowdowns %s", joinFigures(r.RunsP99Ratio, "%.2f"), joinFigures(r.RunsRateRatio, "%.2f"))
		}
		mem += fmt.Sprintf("; all runs' events pooled: p99 %.2f ms", f(r.PooledP99ms))
		if r.PooledP99Ratio != nil {
			mem += fmt.Sprintf(" (%.2fx the no-lag runs')", *r.PooledP99Ratio)
		}
	}
	if r.Lag == "none" {
		return fmt.Sprintf("%sno lagging consumer; p50/p99: publish to fast's handler; %s", got, mem)
	}
	caught := ""
	if r.CaughtUp != nil && !*r.CaughtUp {
		caught = fmt.Sprintf(" (NOT CAUGHT UP within %v)", lagCatchUp)
	}
	if r.ReplaySeconds != nil {
		caught += fmt.Sprintf("; the replay reached the head %.1f s into the run", *r.ReplaySeconds)
		if r.ReplayP99Ratio != nil {
			caught += fmt.Sprintf(", fast's p99 over what was published until then %.2fx the no-lag run's", *r.ReplayP99Ratio)
		}
	}
	return fmt.Sprintf("%slag %s: fast beside the no-lag run: events/s slowdown %.2fx (no-lag/lag), p50 %.2fx, p99 %.2fx (lag/no-lag); %s; "+
		"lagging windows read %d records (%d reads; %d before lag was released), %.2fx the %d records lag needed "+
		"beyond the head window (it walked %d%s); %d splits, %d merges",
		got, r.Lag, f(r.RateRatio), f(r.P50Ratio), f(r.P99Ratio), mem,
		i(r.RehydratedRecords), i(r.RehydrationReads), i(r.RehydratedWhileLagging), f(r.RehydrationRatio), i(r.LagNeeded),
		i(r.LagWalked), caught, i(r.Splits), i(r.Merges))
}

// lagRuns keeps each run's figures of line i on r, in run order.
func (r *benchResult) lagRuns(runs [][]benchResult, i int) {
	r.RunsMsgsPerSec, r.RunsP99ms, r.RunsRateRatio, r.RunsP99Ratio = nil, nil, nil, nil
	for _, run := range runs {
		x := run[i]
		r.RunsMsgsPerSec = append(r.RunsMsgsPerSec, x.MsgsPerSec)
		r.RunsP99ms = append(r.RunsP99ms, x.P99ms)
		if x.RateRatio != nil && x.P99Ratio != nil {
			r.RunsRateRatio = append(r.RunsRateRatio, *x.RateRatio)
			r.RunsP99Ratio = append(r.RunsP99Ratio, *x.P99Ratio)
		}
	}
}

// lagMedianFields are the stream-lagging figures medians merges.
func lagMedianFields(r *benchResult) (floats []**float64, ints []**int64) {
	return []**float64{&r.RateRatio, &r.P50Ratio, &r.P99Ratio, &r.PeakCachedMiB, &r.RehydrationRatio,
			&r.BaseRSSMiB, &r.BaseHeapMiB, &r.LaggingRSSMiB, &r.LaggingHeapMiB, &r.PeakHeapMiB, &r.ReplaySeconds,
			&r.ReplayP99Ratio},
		[]**int64{&r.PeakCachedRecords, &r.PeakPartitionRecords, &r.PeakWindows, &r.RehydratedWhileLagging,
			&r.RehydrationReads, &r.RehydratedRecords, &r.LagWalked, &r.LagNeeded, &r.Splits, &r.Merges, &r.Published}
}

func joinFigures(v []float64, format string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(s, ", ")
}
