package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Config configures a node. Zero fields take their defaults.
type Config struct {
	// Store is the tenant's store.
	Store store.Store
	// Partitions is the number of partitions streams hash onto (default
	// 16). It must match the number recorded in the database.
	Partitions int32
	// Balancer assigns partitions to the node (required).
	Balancer Balancer
	// Group is the node's group, whose leases its balancer hands out
	// (default ""): the leases that fence the node's writes.
	Group string
	// PollInterval is the wait between reads of a partition that had
	// records; reads back off to IdlePollInterval while none come
	// (defaults 100 ms and 1 s). A publish wakes the agent at once.
	PollInterval     time.Duration
	IdlePollInterval time.Duration
	// ReadBatch bounds one read (default 256 records).
	ReadBatch int
	// CacheRecords and CacheBytes bound each partition's cache (defaults
	// 4,096 records and 16 MiB).
	CacheRecords int
	CacheBytes   int64
	// CacheWindows bounds the resident windows of each partition's cache
	// (default 4; 1 keeps one contiguous window), and WindowLimit says
	// what happens at that bound (default WindowLimitShare).
	CacheWindows int
	WindowLimit  WindowLimitPolicy
	// ProgressInterval is how often progress is stored, every partition of
	// the node in one transaction (default 200 ms); RefreshInterval how
	// often subscriptions are listed again (default 1 s); TrimInterval
	// how often retention trims a partition, with its progress (default
	// 1 s).
	ProgressInterval time.Duration
	RefreshInterval  time.Duration
	TrimInterval     time.Duration
	// LaggingRate bounds the events a second that lagging windows (those
	// behind a partition's head window: a replay, a rewind, a slow
	// subscription's) start delivering across the node, while a head
	// window has started a delivery within the last second (default
	// DefaultLaggingRate; math.MaxInt: no bound). A replay then takes a
	// bounded share of the node, and live subscriptions keep their
	// latency; with nobody live it goes as fast as its handlers. Each
	// lagging subscription may go faster, up to twice its partition's
	// inflow (see lagInflowShare), so that it always catches up.
	LaggingRate int
	Logger      *slog.Logger
}

// Config defaults.
const (
	DefaultPollInterval     = 100 * time.Millisecond
	DefaultIdlePollInterval = time.Second
	DefaultReadBatch        = 256
	DefaultCacheRecords     = 4096
	DefaultCacheBytes       = 16 << 20
	DefaultCacheWindows     = 4
	DefaultProgressInterval = 200 * time.Millisecond
	DefaultRefreshInterval  = time.Second
	DefaultTrimInterval     = time.Second
)

func (c Config) withDefaults() Config {
	if c.Partitions <= 0 {
		c.Partitions = DefaultPartitions
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.IdlePollInterval < c.PollInterval {
		c.IdlePollInterval = max(DefaultIdlePollInterval, c.PollInterval)
	}
	if c.ReadBatch <= 0 {
		c.ReadBatch = DefaultReadBatch
	}
	if c.CacheRecords <= 0 {
		c.CacheRecords = DefaultCacheRecords
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.CacheWindows <= 0 {
		c.CacheWindows = DefaultCacheWindows
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.TrimInterval <= 0 {
		c.TrimInterval = DefaultTrimInterval
	}
	if c.LaggingRate <= 0 {
		c.LaggingRate = DefaultLaggingRate
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// cacheConfig is what bounds each agent's cache.
func (n *Node) cacheConfig() cacheConfig {
	return cacheConfig{records: n.cfg.CacheRecords, bytes: n.cfg.CacheBytes, batch: n.cfg.ReadBatch,
		windows: n.cfg.CacheWindows, policy: n.cfg.WindowLimit}
}

// Balancer decides which partitions a node pulls.
type Balancer interface {
	// Join registers the node before it starts; it fails when the node
	// may not run.
	Join(ctx context.Context) error
	// Run hands the node its partitions through p, at once and whenever
	// they change, until ctx ends.
	Run(ctx context.Context, n int32, p Puller)
	// Leave gives up the leases of the node's agents, which have stopped
	// and stored their final progress, and the node's registration.
	Leave(ctx context.Context, held []store.PartitionLease)
}

// Puller is a node as its balancer drives it.
type Puller interface {
	// Pull makes the node pull exactly the partitions of leases. It stops
	// the agents of the others, which wait for their deliveries until ctx
	// ends, cancel the rest and store their final progress, and starts
	// agents for new ones under the leases' epochs. Agents start
	// deliveries only until the deadline; a later Pull extends it.
	//
	// Pull waits for the agents it stops until ctx ends and half as long
	// again (from its start) for their final saves, and returns the
	// partitions whose agents were still stopping then, in order: their
	// leases must not be given back yet. A slow save holds up no
	// heartbeat: such an agent finishes on its own, and its partition
	// gets a new agent only after that, on a later Pull.
	Pull(ctx context.Context, leases []store.PartitionLease, until time.Time) (stopping []int32)
	// Stats describes the partitions the node pulls (Node.Stats): the
	// balancer stores what each one's cache holds with its lease.
	Stats() []PartitionStats
}

// Node runs the pulling agents of the partitions its balancer gives it,
// for the consumers registered on it.
type Node struct {
	born      time.Time // the node's clock (monotonic) starts here
	cfg       Config
	st        store.Store
	consumers map[string]*Consumer
	saver     *saver

	mu      sync.Mutex
	started bool
	agents  map[int32]*agent
	// stopping holds the agents a Pull stopped that had not finished when
	// it returned, by partition.
	stopping map[int32]*agent
	cancel   context.CancelFunc
	// stopped is closed when the Stop that took cancel has finished.
	stopped chan struct{}
	balWG   sync.WaitGroup
	// watchers get a signal when subscriptions change in this process.
	watchers map[chan struct{}]struct{}
	// lag bounds the deliveries of lagging windows across the agents.
	lag *lagThrottle
}

// NewNode returns a node; register consumers, then Start it.
func NewNode(cfg Config) *Node {
	cfg = cfg.withDefaults()
	born := time.Now()
	return &Node{born: born, cfg: cfg, st: cfg.Store, consumers: make(map[string]*Consumer),
		agents: make(map[int32]*agent), stopping: make(map[int32]*agent), watchers: make(map[chan struct{}]struct{}),
		lag: newLagThrottle(cfg.LaggingRate, born)}
}

// Register adds a consumer. It fails once the node has started, or when
// the name is taken.
func (n *Node) Register(c Consumer) error {
	if err := store.ValidateName("consumer", c.Name); err != nil {
		return fmt.Errorf("sluice: register consumer: %w", err)
	}
	if c.Handler == nil {
		return fmt.Errorf("sluice: register consumer %q: no handler: %w", c.Name, sluicetype.ErrInvalidArgument)
	}
	if c.Namespace != "" {
		if err := store.ValidateName("namespace", c.Namespace); err != nil {
			return fmt.Errorf("sluice: register consumer %q: %w", c.Name, err)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		return fmt.Errorf("sluice: register consumer %q: the node has started: %w", c.Name, sluicetype.ErrInvalidArgument)
	}
	if _, ok := n.consumers[c.Name]; ok {
		return fmt.Errorf("sluice: register consumer %q: %w", c.Name, sluicetype.ErrEntityExists)
	}
	c = c.WithDefaults()
	n.consumers[c.Name] = &c
	return nil
}

// ImplicitID is the handle of a consumer's subscription to a whole
// namespace.
func ImplicitID(namespace, consumer string) string {
	return "ns/" + namespace + "/" + consumer
}

// ImplicitConsumers returns the consumers whose implicit subscription id
// could be (namespaces and consumers may both hold '/', so each split
// names one), or nil when id is not of that form.
func ImplicitConsumers(id string) []string {
	rest, ok := strings.CutPrefix(id, "ns/")
	if !ok {
		return nil
	}
	var out []string
	for i := 1; i < len(rest)-1; i++ {
		if rest[i] == '/' {
			out = append(out, rest[i+1:])
		}
	}
	return out
}

// CheckPartitions records the configured partition count on first use
// and fails with ErrPartitionCount when the database holds another.
func CheckPartitions(ctx context.Context, st store.Store, n int32) error {
	got, err := st.StreamPartitions(ctx, n)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("sluice: configured for %d stream partitions, the database has %d (changing it would strand events): %w",
			n, got, sluicetype.ErrPartitionCount)
	}
	return nil
}

// Start checks the partition count, stores the implicit subscriptions of
// the registered consumers (from the current end of each partition, the
// first time), and starts pulling the partitions the balancer assigns.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return fmt.Errorf("sluice: start stream node: started already: %w", sluicetype.ErrInvalidArgument)
	}
	n.started = true
	n.mu.Unlock()
	if n.cfg.Balancer == nil {
		return fmt.Errorf("sluice: start stream node: no balancer: %w", sluicetype.ErrInvalidArgument)
	}
	if err := CheckPartitions(ctx, n.st, n.cfg.Partitions); err != nil {
		return err
	}
	if err := n.cfg.Balancer.Join(ctx); err != nil {
		return err
	}
	joined := true
	defer func() {
		if joined {
			n.cfg.Balancer.Leave(ctx, nil) // Start failed after joining
		}
	}()
	for _, name := range slices.Sorted(maps.Keys(n.consumers)) {
		c := n.consumers[name]
		if c.Namespace == "" {
			continue
		}
		if err := n.ensureImplicit(ctx, c); err != nil {
			return err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	n.mu.Lock()
	n.cancel, n.stopped = cancel, make(chan struct{})
	n.mu.Unlock()
	n.saver = newSaver(n)
	go n.saver.run()
	n.balWG.Add(1)
	go func() {
		defer n.balWG.Done()
		n.cfg.Balancer.Run(runCtx, n.cfg.Partitions, n)
	}()
	joined = false
	return nil
}

func (n *Node) ensureImplicit(ctx context.Context, c *Consumer) error {
	id := ImplicitID(c.Namespace, c.Name)
	subs, err := n.st.Subscriptions(ctx, &store.SubscriptionFilter{ID: id})
	if err != nil || len(subs) > 0 {
		return err
	}
	start := make(map[int32]int64, n.cfg.Partitions)
	for p := range n.cfg.Partitions {
		info, err := n.st.PartitionInfo(ctx, p)
		if err != nil {
			return err
		}
		start[p] = info.Head
	}
	err = n.st.CreateSubscription(ctx, &store.NewSubscription{ID: id, Consumer: c.Name, Namespace: c.Namespace,
		Partition: store.NoPartition, Start: start})
	if errors.Is(err, sluicetype.ErrEntityExists) {
		return nil // another node stored it first
	}
	return err
}

// Pull implements Puller.
func (n *Node) Pull(ctx context.Context, leases []store.PartitionLease, until time.Time) []int32 {
	want := make(map[int32]store.PartitionLease, len(leases))
	for _, l := range leases {
		want[l.Partition] = l
	}
	n.mu.Lock()
	var gone []*agent
	for p, a := range n.agents {
		if l, ok := want[p]; !ok || l.Epoch != a.lease.Epoch {
			gone = append(gone, a)
			delete(n.agents, p)
			n.stopping[p] = a
		} else {
			a.extend(until) // now: the wait below may outlast the last extension
		}
	}
	n.mu.Unlock()
	for _, a := range gone {
		a.stop <- ctx
	}
	if len(gone) > 0 {
		wait := ctx
		if d, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			wait, cancel = context.WithDeadline(context.WithoutCancel(ctx), d.Add(time.Until(d)/2))
			defer cancel()
		}
		for _, a := range gone {
			select {
			case <-a.done:
			case <-wait.Done():
			}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for p, a := range n.stopping {
		if isDone(a) {
			delete(n.stopping, p)
		}
	}
	for _, l := range leases {
		if _, old := n.stopping[l.Partition]; old {
			continue // its agent starts once the one before it finished
		}
		a, running := n.agents[l.Partition]
		if !running {
			a = newAgent(n, l)
			n.agents[l.Partition] = a
		}
		a.extend(until)
		if !running {
			go a.run()
		}
	}
	return slices.Sorted(maps.Keys(n.stopping))
}

func isDone(a *agent) bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// stopAgents stops agents in parallel and waits for them.
func stopAgents(ctx context.Context, agents []*agent) {
	for _, a := range agents {
		a.stop <- ctx
	}
	for _, a := range agents {
		<-a.done
	}
}

// Stop stops the node: each agent stops admitting work, waits for its
// deliveries until ctx ends (then cancels them), and stores its final
// progress. Stop waits for all of that; it is safe to call twice, and
// at once: a second call waits for the first to finish.
func (n *Node) Stop(ctx context.Context) error {
	n.mu.Lock()
	cancel, stopped := n.cancel, n.stopped
	n.cancel = nil
	n.mu.Unlock()
	if cancel == nil {
		if stopped != nil {
			<-stopped
		}
		return nil
	}
	defer close(stopped)
	cancel()
	n.balWG.Wait()
	n.mu.Lock()
	agents := slices.Collect(maps.Values(n.agents))
	n.agents = make(map[int32]*agent)
	stopping := slices.Collect(maps.Values(n.stopping))
	n.stopping = make(map[int32]*agent)
	n.mu.Unlock()
	// No renewal runs from here: deliveries end (or are cut short, and
	// delivered again by the next owner) before the first lease may end,
	// so that no other node delivers a partition while this one still
	// does.
	if len(agents) > 0 {
		until := slices.MinFunc(agents, func(a, b *agent) int { return cmp.Compare(a.until.Load(), b.until.Load()) }).until.Load()
		var cancelDrain context.CancelFunc
		ctx, cancelDrain = context.WithDeadline(ctx, n.born.Add(time.Duration(until)))
		defer cancelDrain()
	}
	stopAgents(ctx, agents)
	for _, a := range stopping { // stopped by a Pull already
		<-a.done
	}
	close(n.saver.stop)
	<-n.saver.done
	// Those a Pull could not give back too: a release names the lease's
	// epoch, so it changes nothing once another node acquired it.
	agents = append(agents, stopping...)
	held := make([]store.PartitionLease, 0, len(agents))
	for _, a := range agents {
		if !a.fenced.Load() {
			held = append(held, store.PartitionLease{Group: n.cfg.Group, Partition: a.partition, Epoch: a.epoch})
		}
	}
	n.cfg.Balancer.Leave(ctx, held)
	return nil
}

// SubscriptionsChanged tells the node's agents to list subscriptions
// again at once (they also do every RefreshInterval).
func (n *Node) SubscriptionsChanged() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (n *Node) watchSubscriptions() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	n.watchers[ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.watchers, ch)
		n.mu.Unlock()
	}
}

// PartitionStats describes one partition an agent pulls.
type PartitionStats struct {
	Partition int32
	Epoch     int64
	// Read is the last position read.
	Read int64
	// ProposedCheckpoint is the checkpoint this node last proposed: the
	// lowest position of the subscriptions it handles, never past Read.
	// StoredCheckpoint is the partition's checkpoint as its last save
	// stored it: the proposal capped by the lowest stored position of
	// every subscription of the partition (those of consumers no node of
	// this group handles, or of other groups, hold it back), and never
	// moved back. Retention trims no further than the stored one.
	ProposedCheckpoint int64
	StoredCheckpoint   int64
	// CachedRecords and CachedBytes are what the cache holds, in all its
	// windows (a record is held once).
	CachedRecords int
	CachedBytes   int64
	// Windows are the cache's resident windows, ascending; the last one
	// is the head window, which reads ahead. Splits and Merges count the
	// windows split off for lagging subscriptions and merged back since
	// the agent started; RehydrationReads and RehydratedRecords the reads
	// of lagging windows (the log read again for lagging subscriptions)
	// and the records they brought.
	Windows                             []WindowStats
	Splits, Merges                      int64
	RehydrationReads, RehydratedRecords int64
	// Reclaimed counts the records dropped from a window's read-ahead to
	// give another window its reserve (read again later).
	Reclaimed int64
	// Resets, ReadsAvoided and DuplicateReads: see CacheStats.
	Resets, ReadsAvoided, DuplicateReads int64
	// RetentionGaps counts the subscriptions that met a retention gap
	// here (see ErrRetentionGap).
	RetentionGaps int64
	// LaggingHeld counts the times a lagging window here had an event to
	// deliver that the node's LaggingRate held back (a replay slower than
	// its handlers shows here).
	LaggingHeld   int64
	Subscriptions []SubscriptionStats
	SavedAt       time.Time
	TrimmedAt     time.Time
	// Stopped says why the agent stopped pulling the partition while the
	// node runs (another node acquired it: ErrFenced).
	Stopped string
}

// SubscriptionStats describes a subscription on one partition.
type SubscriptionStats struct {
	ID       string
	Consumer string
	// Position: every record at or below it is done. Cursor: every
	// record at or below it was examined (queued, in delivery, done, or
	// of no concern); Cursor - Position is how far it walked ahead of its
	// oldest unresolved event.
	Position int64
	Cursor   int64
	// Handled: a consumer of this node delivers it.
	Handled  bool
	InFlight int
	Fault    string
	// Window is the index in PartitionStats.Windows of the window it
	// reads (-1: none, as when it is faulted or not handled here).
	Window int
}

func (a *agent) publishStats() {
	recs, bytes := a.cache.Size()
	cs := a.cache.Stats()
	st := PartitionStats{Partition: a.partition, Epoch: a.epoch, Read: a.cache.ReadThrough(),
		ProposedCheckpoint: a.proposed, StoredCheckpoint: a.stored, CachedRecords: recs, CachedBytes: bytes,
		Windows: cs.Windows, Splits: cs.Splits, Merges: cs.Merges,
		RehydrationReads: cs.RehydrationReads, RehydratedRecords: cs.RehydratedRecords, Reclaimed: cs.Reclaimed,
		Resets: cs.Resets, ReadsAvoided: cs.ReadsAvoided, DuplicateReads: cs.DuplicateReads, RetentionGaps: a.gaps,
		LaggingHeld: a.heldTotal}
	for _, id := range slices.Sorted(maps.Keys(a.subs)) {
		s := a.subs[id]
		pos := s.cursor
		if s.c != nil {
			pos = s.safe()
		}
		st.Subscriptions = append(st.Subscriptions, SubscriptionStats{ID: id, Consumer: s.sub.Consumer, Position: pos,
			Cursor: s.cursor, Handled: s.c != nil, InFlight: s.inflight, Fault: s.sub.Fault, Window: a.cache.Index(s)})
	}
	a.statsMu.Lock()
	st.SavedAt, st.TrimmedAt, st.Stopped = a.stats.SavedAt, a.stats.TrimmedAt, a.stats.Stopped
	a.stats = st
	a.statsMu.Unlock()
}

// Stats describes the partitions the node pulls, in partition order.
func (n *Node) Stats() []PartitionStats {
	n.mu.Lock()
	agents := slices.Collect(maps.Values(n.agents))
	n.mu.Unlock()
	out := make([]PartitionStats, 0, len(agents))
	for _, a := range agents {
		a.statsMu.Lock()
		out = append(out, a.stats)
		a.statsMu.Unlock()
	}
	slices.SortFunc(out, func(a, b PartitionStats) int { return int(a.Partition - b.Partition) })
	return out
}
