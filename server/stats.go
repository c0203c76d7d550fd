package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
)

// Throughput history: a sample every throughputBucket, for the last
// throughputWindow.
const (
	throughputBucket = 5 * time.Second
	throughputWindow = 10 * time.Minute
)

// throughput keeps the server's totals of messages sent, received and
// settled, as its client's calls report them (the API's and any other
// of the process's on that client), and a ring of their rates over the
// last throughputWindow.
type throughput struct {
	sent, received, settled atomic.Int64

	mu      sync.Mutex
	samples []*sluicev1.ThroughputSample // oldest first
	last    [3]int64
	lastAt  time.Time
}

// observe adds what a call did to the totals.
func (t *throughput) observe(e sluice.MessageEvent) {
	switch e.Kind {
	case sluice.MessagesSent:
		t.sent.Add(int64(e.Count))
	case sluice.MessagesReceived:
		t.received.Add(int64(e.Count))
	case sluice.MessagesSettled:
		t.settled.Add(int64(e.Count))
	}
}

// sample closes a bucket: the rates since the last one.
func (t *throughput) sample(now time.Time) {
	totals := [3]int64{t.sent.Load(), t.received.Load(), t.settled.Load()}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.lastAt.IsZero() {
		secs := now.Sub(t.lastAt).Seconds()
		rate := func(i int) float64 { return float64(totals[i]-t.last[i]) / secs }
		t.samples = append(t.samples, &sluicev1.ThroughputSample{At: apiconv.Timestamp(now), Sent: rate(0), Received: rate(1), Settled: rate(2)})
		if n := int(throughputWindow / throughputBucket); len(t.samples) > n {
			t.samples = t.samples[len(t.samples)-n:]
		}
	}
	t.last, t.lastAt = totals, now
}

// run samples every bucket until ctx ends.
func (t *throughput) run(ctx context.Context) {
	t.sample(time.Now())
	tick := time.NewTicker(throughputBucket)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			t.sample(now)
		}
	}
}

// stats serves StatsService.
type stats struct{ s *Server }

func (h *stats) GetThroughput(ctx context.Context, _ *sluicev1.GetThroughputRequest) (*sluicev1.GetThroughputResponse, error) {
	if err := h.s.authorize(ctx, Manage, MetricsEntity); err != nil {
		return nil, err
	}
	t := &h.s.tp
	t.mu.Lock()
	defer t.mu.Unlock()
	return &sluicev1.GetThroughputResponse{Bucket: apiconv.DurationPB(throughputBucket), Samples: append([]*sluicev1.ThroughputSample(nil), t.samples...)}, nil
}
