package cli

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// benchConfig holds the flags of sluice bench.
type benchConfig struct {
	db         string
	scenario   string
	clients    int
	producers  int
	consumers  int
	batch      int
	leaseBatch int
	size       int
	duration   time.Duration
	rate       int
	inflight   int
	backlogHow string
	sessions   int
	subs       int
	locked     int
	scheduled  int
	messages   int
	partitions int
	// queuePartitions, when --partitions is given to enqueue or e2e, runs
	// them through the library on queues of that many partitions.
	queuePartitions int
	queues          int
	sync            string
	jsonOut         bool
	completeAll     bool
	cpuProfile      string
	runs            int
	nodes           int
	pipelines       int
	kills           int
	server          string
	token           string
	// stream-lagging
	lag          string
	cacheRecords int
	cacheWindows int
	laggingRate  int
	processor    processorFlags
}

// benchResult is one line of output.
type benchResult struct {
	Scenario   string  `json:"scenario"`
	Backend    string  `json:"backend"`
	Driver     string  `json:"driver,omitempty"`
	Clients    int     `json:"clients,omitempty"`
	Producers  int     `json:"producers,omitempty"`
	Consumers  int     `json:"consumers,omitempty"`
	Batch      int     `json:"batch,omitempty"`
	Queues     int     `json:"queues,omitempty"`
	Partitions int     `json:"partitions,omitempty"`
	Pipelines  int     `json:"commit_pipelines,omitempty"`
	Inflight   *int    `json:"inflight,omitempty"`
	Locked     *int    `json:"locked,omitempty"`
	Scheduled  *int    `json:"scheduled,omitempty"`
	Subs       *int    `json:"subscriptions,omitempty"`
	Nodes      *int    `json:"nodes,omitempty"`
	Transport  string  `json:"transport,omitempty"`
	Kills      *int    `json:"kills,omitempty"`
	Rate       int     `json:"rate,omitempty"`
	Count      int64   `json:"count"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	Runs       int     `json:"runs,omitempty"`
	PeakRSSMiB float64 `json:"peak_rss_mib,omitempty"`
	BudgetMiB  float64 `json:"cache_budget_mib,omitempty"`
	// PublishP50ms and PublishP99ms are what Publish alone took, in a
	// scenario whose latency runs from publish to handler.
	PublishP50ms *float64 `json:"publish_p50_ms,omitempty"`
	PublishP99ms *float64 `json:"publish_p99_ms,omitempty"`
	// Method is how raw-insert committed its rows: insert (one statement),
	// copy (COPY), values (multi-row INSERT statements) or naive (a
	// single-row INSERT each, in a transaction).
	Method string `json:"method,omitempty"`
	lagFigures
	Note string `json:"note,omitempty"`
}

// lagFigures are what a stream-lagging line adds: Lag is the --lag mode
// ("none" for the run without the lagging consumer).
type lagFigures struct {
	Lag       string `json:"lag,omitempty"`
	History   int64  `json:"history,omitempty"`
	Published *int64 `json:"published,omitempty"`
	// RateRatio is the no-lag run's events/s over this one's (above 1:
	// slower), P50Ratio and P99Ratio this run's latency over the no-lag
	// run's: each the median of the runs' ratios.
	RateRatio *float64 `json:"msgs_per_sec_ratio,omitempty"`
	P50Ratio  *float64 `json:"p50_ratio,omitempty"`
	P99Ratio  *float64 `json:"p99_ratio,omitempty"`
	// The caches' bound: CacheRecords a partition, BudgetRecords in all;
	// their peaks, sampled every 50 ms, in all and on one partition.
	CacheRecords         int      `json:"cache_records,omitempty"`
	BudgetRecords        int      `json:"cache_budget_records,omitempty"`
	PeakCachedRecords    *int64   `json:"peak_cached_records,omitempty"`
	PeakPartitionRecords *int64   `json:"peak_partition_cached_records,omitempty"`
	PeakCachedMiB        *float64 `json:"peak_cached_mib,omitempty"`
	PeakWindows          *int64   `json:"peak_windows,omitempty"`
	// Resident memory and the Go heap's live bytes before the processor
	// started, their peaks until fast had every event (while lag lagged)
	// and in all (PeakRSSMiB and PeakHeapMiB; lag caught up meanwhile).
	BaseRSSMiB     *float64 `json:"base_rss_mib,omitempty"`
	BaseHeapMiB    *float64 `json:"base_heap_mib,omitempty"`
	LaggingRSSMiB  *float64 `json:"lagging_rss_mib,omitempty"`
	LaggingHeapMiB *float64 `json:"lagging_heap_mib,omitempty"`
	PeakHeapMiB    *float64 `json:"peak_heap_mib,omitempty"`
	// What lagging windows read from storage (RehydratedWhileLagging
	// until lag was released), against the records lag needed beyond the
	// head window (LagNeeded: its deliveries below the head window's
	// start) and all it walked from its start to the head (LagWalked):
	// RehydrationRatio is RehydratedRecords over LagNeeded.
	RehydratedWhileLagging *int64   `json:"rehydrated_while_lagging,omitempty"`
	RehydrationReads       *int64   `json:"rehydration_reads,omitempty"`
	RehydratedRecords      *int64   `json:"rehydrated_records,omitempty"`
	LagWalked              *int64   `json:"lag_walked_records,omitempty"`
	LagNeeded              *int64   `json:"lag_needed_records,omitempty"`
	RehydrationRatio       *float64 `json:"rehydration_ratio,omitempty"`
	CaughtUp               *bool    `json:"lag_caught_up,omitempty"`
	// ReplaySeconds is how long after the first measured publish a
	// replaying lag had as many events as the history and fast's
	// together: when the replay reached the head.
	ReplaySeconds *float64 `json:"lag_replay_seconds,omitempty"`
	// Each run's figures, where the line gives their medians (--runs).
	RunsMsgsPerSec []float64 `json:"runs_msgs_per_sec,omitempty"`
	RunsP99ms      []float64 `json:"runs_p99_ms,omitempty"`
	RunsRateRatio  []float64 `json:"runs_msgs_per_sec_ratio,omitempty"`
	RunsP99Ratio   []float64 `json:"runs_p99_ratio,omitempty"`
	// PooledP99ms is the p99 of every run's events together (runs
	// alternate which goes first, so drift on a shared machine weighs on
	// both lines alike); PooledP99Ratio this line's over the no-lag
	// line's. ReplayP99Ratio is, for a replay, fast's p99 over the events
	// published while the replay ran, over the no-lag run's for the same
	// span (the median of the runs').
	PooledP99ms    *float64 `json:"pooled_p99_ms,omitempty"`
	PooledP99Ratio *float64 `json:"pooled_p99_ratio,omitempty"`
	ReplayP99Ratio *float64 `json:"replay_p99_ratio,omitempty"`
	// samples are the run's events, for pooling.
	samples []lagSample
	Splits  *int64 `json:"splits,omitempty"`
	Merges  *int64 `json:"merges,omitempty"`
}

const benchUsage = `usage: sluice bench --db DSN --scenario NAME [flags]

DSN: sqlite://PATH (or a bare PATH), postgres://..., mysql://...; sqlite-mattn://PATH and
sqlite-ncruces://PATH in the commands of store/sqlite/sqlitedrivers/cmd
scenarios:
  raw-insert    the database's own limit: --clients commit transactions of --batch 1-KiB rows each, the
                fastest way the database has: one INSERT statement for one row, COPY on PostgreSQL, multi-row
                INSERT ... VALUES statements elsewhere
  raw-insert-naive  the same with one single-row INSERT statement a row, in a transaction
  enqueue       sluice enqueue (--producers, --batch messages per call)
  lease-settle  pre-loaded messages leased and completed (--consumers, --lease-batch)
  processor     pre-loaded messages drained by --consumers Processors of --lease-batch handlers each (a handler
                that does nothing, --prefetch), for at most --duration; with --steady, --producers send (at --rate)
                while they drain an empty queue: send-to-handler latency
  e2e           produce and consume at once; send-to-lease latency (--producers, --consumers, --lease-batch, --rate)
                enqueue, lease-settle and e2e run on --queues independent queues, with --producers and --consumers
                on each (and --messages pre-loaded in each); the rate is the total. enqueue and e2e with --partitions
                run through the library (Sender, Receiver, CompleteBatch with --complete-batch) on queues of that
                many partitions (--partitions 1: unpartitioned, the same path)
  backlog       time to receive 32 with --inflight messages received and unsettled, beside none in flight; the backlog
                sent and received 1,000 at a time through a Receiver (--backlog-build receive), or through the store
                (lease)
  session-accept  time to accept the next free session among --sessions with --locked of them locked, beside none locked
  session-processor  pre-loaded messages (--messages) of --sessions sessions drained by a SessionProcessor holding
                --consumers sessions at once, one handler a session (in order, doing nothing), --prefetch a session
  receive-among-scheduled  time to receive 32 with --scheduled messages scheduled or deferred (half each), beside none
  topic-fanout  sends to a topic with --subscriptions subscriptions (--producers, --batch), beside the same to a queue
  log-append    partition log appends (--producers, --batch, --partitions)
  log-read      partition log reads of --messages records (--batch records per read)
  stream-e2e    publish to 1,000 streams and deliver to --subscriptions namespace subscriptions (default 1;
                --producers, --batch, --rate); publish-to-handler latency
  stream-backlog  publish --messages events behind a stuck subscriber; peak resident memory beside the cache budget
  cluster       --nodes node processes pull the partitions while 8 publishers publish (--batch); with --kills, SIGKILL
                one node at a time and time until its partitions are owned again (1 s leases, 200 ms heartbeats)
  api           send for --duration, then receive and complete it all, through the library, then through a server
                over Connect (protobuf, JSON) and gRPC (--producers, --batch, --consumers, --lease-batch); twice: one
                Complete call a message, then one CompleteBatch call a receive; the server runs in this process on
                --db, or --server names one (with --token)
  stream-lagging  consumers fast and lag of one processor; --lag stopped (lag's handler blocks), slow (it handles
                1% of --rate) or replay (it replays --messages events of history); --messages events published at
                --rate (default 1,000/s) to 1,000 streams, then the same with fast alone: fast's events/s and
                publish-to-handler latency beside that, the caches' peak (--cache-records a partition, default 256;
                --messages default 10x the 16 partitions' caches), and what lagging windows read from storage against
                the records lag walked once released to catch up
  api-stream    stream-e2e through the library's processor, then through a server's Consume over Connect (protobuf,
                JSON) and gRPC (--producers, --batch, --subscriptions); the server runs in this process on --db
`

func bench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c benchConfig
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchUsage, "\nflags:\n"); fs.PrintDefaults() }
	fs.StringVar(&c.db, "db", "sluice-data/bench.db", "database DSN")
	fs.StringVar(&c.scenario, "scenario", "", "scenario to run (see above)")
	fs.IntVar(&c.clients, "clients", 8, "raw-insert: concurrent clients")
	fs.IntVar(&c.producers, "producers", 8, "concurrent producers")
	fs.IntVar(&c.consumers, "consumers", 8, "concurrent consumers")
	fs.IntVar(&c.batch, "batch", 1, "messages or rows per call or transaction")
	fs.IntVar(&c.leaseBatch, "lease-batch", 32, "messages per lease")
	fs.IntVar(&c.size, "size", 1024, "payload bytes")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long a timed scenario runs")
	fs.IntVar(&c.rate, "rate", 0, "e2e: total messages per second to send (0: as fast as possible)")
	fs.IntVar(&c.inflight, "inflight", 50000, "backlog: messages leased and unsettled")
	fs.StringVar(&c.backlogHow, "backlog-build", "receive", "backlog: how the backlog is built and timed: receive (a Receiver, 1,000 a call) or lease (the store)")
	fs.IntVar(&c.sessions, "sessions", 10000, "session-accept: sessions, each with one message; session-processor: the sessions --messages are spread over")
	fs.IntVar(&c.subs, "subscriptions", 10, "topic-fanout: subscriptions of the topic, each taking every message (stream-e2e: namespace subscriptions, default 1)")
	fs.IntVar(&c.locked, "locked", 9990, "session-accept: sessions held locked")
	fs.IntVar(&c.scheduled, "scheduled", 50000, "receive-among-scheduled: messages scheduled or deferred")
	fs.IntVar(&c.messages, "messages", 50000, "lease-settle and log-read: messages or records pre-loaded")
	fs.IntVar(&c.partitions, "partitions", 16, "log-append: partitions written; enqueue, e2e: the queues' partitions, through the library")
	fs.IntVar(&c.queues, "queues", 1, "enqueue, lease-settle, e2e: independent queues, each with --producers and --consumers")
	fs.StringVar(&c.sync, "sqlite-synchronous", "FULL", "SQLite synchronous setting: FULL or NORMAL")
	fs.BoolVar(&c.jsonOut, "json", false, "print one JSON object per result")
	fs.BoolVar(&c.completeAll, "complete-batch", false, "settle a lease's messages in one call instead of one call each")
	fs.IntVar(&c.runs, "runs", 1, "run the scenario this many times and report the median of each figure")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.IntVar(&c.nodes, "nodes", 1, "cluster: node processes pulling the partitions; enqueue, e2e with --partitions: clients, each on a backend (pool, commit pipelines) of its own, that the producers and consumers of each queue take turns on")
	fs.IntVar(&c.pipelines, "commit-pipelines", 0, "group commits run at once (0: the backend's default; SQLite has one)")
	fs.IntVar(&c.kills, "kills", 0, "cluster: node processes to kill one after another, timing each failover")
	fs.StringVar(&c.server, "server", "", "api: drive the server at this URL instead of one in this process")
	fs.StringVar(&c.token, "token", "", "api: the server's bearer token")
	fs.StringVar(&c.lag, "lag", "stopped", "stream-lagging: how the lagging consumer lags: stopped, slow or replay")
	fs.IntVar(&c.cacheRecords, "cache-records", 256, "stream-lagging: each partition's cache bound, in records")
	fs.IntVar(&c.cacheWindows, "cache-windows", 0, "stream-lagging: each partition's cache windows (0: the processor's default)")
	fs.IntVar(&c.laggingRate, "lagging-rate", 0, "stream-lagging: the processor's LaggingRate, events/s (0: its default; -1: unbounded)")
	c.processor.register(fs)
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if (c.scenario == "stream-e2e" || c.scenario == "api-stream") && !set["subscriptions"] {
		c.subs = 1
	}
	if c.backlogHow != "receive" && c.backlogHow != "lease" {
		fmt.Fprintf(stderr, "sluice bench: --backlog-build %q: want receive or lease\n", c.backlogHow)
		return ExitUsage
	}
	if c.scenario == "stream-lagging" {
		if err := c.lagDefaults(set); err != nil {
			fmt.Fprintln(stderr, "sluice bench:", err)
			return ExitUsage
		}
	}
	if c.queues < 1 {
		fmt.Fprintln(stderr, "sluice bench: --queues must be at least 1")
		return ExitUsage
	}
	if set["partitions"] && (c.scenario == "enqueue" || c.scenario == "e2e") {
		if c.partitions < 1 || c.partitions > sluice.MaxPartitionCount {
			fmt.Fprintf(stderr, "sluice bench: --partitions %d: a queue has 1 to %d\n", c.partitions, sluice.MaxPartitionCount)
			return ExitUsage
		}
		c.queuePartitions = c.partitions
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "sluice bench:", err)
			return ExitError
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "sluice bench:", err)
			return ExitError
		}
		defer pprof.StopCPUProfile()
	}
	run, ok := scenarios[c.scenario]
	if !ok {
		fmt.Fprintf(stderr, "sluice bench: unknown or missing --scenario %q\n\n", c.scenario)
		fs.Usage()
		return ExitUsage
	}
	b, err := sluice.OpenBackend(ctx, sqliteSynchronous(c.db, c.sync), &sluice.Options{CommitPipelines: c.pipelines})
	if err != nil {
		fmt.Fprintln(stderr, "sluice bench:", err)
		return ExitError
	}
	defer b.Close()
	tenant := store.Tenant{Service: "bench", Provider: "run-" + randomHex(6)}
	s, err := b.Store(tenant)
	if err != nil {
		fmt.Fprintln(stderr, "sluice bench:", err)
		return ExitError
	}
	client, err := sluice.NewClient(b, &sluice.Options{Service: tenant.Service, Provider: tenant.Provider, StreamPartitions: benchPartitions})
	if err != nil {
		fmt.Fprintln(stderr, "sluice bench:", err)
		return ExitError
	}
	env := &benchEnv{cfg: c, backend: b, store: s, client: client, tenant: tenant, nodes: []*sluice.Client{client}}
	for i := 1; c.queuePartitions > 0 && i < c.nodes; i++ {
		nb, err := sluice.OpenBackend(ctx, sqliteSynchronous(c.db, c.sync), &sluice.Options{CommitPipelines: c.pipelines})
		if err != nil {
			fmt.Fprintln(stderr, "sluice bench:", err)
			return ExitError
		}
		defer nb.Close()
		nc, err := sluice.NewClient(nb, &sluice.Options{Service: tenant.Service, Provider: tenant.Provider, StreamPartitions: benchPartitions})
		if err != nil {
			fmt.Fprintln(stderr, "sluice bench:", err)
			return ExitError
		}
		env.nodes = append(env.nodes, nc)
	}
	var runs [][]benchResult
	for range max(c.runs, 1) {
		results, err := run(ctx, env)
		if err != nil {
			fmt.Fprintln(stderr, "sluice bench:", err)
			return ExitError
		}
		runs = append(runs, results)
	}
	results := medians(runs)
	for i := range results {
		results[i].Scenario, results[i].Backend = c.scenario, b.Features().Name
		results[i].Driver = b.Features().Driver
		results[i].Pipelines = b.Features().CommitPipelines
		if results[i].Lag != "" {
			results[i].Note = lagNote(results[i])
		}
	}
	printResults(stdout, results, c.jsonOut)
	return ExitOK
}

// medians merges several runs of a scenario: each figure of each result
// line becomes the median over the runs.
func medians(runs [][]benchResult) []benchResult {
	if len(runs) == 1 {
		return runs[0]
	}
	out := slices.Clone(runs[0])
	for i := range out {
		pick := func(f func(benchResult) float64) float64 {
			var v []float64
			for _, r := range runs {
				v = append(v, f(r[i]))
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		out[i].MsgsPerSec = pick(func(r benchResult) float64 { return r.MsgsPerSec })
		out[i].P50ms = pick(func(r benchResult) float64 { return r.P50ms })
		out[i].P99ms = pick(func(r benchResult) float64 { return r.P99ms })
		out[i].Seconds = pick(func(r benchResult) float64 { return r.Seconds })
		out[i].Count = int64(pick(func(r benchResult) float64 { return float64(r.Count) }))
		if out[i].PublishP50ms != nil {
			p50 := pick(func(r benchResult) float64 { return *r.PublishP50ms })
			p99 := pick(func(r benchResult) float64 { return *r.PublishP99ms })
			out[i].PublishP50ms, out[i].PublishP99ms = &p50, &p99
		}
		floats, ints := lagMedianFields(&out[i])
		for k, f := range floats {
			if *f != nil {
				v := pick(func(r benchResult) float64 { fs, _ := lagMedianFields(&r); return **fs[k] })
				*f = &v
			}
		}
		for k, n := range ints {
			if *n != nil {
				v := int64(pick(func(r benchResult) float64 { _, ns := lagMedianFields(&r); return float64(**ns[k]) }))
				*n = &v
			}
		}
		if out[i].Lag != "" {
			out[i].PeakRSSMiB = pick(func(r benchResult) float64 { return r.PeakRSSMiB })
			out[i].lagRuns(runs, i)
		}
		if out[i].Lag != "" {
			var all []lagSample
			for _, r := range runs {
				all = append(all, r[i].samples...)
			}
			p99 := percentile(all, 0, 0.99)
			out[i].PooledP99ms = &p99
			if i > 0 && *out[0].PooledP99ms > 0 {
				v := p99 / *out[0].PooledP99ms
				out[i].PooledP99Ratio = &v
			}
		}
		if out[i].CaughtUp != nil {
			all := !slices.ContainsFunc(runs, func(r []benchResult) bool { return !*r[i].CaughtUp })
			out[i].CaughtUp = &all
		}
		out[i].Runs = len(runs)
	}
	return out
}

type benchEnv struct {
	cfg     benchConfig
	backend store.Backend
	store   store.Store
	tenant  store.Tenant
	// client is the queue API on the same tenant, for scenarios that
	// measure it (topics).
	client *sluice.Client
	// nodes are the clients of enqueue and e2e through the library
	// (--partitions): client, and with --nodes N the clients of N-1 more
	// backends of their own, as other processes would have.
	nodes []*sluice.Client
	// round counts a scenario's runs, for those that alternate the order
	// of what they compare.
	round int
}

var scenarios = map[string]func(context.Context, *benchEnv) ([]benchResult, error){
	"raw-insert":   benchRawInsert,
	"enqueue":      benchEnqueue,
	"lease-settle": benchLeaseSettle,
	"processor":    benchProcessor,
	"e2e":          benchE2E,
	"backlog":      benchBacklog,

	"raw-insert-naive":        benchRawInsertNaive,
	"session-accept":          benchSessionAccept,
	"session-processor":       benchSessionProcessor,
	"topic-fanout":            benchTopicFanout,
	"receive-among-scheduled": benchReceiveAmongScheduled,
	"log-append":              benchLogAppend,
	"log-read":                benchLogRead,
	"stream-e2e":              benchStreamE2E,
	"stream-backlog":          benchStreamBacklog,
	"cluster":                 benchCluster,
	"api":                     benchAPI,
	"api-stream":              benchAPIStream,
	"stream-lagging":          benchStreamLagging,
}

func printResults(w io.Writer, results []benchResult, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range results {
			_ = enc.Encode(r)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tbackend\tparams\tcount\tseconds\tmsgs/s\tp50 ms\tp99 ms\tnote")
	for _, r := range results {
		var params []string
		for _, p := range []struct {
			k string
			v int
		}{{"clients", r.Clients}, {"queues", r.Queues}, {"partitions", r.Partitions}, {"producers", r.Producers}, {"consumers", r.Consumers}, {"batch", r.Batch}, {"rate", r.Rate}} {
			if p.v != 0 {
				params = append(params, fmt.Sprintf("%s=%d", p.k, p.v))
			}
		}
		if r.Inflight != nil {
			params = append(params, fmt.Sprintf("inflight=%d", *r.Inflight))
		}
		if r.Locked != nil {
			params = append(params, fmt.Sprintf("locked=%d", *r.Locked))
		}
		if r.Scheduled != nil {
			params = append(params, fmt.Sprintf("scheduled=%d", *r.Scheduled))
		}
		if r.Subs != nil {
			params = append(params, fmt.Sprintf("subscriptions=%d", *r.Subs))
		}
		if r.Nodes != nil {
			params = append(params, fmt.Sprintf("nodes=%d", *r.Nodes))
		}
		if r.Kills != nil {
			params = append(params, fmt.Sprintf("kills=%d", *r.Kills))
		}
		if r.Method != "" {
			params = append(params, "method="+r.Method)
		}
		if r.Transport != "" {
			params = append(params, "transport="+r.Transport)
		}
		if r.Lag != "" {
			params = append(params, "lag="+r.Lag, fmt.Sprintf("cache-records=%d", r.CacheRecords))
		}
		note := r.Note
		if r.PublishP50ms != nil {
			note += fmt.Sprintf(" (Publish alone: p50 %.3f, p99 %.3f)", *r.PublishP50ms, *r.PublishP99ms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.2f\t%.0f\t%.3f\t%.3f\t%s\n", r.Scenario, r.Backend,
			strings.Join(params, " "), r.Count, r.Seconds, r.MsgsPerSec, r.P50ms, r.P99ms, note)
	}
	tw.Flush()
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// max returns the longest duration, in ms.
func (l *latencies) max() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	return float64(slices.Max(l.d)) / float64(time.Millisecond)
}

func (l *latencies) percentiles() (p50, p99 float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0
	}
	slices.Sort(l.d)
	at := func(q float64) float64 {
		return float64(l.d[int(q*float64(len(l.d)-1))]) / float64(time.Millisecond)
	}
	return at(0.50), at(0.99)
}

func payload(size int) []byte {
	p := make([]byte, size)
	_, _ = rand.Read(p)
	return p
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// errDrained ends one worker of timed early: what it works on ran out, and
// idling until the deadline would understate the rate.
var errDrained = errors.New("drained")

// timed runs fn in n goroutines, each starting new calls until the
// duration passes (or fn reports errDrained), and returns the elapsed time
// once the last call ends; fn returns how many messages it handled. Each
// goroutine makes one call at least, and calls are never cut short by the
// deadline, so the last ones count in full.
func timed(ctx context.Context, n int, d time.Duration, fn func(ctx context.Context, worker int) (int, error)) (int64, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		count atomic.Int64
		wg    sync.WaitGroup
		first firstError
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every worker makes one call at least, however late it
			// starts: a short run on a loaded machine measures something.
			for once := true; ctx.Err() == nil && (once || time.Now().Before(deadline)); once = false {
				k, err := fn(ctx, w)
				count.Add(int64(k))
				if errors.Is(err, errDrained) {
					return
				}
				if err != nil {
					first.set(err)
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := first.get(); err != nil && !errors.Is(err, context.Canceled) {
		return count.Load(), elapsed, err
	}
	return count.Load(), elapsed, nil
}

// firstError keeps the first error that concurrent workers report.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	f.err = cmpErr(f.err, err)
	f.mu.Unlock()
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func result(count int64, elapsed time.Duration, lat *latencies) benchResult {
	r := benchResult{Count: count, Seconds: elapsed.Seconds(), MsgsPerSec: float64(count) / elapsed.Seconds()}
	if lat != nil {
		r.P50ms, r.P99ms = lat.percentiles()
	}
	return r
}

func (e *benchEnv) createQueue(ctx context.Context, name string) (func(), error) {
	if n := e.cfg.queuePartitions; n > 0 {
		if _, err := e.client.CreateQueue(ctx, name, &sluice.QueueProperties{PartitionCount: n}); err != nil {
			return nil, err
		}
		return func() { _ = e.client.DeleteQueue(context.WithoutCancel(ctx), name) }, nil
	}
	if err := e.store.CreateQueue(ctx, &store.QueueSettings{Name: name}); err != nil {
		return nil, err
	}
	return func() { _ = e.store.DeleteQueue(context.WithoutCancel(ctx), name) }, nil
}

// queueNames are the --queues queues a scenario runs on: prefix alone for
// one queue, prefix-1, prefix-2, ... for more.
func (e *benchEnv) queueNames(prefix string) []string {
	if e.cfg.queues <= 1 {
		return []string{prefix}
	}
	names := make([]string, e.cfg.queues)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i+1)
	}
	return names
}

// createQueues creates the --queues queues of a scenario (each holding
// --messages messages if preload) and returns their names and what drops
// them.
func (e *benchEnv) createQueues(ctx context.Context, prefix string, preload bool) ([]string, func(), error) {
	names := e.queueNames(prefix)
	var drops []func()
	dropAll := func() {
		for _, d := range drops {
			d()
		}
	}
	for _, q := range names {
		create := e.createQueue
		if preload {
			create = e.preloadedQueue
		}
		drop, err := create(ctx, q)
		if err != nil {
			dropAll()
			return nil, nil, err
		}
		drops = append(drops, drop)
	}
	return names, dropAll, nil
}

// preloadedQueue creates a queue holding --messages messages and returns
// what drops it.
func (e *benchEnv) preloadedQueue(ctx context.Context, name string) (func(), error) {
	drop, err := e.createQueue(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := e.preload(ctx, name, e.cfg.messages); err != nil {
		drop()
		return nil, err
	}
	return drop, nil
}

// preload enqueues n messages in large batches.
func (e *benchEnv) preload(ctx context.Context, queue string, n int) error {
	body := payload(e.cfg.size)
	for n > 0 {
		k := min(n, 500)
		msgs := make([]store.NewMessage, k)
		for i := range msgs {
			msgs[i] = store.NewMessage{Payload: body}
		}
		if _, err := e.store.Enqueue(ctx, &store.EnqueueParams{Queue: queue, Messages: msgs}); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func benchEnqueue(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	queues, drop, err := e.createQueues(ctx, "bench-enqueue", false)
	if err != nil {
		return nil, err
	}
	defer drop()
	body := payload(e.cfg.size)
	var lat latencies
	senders, err := e.senders(queues)
	if err != nil {
		return nil, err
	}
	// Worker w produces to queue w / --producers.
	count, elapsed, err := timed(ctx, e.cfg.producers*len(queues), e.cfg.duration, func(ctx context.Context, w int) (int, error) {
		msgs := make([]store.NewMessage, e.cfg.batch)
		for i := range msgs {
			msgs[i] = store.NewMessage{Payload: body}
		}
		start := time.Now()
		if err := e.send(ctx, queues, senders, w%e.cfg.producers, w/e.cfg.producers, msgs); err != nil {
			return 0, err
		}
		lat.add(time.Since(start))
		return len(msgs), nil
	})
	if err != nil {
		return nil, err
	}
	r := result(count, elapsed, &lat)
	r.Queues, r.Producers, r.Batch, r.Partitions = len(queues), e.cfg.producers, e.cfg.batch, e.cfg.queuePartitions
	r.Nodes = e.nodeCount()
	return []benchResult{r}, nil
}

// nodeCount is the --nodes of a run through the library on more than
// one, for its result (nil otherwise).
func (e *benchEnv) nodeCount() *int {
	if len(e.nodes) < 2 {
		return nil
	}
	n := len(e.nodes)
	return &n
}

// senders are the library's senders of queues, a node's each, when the
// scenario runs through the library (--partitions), else nil.
func (e *benchEnv) senders(queues []string) ([][]*sluice.Sender, error) {
	if e.cfg.queuePartitions == 0 {
		return nil, nil
	}
	out := make([][]*sluice.Sender, len(e.nodes))
	for n, c := range e.nodes {
		for _, q := range queues {
			s, err := c.NewSender(q)
			if err != nil {
				return nil, err
			}
			out[n] = append(out[n], s)
		}
	}
	return out, nil
}

// send sends msgs to queues[queue]: through its sender on the node of
// the queue's producer-th producer when there are senders, else straight
// to the store.
func (e *benchEnv) send(ctx context.Context, queues []string, senders [][]*sluice.Sender, producer, queue int, msgs []store.NewMessage) error {
	if senders == nil {
		_, err := e.store.Enqueue(ctx, &store.EnqueueParams{Queue: queues[queue], Messages: msgs})
		return err
	}
	out := make([]*sluice.Message, len(msgs))
	for i := range msgs {
		out[i] = &sluice.Message{Body: msgs[i].Payload}
	}
	_, err := senders[producer%len(senders)][queue].SendBatch(ctx, out)
	return err
}

// settleLeased completes leased messages, one call each in parallel (as
// handlers finishing would) or one call for all.
func (e *benchEnv) settleLeased(ctx context.Context, queue string, got []sluicetype.Leased) error {
	if e.cfg.completeAll {
		receipts := make([]sluicetype.Receipt, len(got))
		for i, m := range got {
			receipts[i] = m.Receipt
		}
		_, err := e.store.Settle(ctx, &store.SettleParams{Queue: queue, Action: store.Complete, Receipts: receipts})
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(got))
	for i, m := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.store.Settle(ctx, &store.SettleParams{Queue: queue, Action: store.Complete, Receipts: []sluicetype.Receipt{m.Receipt}})
			if err == nil {
				err = res[0].Err
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func benchLeaseSettle(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	queues, drop, err := e.createQueues(ctx, "bench-lease", true)
	if err != nil {
		return nil, err
	}
	defer drop()
	var lat latencies
	// left counts, for each queue, the messages not yet completed.
	left := make([]atomic.Int64, len(queues))
	for i := range left {
		left[i].Store(int64(e.cfg.messages))
	}
	// Worker w consumes from queue w / --consumers.
	count, elapsed, err := timed(ctx, e.cfg.consumers*len(queues), e.cfg.duration, func(ctx context.Context, w int) (int, error) {
		i := w / e.cfg.consumers
		q := queues[i]
		if left[i].Load() <= 0 {
			return 0, errDrained
		}
		start := time.Now()
		got, err := e.store.Lease(ctx, &store.LeaseParams{Queue: q, Max: e.cfg.leaseBatch, Visibility: time.Minute})
		if err != nil {
			return 0, err
		}
		if len(got) == 0 {
			left[i].Store(0)
			return 0, errDrained
		}
		if err := e.settleLeased(ctx, q, got); err != nil {
			return 0, err
		}
		lat.add(time.Since(start))
		left[i].Add(-int64(len(got)))
		return len(got), nil
	})
	if err != nil {
		return nil, err
	}
	r := result(count, elapsed, &lat)
	r.Queues, r.Consumers, r.Batch = len(queues), e.cfg.consumers, e.cfg.leaseBatch
	r.Note = "p50/p99: lease + complete of one batch"
	return []benchResult{r}, nil
}

// e2eRun is one run of the e2e scenario: what its producers and
// consumers share.
type e2eRun struct {
	e        *benchEnv
	body     []byte
	epoch    time.Time
	interval time.Duration // between one producer's sends; 0: none
	// senders, with --partitions, send through the library.
	senders  [][]*sluice.Sender
	lat      latencies
	sent     atomic.Int64
	received atomic.Int64
	failed   firstError
}

func benchE2E(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	queues, drop, err := e.createQueues(ctx, "bench-e2e", false)
	if err != nil {
		return nil, err
	}
	defer drop()
	run := &e2eRun{e: e, body: payload(e.cfg.size), epoch: time.Now()}
	if run.senders, err = e.senders(queues); err != nil {
		return nil, err
	}
	if e.cfg.rate > 0 {
		// --rate is the total over every producer of every queue.
		run.interval = time.Duration(float64(time.Second) * float64(e.cfg.producers*len(queues)) / float64(e.cfg.rate))
	}
	runCtx, stop := context.WithTimeout(ctx, e.cfg.duration)
	defer stop()
	consumeCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var wg, cwg sync.WaitGroup
	for i, q := range queues {
		for k := range e.cfg.producers {
			wg.Go(func() { run.produce(ctx, runCtx, queues, k, i) })
		}
		for k := range e.cfg.consumers {
			if run.senders != nil {
				cwg.Go(func() { run.receive(consumeCtx, e.nodes[k%len(e.nodes)], q) })
			} else {
				cwg.Go(func() { run.consume(consumeCtx, q) })
			}
		}
	}
	start := time.Now()
	wg.Wait()
	// Let consumers drain what was sent, then stop them.
	deadline := time.Now().Add(30 * time.Second)
	for run.received.Load() < run.sent.Load() && time.Now().Before(deadline) && run.failed.get() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	stopConsumers()
	cwg.Wait()
	if err := run.failed.get(); err != nil {
		return nil, err
	}
	if run.received.Load() < run.sent.Load() {
		return nil, fmt.Errorf("consumers completed %d of %d messages sent within 30s of the end", run.received.Load(), run.sent.Load())
	}
	r := result(run.received.Load(), elapsed, &run.lat)
	r.Queues, r.Producers, r.Consumers, r.Batch, r.Rate = len(queues), e.cfg.producers, e.cfg.consumers, e.cfg.leaseBatch, e.cfg.rate
	r.Partitions, r.Nodes = e.cfg.queuePartitions, e.nodeCount()
	r.Note = "p50/p99: send to lease"
	return []benchResult{r}, nil
}

// produce sends batches to queues[q], each payload stamped with its send
// time, until runCtx ends; the first send goes whenever runCtx ends, so
// that a run on a loaded machine measures something.
func (r *e2eRun) produce(ctx, runCtx context.Context, queues []string, producer, q int) {
	next := time.Now()
	for first := true; first || runCtx.Err() == nil; first = false {
		if r.interval > 0 && !first {
			next = next.Add(r.interval)
			if d := time.Until(next); d > 0 {
				select {
				case <-runCtx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		msgs := make([]store.NewMessage, r.e.cfg.batch)
		for i := range msgs {
			p := slices.Clone(r.body)
			binary.BigEndian.PutUint64(p, uint64(time.Since(r.epoch)))
			msgs[i] = store.NewMessage{Payload: p}
		}
		// A send under way when the time is up finishes and counts:
		// on a loaded machine the first may take the whole run.
		if err := r.e.send(ctx, queues, r.senders, producer, q, msgs); err != nil {
			r.fail(ctx, err)
			return
		}
		r.sent.Add(int64(len(msgs)))
	}
}

// consume leases from q and completes what it got until ctx ends,
// waiting for wake-ups, with a poll as a fallback, when q is empty.
func (r *e2eRun) consume(ctx context.Context, q string) {
	wake, unwatch := r.e.store.WatchQueue(q)
	defer unwatch()
	for ctx.Err() == nil {
		got, err := r.e.store.Lease(ctx, &store.LeaseParams{Queue: q, Max: r.e.cfg.leaseBatch, Visibility: time.Minute})
		if err != nil {
			r.fail(ctx, err)
			return
		}
		now := time.Since(r.epoch)
		for _, m := range got {
			r.lat.add(now - time.Duration(binary.BigEndian.Uint64(m.Payload)))
		}
		if len(got) == 0 {
			select {
			case <-ctx.Done():
			case <-wake:
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err := r.e.settleLeased(ctx, q, got); err != nil {
			r.fail(ctx, err)
			return
		}
		r.received.Add(int64(len(got)))
	}
}

// receive is consume through the library: a Receiver of c receives from q
// and completes what it got, one Complete call a message in parallel or
// one CompleteBatch (--complete-batch), until ctx ends.
func (r *e2eRun) receive(ctx context.Context, c *sluice.Client, q string) {
	rc, err := c.NewReceiver(q, nil)
	if err != nil {
		r.failed.set(err)
		return
	}
	for ctx.Err() == nil {
		got, err := rc.Receive(ctx, r.e.cfg.leaseBatch)
		if err != nil {
			r.fail(ctx, err)
			return
		}
		now := time.Since(r.epoch)
		for _, m := range got {
			r.lat.add(now - time.Duration(binary.BigEndian.Uint64(m.Body)))
		}
		if r.e.cfg.completeAll {
			err = rc.CompleteBatch(ctx, got)
		} else {
			var wg sync.WaitGroup
			errs := make([]error, len(got))
			for i, m := range got {
				wg.Go(func() { errs[i] = rc.Complete(ctx, m) })
			}
			wg.Wait()
			err = errors.Join(errs...)
		}
		if err != nil {
			r.fail(ctx, err)
			return
		}
		r.received.Add(int64(len(got)))
	}
}

// fail records err as the run's failure, unless ctx ended (the run's end
// cuts calls short).
func (r *e2eRun) fail(ctx context.Context, err error) {
	if ctx.Err() == nil {
		r.failed.set(err)
	}
}

// levels runs a scenario at each level on a queue of its own, created
// with settings s and deleted afterwards, and returns a result a level.
func (e *benchEnv) levels(ctx context.Context, prefix string, s store.QueueSettings, levels []int,
	run func(ctx context.Context, q string, level int) (benchResult, error)) ([]benchResult, error) {
	var out []benchResult
	for _, level := range levels {
		s.Name = fmt.Sprintf("%s-%d", prefix, level)
		if err := e.store.CreateQueue(ctx, &s); err != nil {
			return nil, err
		}
		r, err := run(ctx, s.Name, level)
		_ = e.store.DeleteQueue(context.WithoutCancel(ctx), s.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func benchLogAppend(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	body := payload(e.cfg.size)
	var (
		lat  latencies
		next atomic.Int64
	)
	defer e.trimAll(ctx, int32(e.cfg.partitions))
	count, elapsed, err := timed(ctx, e.cfg.producers, e.cfg.duration, func(ctx context.Context, _ int) (int, error) {
		recs := make([]store.NewRecord, e.cfg.batch)
		for i := range recs {
			recs[i] = store.NewRecord{Namespace: "bench", Key: fmt.Sprintf("k%d", i), Payload: body}
		}
		part := int32(next.Add(1) % int64(e.cfg.partitions))
		start := time.Now()
		if _, err := e.store.Append(ctx, &store.AppendParams{Partition: part, Records: recs}); err != nil {
			return 0, err
		}
		lat.add(time.Since(start))
		return len(recs), nil
	})
	if err != nil {
		return nil, err
	}
	r := result(count, elapsed, &lat)
	r.Producers, r.Batch = e.cfg.producers, e.cfg.batch
	return []benchResult{r}, nil
}

// trimAll removes the records a scenario wrote to the first parts
// partitions once no subscription needs them: a node of its own takes
// their leases, saves each checkpoint at its head and trims the consumed
// records. A partition another node still holds keeps its records, and
// so does every partition of a store that does not trim on demand (not
// a store.Trimmer).
func (e *benchEnv) trimAll(ctx context.Context, parts int32) {
	const node = "bench-cleanup"
	tr, ok := e.store.(store.Trimmer)
	if !ok {
		return
	}
	ctx = context.WithoutCancel(ctx)
	acquire := make([]int32, max(parts, 1))
	for i := range acquire {
		acquire[i] = int32(i)
	}
	leases, err := e.store.LeasePartitions(ctx, &store.PartitionLeaseParams{Node: node, Acquire: acquire, Duration: time.Minute})
	if err != nil {
		return
	}
	defer func() { _ = e.store.ReleasePartitions(ctx, node, leases) }()
	for _, l := range leases {
		info, err := e.store.PartitionInfo(ctx, l.Partition)
		if err != nil || info.Head == 0 {
			continue
		}
		res, err := e.store.SaveProgress(ctx, []store.ProgressParams{{Partition: l.Partition, Epoch: l.Epoch, Checkpoint: info.Head}})
		if err != nil || res[0].Err != nil {
			continue
		}
		for {
			n, err := tr.TrimConsumed(ctx, &store.TrimConsumedParams{Partition: l.Partition, Max: 1000})
			if err != nil || n == 0 {
				break
			}
		}
	}
}

func benchLogRead(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	body := payload(e.cfg.size)
	defer e.trimAll(ctx, int32(e.cfg.partitions))
	for n := e.cfg.messages; n > 0; {
		k := min(n, 500)
		recs := make([]store.NewRecord, k)
		for i := range recs {
			recs[i] = store.NewRecord{Namespace: "bench", Key: "k", Payload: body}
		}
		if _, err := e.store.Append(ctx, &store.AppendParams{Partition: 0, Records: recs}); err != nil {
			return nil, err
		}
		n -= k
	}
	batch := max(e.cfg.batch, 1)
	info, err := e.store.PartitionInfo(ctx, 0)
	if err != nil {
		return nil, err
	}
	var lat latencies
	start := time.Now()
	first := info.Trimmed
	after := first
	for {
		t0 := time.Now()
		recs, err := e.store.Read(ctx, &store.ReadParams{Partition: 0, After: after, Max: batch})
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			break
		}
		lat.add(time.Since(t0))
		after = recs[len(recs)-1].Position
	}
	r := result(after-first, time.Since(start), &lat)
	r.Batch = batch
	r.Note = "p50/p99: one read"
	return []benchResult{r}, nil
}

// rawInserter is what a backend offers for the raw-insert scenarios.
type rawInserter interface {
	RawSetup(ctx context.Context) error
	RawMethod(rows int) string
	RawInsert(ctx context.Context, payloads [][]byte) error
	RawInsertNaive(ctx context.Context, payloads [][]byte) error
	RawTeardown(ctx context.Context) error
}

// benchRawInsert measures the database's own limit: transactions of
// --batch rows, committed the fastest way the backend has.
func benchRawInsert(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	return benchRaw(ctx, e, false)
}

// benchRawInsertNaive is raw-insert with one INSERT statement a row.
func benchRawInsertNaive(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	return benchRaw(ctx, e, true)
}

func benchRaw(ctx context.Context, e *benchEnv, naive bool) ([]benchResult, error) {
	raw, ok := e.backend.(rawInserter)
	if !ok {
		return nil, fmt.Errorf("the %s backend cannot run raw-insert", e.backend.Features().Name)
	}
	if e.cfg.batch < 1 {
		return nil, fmt.Errorf("raw-insert: --batch must be at least 1")
	}
	insert, method := raw.RawInsert, raw.RawMethod(e.cfg.batch)
	if naive {
		insert, method = raw.RawInsertNaive, "naive"
	}
	if err := raw.RawSetup(ctx); err != nil {
		return nil, err
	}
	defer raw.RawTeardown(context.WithoutCancel(ctx))
	body := payload(e.cfg.size)
	var lat latencies
	count, elapsed, err := timed(ctx, e.cfg.clients, e.cfg.duration, func(ctx context.Context, _ int) (int, error) {
		rows := make([][]byte, e.cfg.batch)
		for i := range rows {
			rows[i] = body
		}
		start := time.Now()
		if err := insert(ctx, rows); err != nil {
			return 0, err
		}
		lat.add(time.Since(start))
		return len(rows), nil
	})
	if err != nil {
		return nil, err
	}
	r := result(count, elapsed, &lat)
	r.Clients, r.Batch, r.Method = e.cfg.clients, e.cfg.batch, method
	r.Note = "p50/p99: one transaction"
	return []benchResult{r}, nil
}

// sqliteSynchronous adds SQLite's synchronous setting to a SQLite DSN
// (sqlite://, a path, or sqlite-DRIVER:// of a driver of
// store/sqlite/sqlitedrivers) that does not name one; other DSNs are
// returned as they are.
func sqliteSynchronous(dsn, sync string) string {
	scheme := store.Scheme(dsn)
	if sync == "" || (scheme != "sqlite" && !strings.HasPrefix(scheme, "sqlite-")) || strings.Contains(dsn, "synchronous=") {
		return dsn
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "synchronous=" + sync
}
