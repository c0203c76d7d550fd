package store

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// ClusterStore holds the membership of a tenant's stream nodes and the
// leases through which they share its partitions. Nodes form groups: the
// nodes of a group handle the same consumers and share every partition
// among themselves, each partition leased to one node of the group; a
// partition has a lease, with its own epoch, in every group. Every time
// is the database's clock.
type ClusterStore interface {
	// Heartbeat records that a node is alive, registering it on its first
	// heartbeat, forgets nodes silent for more than p.Forget, and returns
	// the registered nodes as Nodes does.
	Heartbeat(ctx context.Context, p *HeartbeatParams) ([]Node, error)
	// Nodes returns the registered nodes of every group in id order, each
	// alive when its last heartbeat is at most its own timeout old.
	Nodes(ctx context.Context) ([]Node, error)
	// LeaveCluster removes a node's registration.
	LeaveCluster(ctx context.Context, node string) error
	// Leases returns every group's lease of every partition that has a
	// lease row, in group and partition order.
	Leases(ctx context.Context) ([]PartitionLease, error)
	// LeasePartitions renews the leases of group p.Group that p.Renew
	// names, if p.Node still holds them under their epochs, storing with
	// each the CacheWindows and CachedRecords p.Renew gives, and acquires
	// the group's leases of the partitions of p.Acquire that are free
	// (never leased, released, or whose lease has ended), each under a new
	// epoch; every lease it grants lasts p.Duration. It returns the leases
	// p.Node holds among those partitions afterwards. When ctx ends while
	// it acquires, it keeps what it acquired and returns it.
	LeasePartitions(ctx context.Context, p *PartitionLeaseParams) ([]PartitionLease, error)
	// ReleasePartitions gives up leases (of their groups) node holds
	// under their epochs: the partitions are free at once. Leases it no
	// longer holds are left alone.
	ReleasePartitions(ctx context.Context, node string, leases []PartitionLease) error
}

// HeartbeatParams describe a node's heartbeat.
type HeartbeatParams struct {
	// Node is the node's id, unique to one run of one process.
	Node string
	// Group is the node's group ("" is the default group); Consumers, the
	// consumers it handles (for operators, and to find two groups
	// handling one consumer).
	Group     string
	Consumers []string
	// Address is where the node can be reached, for operators ("" if
	// nowhere).
	Address string
	// Timeout is how old the node's heartbeat may be for it to count as
	// alive; Forget, how old before the node is forgotten (at least
	// Timeout).
	Timeout time.Duration
	Forget  time.Duration
}

// Node is a registered node.
type Node struct {
	ID          string
	Group       string
	Consumers   []string
	Address     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	// Timeout is how old its heartbeat may be while it counts as alive.
	Timeout time.Duration
	// Alive says its last heartbeat is within its timeout.
	Alive bool
}

// PartitionLease is a partition's lease.
type PartitionLease struct {
	// Group is the group the lease shares the partition in.
	Group     string
	Partition int32
	// Owner is the node that holds or last held the lease ("" when
	// released or never leased).
	Owner string
	// Epoch counts acquisitions; writes under an older one are fenced.
	Epoch int64
	// Until is when the lease ends unless renewed (the zero Time when
	// released or never leased).
	Until time.Time
	// Held says the lease has not ended, by the database's clock when it
	// was read.
	Held bool
	// Checkpoint is the partition's checkpoint.
	Checkpoint int64
	// CacheWindows and CachedRecords are what the owner's stream cache of
	// the partition held when it last renewed the lease: its resident
	// windows and the records in them (a record counted once). Both are 0
	// until the owner renews, and once the lease is acquired anew or
	// released; a lease that ended keeps those of its last renewal. In a
	// renewal, the owner sets them.
	CacheWindows  int
	CachedRecords int64
}

// PartitionLeaseParams renew and acquire leases for a node of a group.
type PartitionLeaseParams struct {
	Node     string
	Group    string
	Renew    []PartitionLease // partitions and epochs
	Acquire  []int32
	Duration time.Duration
}

// IdleTransactionTimeout is how long a database server lets one of
// sluice's connections sit idle inside a transaction before it ends the
// transaction (where the server can): a process paused mid-transaction
// (SIGSTOP, a frozen VM) holds its row locks only that long, instead of
// stalling every other node's leases and writes until it runs again.
const IdleTransactionTimeout = 5 * time.Second

// MaxLeaseDuration bounds a lease and a heartbeat timeout.
const MaxLeaseDuration = time.Hour

// MaxNodeConsumers bounds the consumers one node lists.
const MaxNodeConsumers = 1000

// ValidateGroup checks a stream group's name: empty (the default group)
// or a valid name (ValidateName).
func ValidateGroup(group string) error {
	if group == "" {
		return nil
	}
	return ValidateName("group", group)
}

// Validate checks a heartbeat.
func (p *HeartbeatParams) Validate() error {
	if err := ValidateName("node", p.Node); err != nil {
		return err
	}
	if err := ValidateGroup(p.Group); err != nil {
		return err
	}
	for _, c := range p.Consumers {
		if err := ValidateName("consumer", c); err != nil {
			return err
		}
	}
	if len(p.Consumers) > MaxNodeConsumers {
		return fmt.Errorf("node handles %d consumers, at most %d allowed: %w", len(p.Consumers), MaxNodeConsumers, sluicetype.ErrInvalidArgument)
	}
	if len(p.Address) > MaxNameLen {
		return fmt.Errorf("node address is %d characters long, at most %d allowed: %w", len(p.Address), MaxNameLen, sluicetype.ErrInvalidArgument)
	}
	if p.Timeout <= 0 || p.Timeout > MaxLeaseDuration || p.Forget < p.Timeout {
		return fmt.Errorf("heartbeat timeout %v (forget after %v): want 0 < timeout <= %v and forget >= timeout: %w",
			p.Timeout, p.Forget, MaxLeaseDuration, sluicetype.ErrInvalidArgument)
	}
	return nil
}

// Validate checks a lease request. (A node renews every partition it
// holds in one call: the number of partitions bounds it, not
// Limits.MaxBatch.)
func (p *PartitionLeaseParams) Validate() error {
	if err := ValidateName("node", p.Node); err != nil {
		return err
	}
	if err := ValidateGroup(p.Group); err != nil {
		return err
	}
	if p.Duration <= 0 || p.Duration > MaxLeaseDuration {
		return fmt.Errorf("lease duration %v: want 0 < d <= %v: %w", p.Duration, MaxLeaseDuration, sluicetype.ErrInvalidArgument)
	}
	seen := make(map[int32]bool, len(p.Renew)+len(p.Acquire))
	for _, part := range p.Acquire {
		if err := ValidatePartition(part); err != nil {
			return err
		}
		if seen[part] {
			return fmt.Errorf("partition %d named twice: %w", part, sluicetype.ErrInvalidArgument)
		}
		seen[part] = true
	}
	for _, r := range p.Renew {
		if err := ValidatePartition(r.Partition); err != nil {
			return err
		}
		if r.Epoch <= 0 {
			return fmt.Errorf("renewal of partition %d under epoch %d: %w", r.Partition, r.Epoch, sluicetype.ErrInvalidArgument)
		}
		if r.CacheWindows < 0 || r.CachedRecords < 0 {
			return fmt.Errorf("renewal of partition %d with %d cache windows and %d cached records: want 0 or more: %w",
				r.Partition, r.CacheWindows, r.CachedRecords, sluicetype.ErrInvalidArgument)
		}
		if seen[r.Partition] {
			return fmt.Errorf("partition %d named twice: %w", r.Partition, sluicetype.ErrInvalidArgument)
		}
		seen[r.Partition] = true
	}
	return nil
}
