package sluice

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/store"
)

// ClusterStatus describes the stream nodes of a client's tenant and the
// partitions they pull.
type ClusterStatus struct {
	// Nodes are the registered nodes, in id order.
	Nodes []ClusterNode
	// Partitions are the stream partitions, in order.
	Partitions []PartitionStatus
}

// ClusterNode is a registered stream node.
type ClusterNode struct {
	ID string
	// Group is the node's group ("" by default) and Consumers the
	// consumers it handles.
	Group       string
	Consumers   []string
	Address     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	// Alive says its last heartbeat is within its failure timeout, by
	// the database's clock.
	Alive bool
	// Partitions are those it holds a lease on, in its group.
	Partitions []int32
}

// GroupLease is a partition's lease in one group.
type GroupLease struct {
	Group string
	// Owner holds or last held the lease under Epoch; Held says it has
	// not ended ("" and false when released).
	Owner      string
	Epoch      int64
	LeaseUntil time.Time
	Held       bool
	// CacheWindows and CachedRecords are what the owner's stream cache of
	// the partition holds: its resident windows and the records in them,
	// as the owner last renewed the lease (up to a heartbeat interval
	// old); 0 while the lease is not held, or before the owner's first
	// renewal.
	CacheWindows  int
	CachedRecords int64
}

// PartitionStatus describes a stream partition: who pulls it, and how far
// its subscriptions are behind the log.
type PartitionStatus struct {
	Partition int32
	// Owner holds or last held the partition's lease under Epoch; Held
	// says the lease has not ended ("" and false when never leased or
	// released), and CacheWindows and CachedRecords what its owner's
	// stream cache of the partition holds (see GroupLease). They describe
	// the default group's lease, or, when that group never leased the
	// partition, the first other group's (by name); Leases lists every
	// group's.
	Owner         string
	Epoch         int64
	LeaseUntil    time.Time
	Held          bool
	CacheWindows  int
	CachedRecords int64
	// Head is the last position appended; Checkpoint the position
	// through which every subscription is done; Lag the records between.
	Head       int64
	Checkpoint int64
	Lag        int64
	// Subscriptions are the stored positions of the subscriptions that
	// read the partition, and their lag behind Head.
	Subscriptions []SubscriptionLag
	// Leases are the partition's lease in each group, in group order.
	Leases []GroupLease
}

// SubscriptionLag is a subscription's position on a partition, with
// whom it is for: its consumer, its namespace, and its stream's key (""
// for a subscription to the whole namespace). A subscription created or
// deleted while the status was read may have none of the three.
type SubscriptionLag struct {
	ID        string
	Consumer  string
	Namespace string
	Key       string
	Position  int64
	Lag       int64
	// Fault says why the subscription stopped ("" while it runs).
	Fault string
}

// ClusterStatus reads the stream nodes of the client's tenant, their
// leases with what each owner's cache of the partition holds (as of its
// last renewal: up to a HeartbeatInterval behind), and each partition's
// head, checkpoint and subscriptions' positions (as last stored: up to a
// ProgressInterval behind).
func (c *Client) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	var s ClusterStatus
	n, err := c.streamPartitions(ctx)
	if err != nil {
		return s, err
	}
	nodes, err := c.st.Nodes(ctx)
	if err != nil {
		return s, err
	}
	leases, err := c.st.Leases(ctx)
	if err != nil {
		return s, err
	}
	byPart := make(map[int32][]store.PartitionLease, n)
	held := make(map[string][]int32)
	for _, l := range leases { // in group and partition order
		byPart[l.Partition] = append(byPart[l.Partition], l)
		if l.Held {
			held[l.Owner] = append(held[l.Owner], l.Partition)
		}
	}
	for _, nd := range nodes {
		s.Nodes = append(s.Nodes, ClusterNode{ID: nd.ID, Group: nd.Group, Consumers: nd.Consumers, Address: nd.Address,
			StartedAt: nd.StartedAt, HeartbeatAt: nd.HeartbeatAt, Alive: nd.Alive, Partitions: held[nd.ID]})
	}
	// One read names every subscription, whatever its partition.
	subs, err := c.st.Subscriptions(ctx, &store.SubscriptionFilter{})
	if err != nil {
		return s, err
	}
	byID := make(map[string]store.Subscription, len(subs))
	for _, sub := range subs {
		byID[sub.ID] = sub
	}
	for part := range n {
		info, err := c.st.PartitionInfo(ctx, part)
		if err != nil {
			return s, err
		}
		prog, err := c.st.Progress(ctx, part)
		if err != nil {
			return s, err
		}
		ps := PartitionStatus{Partition: part, Head: info.Head, Checkpoint: prog.Checkpoint, Lag: max(0, info.Head-prog.Checkpoint)}
		for i, l := range byPart[part] {
			gl := GroupLease{Group: l.Group, Owner: l.Owner, Epoch: l.Epoch, LeaseUntil: l.Until, Held: l.Held}
			if l.Held { // a lease that ended keeps its last renewal's: nobody holds that cache now
				gl.CacheWindows, gl.CachedRecords = l.CacheWindows, l.CachedRecords
			}
			if i == 0 { // the default group's, "" sorting first, or the first group's
				ps.Owner, ps.Epoch, ps.LeaseUntil, ps.Held = gl.Owner, gl.Epoch, gl.LeaseUntil, gl.Held
				ps.CacheWindows, ps.CachedRecords = gl.CacheWindows, gl.CachedRecords
			}
			ps.Leases = append(ps.Leases, gl)
		}
		for _, id := range slices.Sorted(maps.Keys(prog.Positions)) {
			pos, sub := prog.Positions[id], byID[id]
			ps.Subscriptions = append(ps.Subscriptions, SubscriptionLag{ID: id, Consumer: sub.Consumer, Namespace: sub.Namespace,
				Key: sub.Key, Position: pos, Lag: max(0, info.Head-pos), Fault: sub.Fault})
		}
		s.Partitions = append(s.Partitions, ps)
	}
	return s, nil
}
