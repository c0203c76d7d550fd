package stream

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Leases is the balancer of a cluster: the nodes of a tenant register in
// the database, heartbeat, and share its partitions through leases. Each
// heartbeat interval a node renews what it holds, acquires free
// partitions (released, or whose lease ended) up to its share, and gives
// back what it holds beyond its share, after its agents stored their
// final progress. Shares are even: with n live nodes, sorted by id, each
// pulls P/n partitions and the first P mod n one more. A node counts in
// the others' shares only once it has been alive for two heartbeat
// intervals, so that one that comes and goes does not make partitions
// bounce.
type Leases struct {
	Store store.Store
	// Node is this node's id, unique to this run of this process;
	// Address where operators reach it.
	Node    string
	Address string
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
	return l.Store.Heartbeat(ctx, &store.HeartbeatParams{
		Node: l.Node, Address: l.Address, Timeout: l.FailureTimeout,
		Forget: max(time.Hour, 10*l.FailureTimeout),
	})
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

// Run balances until ctx ends.
func (l *Leases) Run(ctx context.Context, n int32, p Puller) {
	l.held = make(map[int32]store.PartitionLease)
	tick := time.NewTicker(l.HeartbeatInterval)
	defer tick.Stop()
	for {
		l.round(ctx, n, p)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round is one heartbeat: renew, acquire up to the node's share, give
// back beyond it.
func (l *Leases) round(ctx context.Context, n int32, p Puller) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, l.FailureTimeout)
	defer cancel()
	nodes, err := l.heartbeat(rctx)
	if err != nil {
		l.Logger.Warn("sluice: stream node cannot heartbeat", "err", err)
		return
	}
	share := l.share(nodes, n)
	leases, err := l.Store.Leases(rctx)
	if err != nil {
		l.Logger.Warn("sluice: stream node cannot list leases", "err", err)
		return
	}
	var acquire []int32
	if want := share - len(l.held); want > 0 {
		acquire = l.free(leases, n, want)
	}
	got, err := l.Store.LeasePartitions(rctx, &store.PartitionLeaseParams{
		Node: l.Node, Renew: slices.Collect(maps.Values(l.held)), Acquire: acquire, Duration: l.FailureTimeout,
	})
	if err != nil {
		l.Logger.Warn("sluice: stream node cannot renew its leases", "err", err)
		return
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
	pctx, cancelPull := context.WithTimeout(ctx, l.FailureTimeout/2)
	defer cancelPull()
	p.Pull(pctx, slices.Collect(maps.Values(held)), start.Add(l.FailureTimeout))
	if len(give) > 0 {
		if err := l.Store.ReleasePartitions(context.WithoutCancel(rctx), l.Node, give); err != nil {
			l.Logger.Warn("sluice: stream node cannot give back partitions; their leases will end", "err", err)
		}
	}
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
