package stream

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/backoff"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Leases is the balancer of a cluster: the nodes of a tenant register in
// the database, heartbeat, and share its partitions through leases,
// within their group: the nodes of a group handle the same consumers, and
// each group leases every partition to one of its nodes. Each
// heartbeat interval a node renews what it holds, acquires free
// partitions (released, or whose lease ended) up to its share, and gives
// back what it holds beyond its share, after its agents stored their
// final progress (an agent slow to do so is left to finish, and its
// lease to end: the heartbeats go on meanwhile). Shares are even: with n
// live nodes, sorted by id, each pulls P/n partitions and the first P mod
// n one more. A node counts in
// the others' shares only once it has been alive for two heartbeat
// intervals, so that one that comes and goes does not make partitions
// bounce.
//
// A consumer is handled by one group at a time: a node that finds a live
// node of another group, started before it, handling one of its
// consumers refuses to start (ErrConsumerConflict), and one that finds
// such a node later (both started at once) gives up its partitions
// until that node is gone.
type Leases struct {
	Store store.Store
	// Node is this node's id, unique to this run of this process;
	// Address where operators reach it.
	Node    string
	Address string
	// Group is the node's group ("" by default); Consumers the consumers
	// it handles, set before Join.
	Group     string
	Consumers []string
	// HeartbeatInterval is how often the node heartbeats, renews and
	// rebalances; FailureTimeout how old a heartbeat may be for its node
	// to count as alive, and how long a lease lasts unless renewed.
	HeartbeatInterval time.Duration
	FailureTimeout    time.Duration
	// Alone makes the node refuse to start beside another live node
	// (ErrSingleNode): for backends where one node pulls a tenant's
	// partitions (SQLite).
	Alone  bool
	Logger *slog.Logger

	held map[int32]store.PartitionLease // owned by Run's goroutine
	// stopping are the partitions whose agents the last Pull left still
	// stopping: not acquired again until they finished.
	stopping []int32
	// conflict is the rival the last heartbeat found (nil: none);
	// conflicted says the last round gave up its partitions for one.
	conflict   *store.Node
	conflicted bool
	// warned holds the peers of the group found handling other consumers.
	warned map[string]bool
}

// Cluster defaults.
const (
	DefaultHeartbeatInterval = time.Second
	DefaultFailureTimeout    = 5 * time.Second
)

func (l *Leases) withDefaults() {
	if l.HeartbeatInterval <= 0 {
		l.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if l.FailureTimeout <= 0 {
		l.FailureTimeout = max(DefaultFailureTimeout, 3*l.HeartbeatInterval)
	}
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
}

func (l *Leases) heartbeat(ctx context.Context) ([]store.Node, error) {
	nodes, err := l.Store.Heartbeat(ctx, &store.HeartbeatParams{
		Node: l.Node, Group: l.Group, Consumers: l.Consumers, Address: l.Address, Timeout: l.FailureTimeout,
		Forget: max(time.Hour, 10*l.FailureTimeout),
	})
	if err != nil {
		return nil, err
	}
	l.conflict = nil
	if r := l.rival(nodes); r != nil {
		other := *r // the filter below overwrites nodes
		l.conflict = &other
	}
	nodes = slices.DeleteFunc(nodes, func(n store.Node) bool { return n.Group != l.Group })
	l.checkPeers(nodes)
	return nodes, nil
}

// checkPeers warns, once per peer, of a live node of this node's group
// that handles other consumers: each partition goes to one node of the
// group, so consumers that only some nodes handle miss the events of
// the partitions the others pull.
func (l *Leases) checkPeers(nodes []store.Node) {
	for _, n := range nodes {
		if n.ID == l.Node || !n.Alive || slices.Equal(n.Consumers, l.Consumers) || l.warned[n.ID] {
			continue
		}
		if l.warned == nil {
			l.warned = make(map[string]bool)
		}
		l.warned[n.ID] = true
		l.Logger.Warn("sluice: a stream node of this group handles other consumers: give processors that handle "+
			"different consumers groups of their own (StreamProcessorOptions.Group)",
			"group", l.Group, "peer", n.ID, "peer_consumers", n.Consumers, "consumers", l.Consumers)
	}
}

// rival returns a live node of another group, started before this one,
// that handles one of this node's consumers, if any.
func (l *Leases) rival(nodes []store.Node) *store.Node {
	me := slices.IndexFunc(nodes, func(n store.Node) bool { return n.ID == l.Node })
	for i, n := range nodes {
		if n.Group == l.Group || !n.Alive || !slices.ContainsFunc(n.Consumers, func(c string) bool { return slices.Contains(l.Consumers, c) }) {
			continue
		}
		if me < 0 || n.StartedAt.Before(nodes[me].StartedAt) || n.StartedAt.Equal(nodes[me].StartedAt) && n.ID < l.Node {
			return &nodes[i]
		}
	}
	return nil
}

// conflictError describes the node of another group that handles one of
// this node's consumers.
func (l *Leases) conflictError(other *store.Node) error {
	shared := slices.DeleteFunc(slices.Clone(l.Consumers), func(c string) bool { return !slices.Contains(other.Consumers, c) })
	return fmt.Errorf("sluice: stream node: consumer %s is handled by node %s of group %q: %w",
		strings.Join(shared, ", "), other.ID, other.Group, sluicetype.ErrConsumerConflict)
}

// Join registers the node. With Alone, while another node that started
// first is alive, it waits for that node to fall silent (one that
// crashed does within FailureTimeout) and fails with ErrSingleNode, after
// leaving again, if it does not.
func (l *Leases) Join(ctx context.Context) error {
	l.withDefaults()
	if l.FailureTimeout <= l.HeartbeatInterval {
		return fmt.Errorf("sluice: stream node: failure timeout %v is not longer than the heartbeat interval %v: %w",
			l.FailureTimeout, l.HeartbeatInterval, sluicetype.ErrInvalidArgument)
	}
	deadline := time.Now().Add(l.FailureTimeout + l.HeartbeatInterval)
	for {
		nodes, err := l.heartbeat(ctx)
		if err != nil {
			return err
		}
		if l.conflict != nil {
			_ = l.Store.LeaveCluster(context.WithoutCancel(ctx), l.Node)
			return l.conflictError(l.conflict)
		}
		other := l.runningBefore(nodes)
		if !l.Alone || other == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = l.Store.LeaveCluster(context.WithoutCancel(ctx), l.Node)
			return fmt.Errorf("sluice: stream node: node %s is running (last heartbeat %v): %w",
				other.ID, other.HeartbeatAt.Format(time.RFC3339Nano), sluicetype.ErrSingleNode)
		}
		select {
		case <-ctx.Done():
			_ = l.Store.LeaveCluster(context.WithoutCancel(ctx), l.Node)
			return ctx.Err()
		case <-time.After(l.HeartbeatInterval):
		}
	}
}

// runningBefore returns a live node that started before this one, if any.
func (l *Leases) runningBefore(nodes []store.Node) *store.Node {
	me := slices.IndexFunc(nodes, func(n store.Node) bool { return n.ID == l.Node })
	for i, n := range nodes {
		if n.ID == l.Node || !n.Alive {
			continue
		}
		if me < 0 || n.StartedAt.Before(nodes[me].StartedAt) || n.StartedAt.Equal(nodes[me].StartedAt) && n.ID < l.Node {
			return &nodes[i]
		}
	}
	return nil
}

// Run balances until ctx ends: a round every heartbeat interval, and
// one right after a node or a lease it waits for may have ended.
func (l *Leases) Run(ctx context.Context, n int32, p Puller) {
	l.held = make(map[int32]store.PartitionLease)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		next := l.HeartbeatInterval
		if soon := l.round(ctx, n, p); soon > 0 && soon < next {
			next = max(soon, l.HeartbeatInterval/8)
		}
		timer.Reset(time.Until(start.Add(next)))
	}
}

// wakeMargin is how long after a heartbeat or a lease may have ended, by
// the database's clock, a round looks again.
const wakeMargin = 10 * time.Millisecond

// round is one heartbeat: renew, acquire up to the node's share, give
// back beyond it. It returns how soon, from its start, another node's
// heartbeat or, while the node holds less than its share, another node's
// lease ends unless renewed (0: nothing before the next heartbeat): when
// a node dies, its peers act on it right away rather than up to a
// heartbeat interval later.
func (l *Leases) round(ctx context.Context, n int32, p Puller) time.Duration {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, l.FailureTimeout)
	defer cancel()
	nodes, err := l.heartbeat(rctx)
	if err != nil {
		l.Logger.Warn("sluice: stream node cannot heartbeat", "err", err)
		return 0
	}
	share := l.share(nodes, n)
	if l.conflict != nil {
		// Another group took one of this node's consumers first (both
		// started at once): pull nothing while it runs.
		if !l.conflicted {
			l.Logger.Error("sluice: stream node gives up its partitions", "err", l.conflictError(l.conflict))
		}
		share = 0
	}
	l.conflicted = l.conflict != nil
	leases, err := l.Store.Leases(rctx)
	if err != nil {
		l.Logger.Warn("sluice: stream node cannot list leases", "err", err)
		return 0
	}
	leases = slices.DeleteFunc(leases, func(ls store.PartitionLease) bool { return ls.Group != l.Group })
	var acquire []int32
	if want := share - len(l.held); want > 0 {
		acquire = l.free(leases, n, want)
	}
	got, err := l.Store.LeasePartitions(rctx, &store.PartitionLeaseParams{
		Node: l.Node, Group: l.Group, Renew: l.renewals(p), Acquire: acquire, Duration: l.FailureTimeout,
	})
	if err != nil {
		l.Logger.Warn("sluice: stream node cannot renew its leases", "err", err)
		return 0
	}
	held := make(map[int32]store.PartitionLease, len(got))
	for _, g := range got {
		held[g.Partition] = g
	}
	for part, old := range l.held {
		if g, ok := held[part]; !ok || g.Epoch != old.Epoch {
			l.Logger.Warn("sluice: stream node lost a partition's lease", "partition", part, "epoch", old.Epoch)
		}
	}
	// Beyond its share, the node gives back its highest partitions.
	var give []store.PartitionLease
	if extra := len(held) - share; extra > 0 {
		sorted := slices.SortedFunc(maps.Values(held), func(a, b store.PartitionLease) int { return cmp.Compare(b.Partition, a.Partition) })
		give = sorted[:extra]
		for _, g := range give {
			delete(held, g.Partition)
		}
	}
	l.held = held
	// Leases last FailureTimeout from a moment after start, by the
	// database's clock: on this node's clock, deliveries may start until
	// start + FailureTimeout.
	// Agents given back or lost stop with their deliveries cut short at
	// half a lease, so that this round ends, and the next renews, well
	// before the leases renewed now end (deliveries cut short are
	// delivered again by the next owner).
	// Pull waits for them at most three quarters of a lease: an agent
	// whose final save is slow is left to finish, and its partition's
	// lease, not given back, ends by itself.
	pctx, cancelPull := context.WithTimeout(ctx, l.FailureTimeout/2)
	defer cancelPull()
	l.stopping = p.Pull(pctx, slices.Collect(maps.Values(held)), start.Add(l.FailureTimeout))
	give = slices.DeleteFunc(give, func(g store.PartitionLease) bool {
		if slices.Contains(l.stopping, g.Partition) {
			l.Logger.Warn("sluice: stream agent slow to stop; its partition's lease will end rather than be given back",
				"partition", g.Partition, "epoch", g.Epoch)
			return true
		}
		return false
	})
	if len(give) > 0 {
		if err := l.Store.ReleasePartitions(context.WithoutCancel(rctx), l.Node, give); err != nil {
			l.Logger.Warn("sluice: stream node cannot give back partitions; their leases will end", "err", err)
		}
	}
	soon := l.soonest(nodes, leases, share)
	if missed := slices.ContainsFunc(acquire, func(part int32) bool { _, ok := held[part]; return !ok }); missed && len(held) < share {
		// Another node took a partition this one asked for (nodes that
		// act on one node's death wake at once): look again soon, with
		// jitter, at what is still free. Equal jitter keeps the wait
		// above the eighth of a heartbeat that Run waits at least, so
		// nodes that raced do not all come back at that floor.
		retry := wakeMargin + backoff.Jitter(l.HeartbeatInterval/4)
		if soon == 0 || retry < soon {
			soon = retry
		}
	}
	return soon
}

// renewals are the leases the node holds, each with what its agent's
// cache of the partition holds as the agent last published it (nothing
// for an agent of another epoch, or one that has published nothing yet):
// the renewal stores them, for cluster status to read.
func (l *Leases) renewals(p Puller) []store.PartitionLease {
	caches := make(map[int32]PartitionStats, len(l.held))
	for _, ps := range p.Stats() {
		caches[ps.Partition] = ps
	}
	out := make([]store.PartitionLease, 0, len(l.held))
	for _, h := range l.held {
		h.CacheWindows, h.CachedRecords = 0, 0
		if ps, ok := caches[h.Partition]; ok && ps.Epoch == h.Epoch {
			h.CacheWindows, h.CachedRecords = len(ps.Windows), int64(ps.CachedRecords)
		}
		out = append(out, h)
	}
	return out
}

// soonest is how long after the heartbeat that listed nodes another
// node's heartbeat may go stale, or, while this node holds less than its
// share, another node's lease may end; 0 when nothing does. The times are
// the database's, taken relative to this node's heartbeat.
func (l *Leases) soonest(nodes []store.Node, leases []store.PartitionLease, share int) time.Duration {
	me := slices.IndexFunc(nodes, func(n store.Node) bool { return n.ID == l.Node })
	if me < 0 {
		return 0
	}
	now := nodes[me].HeartbeatAt
	var soon time.Duration
	consider := func(end time.Time) {
		if d := end.Sub(now) + wakeMargin; d > 0 && (soon == 0 || d < soon) {
			soon = d
		}
	}
	for _, nd := range nodes {
		if nd.ID != l.Node && nd.Alive {
			consider(nd.HeartbeatAt.Add(nd.Timeout))
		}
	}
	if len(l.held) < share {
		for _, ls := range leases {
			if ls.Held && ls.Owner != l.Node {
				consider(ls.Until)
			}
		}
	}
	return soon
}

// share is how many partitions this node should pull: its rank among
// the live nodes it counts decides whether it takes one of the remainder.
func (l *Leases) share(nodes []store.Node, n int32) int {
	if l.Alone {
		return int(n) // a node refused beside this one counts for nothing
	}
	var now time.Time
	for _, nd := range nodes {
		if nd.HeartbeatAt.After(now) {
			now = nd.HeartbeatAt
		}
	}
	var ids []string
	for _, nd := range nodes {
		if nd.ID == l.Node || nd.Alive && now.Sub(nd.StartedAt) >= 2*l.HeartbeatInterval {
			ids = append(ids, nd.ID)
		}
	}
	if !slices.Contains(ids, l.Node) {
		ids = append(ids, l.Node)
	}
	slices.Sort(ids)
	rank := slices.Index(ids, l.Node)
	count := len(ids)
	s := int(n) / count
	if rank < int(n)%count {
		s++
	}
	return s
}

// free picks up to want partitions nobody holds, starting at a place of
// this node's own so that nodes acquiring at once rarely want the same.
func (l *Leases) free(leases []store.PartitionLease, n int32, want int) []int32 {
	held := make(map[int32]bool, len(leases)+len(l.held))
	for _, ls := range leases {
		if ls.Held {
			held[ls.Partition] = true
		}
	}
	for part := range l.held {
		held[part] = true // renewed, not acquired, even if its lease ended
	}
	for _, part := range l.stopping {
		held[part] = true // its agent would not start before the old one finished
	}
	h := fnv.New64a()
	h.Write([]byte(l.Node))
	offset := int32(h.Sum64() % uint64(n))
	var out []int32
	for i := range n {
		part := (offset + i) % n
		if !held[part] {
			out = append(out, part)
			if len(out) == want {
				break
			}
		}
	}
	return out
}

// Leave gives back the leases of the stopped agents and the registration.
func (l *Leases) Leave(ctx context.Context, held []store.PartitionLease) {
	ctx = context.WithoutCancel(ctx)
	if len(held) > 0 {
		if err := l.Store.ReleasePartitions(ctx, l.Node, held); err != nil {
			l.Logger.Warn("sluice: stream node cannot give back its partitions; their leases will end", "err", err)
		}
	}
	if err := l.Store.LeaveCluster(ctx, l.Node); err != nil {
		l.Logger.Warn("sluice: stream node cannot leave the cluster; it will count as gone once silent", "err", err)
	}
}
