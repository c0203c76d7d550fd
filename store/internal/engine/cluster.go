package engine

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/store"
)

func (s *tenantStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]store.Node, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sluice: heartbeat: %w", err)
	}
	// Three statements, not one transaction: in one, the node's row would
	// stay locked while the delete reads the other nodes' rows, and two
	// nodes heartbeating at once would deadlock on each other's rows
	// (InnoDB locks every row a DELETE reads).
	err := s.e.retry(ctx, func() error {
		_, err := s.e.exec(ctx, s.e.w, qUpsertNode, s.t.Service, s.t.Provider, p.Node, p.Address, ms(p.Timeout),
			p.Group, strings.Join(p.Consumers, ","))
		return s.e.committed(err)
	})
	if err == nil {
		// Housekeeping: the heartbeat stands without it.
		if derr := s.e.retry(ctx, func() error {
			_, err := s.e.exec(ctx, s.e.w, qDeleteForgottenNodes, s.t.Service, s.t.Provider, ms(p.Forget))
			return err
		}); derr != nil {
			s.e.log.Warn("sluice: heartbeat: cannot forget silent nodes", "err", derr)
		}
	}
	var nodes []store.Node
	if err == nil {
		nodes, err = s.e.nodes(ctx, s.e.w, s.t)
	}
	if err != nil {
		return nil, fmt.Errorf("sluice: heartbeat: %w", s.e.wrap(err))
	}
	return nodes, nil
}

func (s *tenantStore) Nodes(ctx context.Context) ([]store.Node, error) {
	nodes, err := s.e.nodes(ctx, s.e.r, s.t)
	if err != nil {
		return nil, fmt.Errorf("sluice: nodes: %w", err)
	}
	return nodes, nil
}

func (e *Engine) nodes(ctx context.Context, q querier, t store.Tenant) ([]store.Node, error) {
	rows, err := e.query(ctx, q, qSelectNodes, t.Service, t.Provider)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var nodes []store.Node
	for rows.Next() {
		var (
			n                             store.Node
			started, beat, timeout, dbNow int64
			consumers                     string
		)
		if err := rows.Scan(&n.ID, &n.Address, &started, &beat, &timeout, &n.Group, &consumers, &dbNow); err != nil {
			return nil, err
		}
		if consumers != "" {
			n.Consumers = strings.Split(consumers, ",")
		}
		n.StartedAt, n.HeartbeatAt = fromMS(started), fromMS(beat)
		n.Timeout = time.Duration(timeout) * time.Millisecond
		n.Alive = dbNow-beat <= timeout
		nodes = append(nodes, n)
	}
	return nodes, rows.Err()
}

func (s *tenantStore) LeaveCluster(ctx context.Context, node string) error {
	if err := store.ValidateName("node", node); err != nil {
		return fmt.Errorf("sluice: leave cluster: %w", err)
	}
	if _, err := s.e.exec(ctx, s.e.w, qDeleteNode, s.t.Service, s.t.Provider, node); err != nil {
		return fmt.Errorf("sluice: leave cluster: %w", s.e.committed(err))
	}
	return nil
}

func (s *tenantStore) Leases(ctx context.Context) ([]store.PartitionLease, error) {
	ls, err := s.e.leases(ctx, s.e.r, s.t)
	if err != nil {
		return nil, fmt.Errorf("sluice: leases: %w", err)
	}
	return ls, nil
}

func (e *Engine) leases(ctx context.Context, q querier, t store.Tenant) ([]store.PartitionLease, error) {
	rows, err := e.query(ctx, q, qSelectLeases, t.Service, t.Provider)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.PartitionLease
	for rows.Next() {
		var (
			l            store.PartitionLease
			until, dbNow int64
		)
		if err := rows.Scan(&l.Group, &l.Partition, &l.Owner, &l.Epoch, &until, &l.Checkpoint, &l.CacheWindows, &l.CachedRecords, &dbNow); err != nil {
			return nil, err
		}
		l.Until, l.Held = fromMS(until), until > dbNow
		out = append(out, l)
	}
	return out, rows.Err()
}

func (s *tenantStore) LeasePartitions(ctx context.Context, p *store.PartitionLeaseParams) ([]store.PartitionLease, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sluice: lease partitions: %w", err)
	}
	// Lease rows in partition order, as every other writer of them takes
	// them.
	renew := slices.SortedFunc(slices.Values(p.Renew), func(a, b store.PartitionLease) int { return cmp.Compare(a.Partition, b.Partition) })
	acquire := slices.Sorted(slices.Values(p.Acquire))
	if err := s.renewLeases(ctx, p, renew); err != nil {
		return nil, fmt.Errorf("sluice: lease partitions: %w", err)
	}
	acquired := s.acquireLeases(ctx, p, acquire)
	rctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	all, err := s.e.leases(rctx, s.e.w, s.t)
	if err != nil {
		s.giveBack(ctx, p.Node, acquired)
		return nil, fmt.Errorf("sluice: lease partitions: %w", err)
	}
	return heldLeases(all, p, renew, acquire), nil
}

// renewLeases renews, together, leases the node holds: they touch only
// rows this node holds. Each stores what the node's cache of the
// partition holds in the same statement, which writes the row anyway.
func (s *tenantStore) renewLeases(ctx context.Context, p *store.PartitionLeaseParams, renew []store.PartitionLease) error {
	if len(renew) == 0 {
		return nil
	}
	d := ms(p.Duration)
	return s.e.inTx(ctx, func(tx *sql.Tx) error {
		for _, l := range renew {
			if _, err := s.e.exec(ctx, tx, qRenewLease, d, l.CacheWindows, l.CachedRecords, s.t.Service, s.t.Provider,
				l.Partition, p.Node, l.Epoch, p.Group); err != nil {
				return err
			}
		}
		return nil
	})
}

// acquireLeases tries each acquisition alone, in partition order, and
// returns the leases it took (to give back if the call fails after all).
// It gives up on a row another transaction holds (a node paused in the
// middle of a save, say): waiting for it would hold up this node's own
// leases; it is tried again next time.
func (s *tenantStore) acquireLeases(ctx context.Context, p *store.PartitionLeaseParams, acquire []int32) []store.PartitionLease {
	var acquired []store.PartitionLease
	for _, part := range acquire {
		epoch, err := s.acquireLease(ctx, p, part)
		if err == nil && epoch >= 0 {
			acquired = append(acquired, store.PartitionLease{Group: p.Group, Partition: part, Epoch: epoch + 1})
		} else if err != nil {
			s.e.log.Debug("sluice: partition not acquired", "partition", part, "err", err)
		}
		if ctx.Err() != nil {
			// Out of time (a slow database, many partitions): keep what
			// was acquired, and leave the rest for the next call, rather
			// than give everything back and never get anywhere.
			break
		}
	}
	return acquired
}

// acquireLease takes one partition's lease if it is free, creating its
// row on first use, without waiting for a row another transaction holds.
// It returns the epoch the lease had before, or -1 when it is not free.
func (s *tenantStore) acquireLease(ctx context.Context, p *store.PartitionLeaseParams, part int32) (int64, error) {
	var epoch int64
	err := s.e.tryTx(ctx, func(tx *sql.Tx) error {
		err := s.e.queryRow(ctx, tx, qLockLeaseNoWait, []any{s.t.Service, s.t.Provider, part, p.Group}, &epoch)
		if errors.Is(err, sql.ErrNoRows) {
			if _, err := s.e.exec(ctx, tx, qEnsurePartitionLease, s.t.Service, s.t.Provider, part, p.Group); err != nil {
				return err
			}
			err = s.e.queryRow(ctx, tx, qLockLeaseNoWait, []any{s.t.Service, s.t.Provider, part, p.Group}, &epoch)
		}
		if err != nil {
			return err
		}
		n, err := s.e.exec(ctx, tx, qAcquireLease, p.Node, ms(p.Duration), s.t.Service, s.t.Provider, part, p.Group)
		if n == 0 {
			epoch = -1 // not free
		}
		return err
	})
	return epoch, err
}

// heldLeases returns, of all the tenant's leases, those the call named
// (renewed with their epoch unchanged, or acquired) that the node holds
// in its group now.
func heldLeases(all []store.PartitionLease, p *store.PartitionLeaseParams, renew []store.PartitionLease, acquire []int32) []store.PartitionLease {
	epochs := make(map[int32]int64, len(renew)+len(acquire))
	for _, l := range renew {
		epochs[l.Partition] = l.Epoch
	}
	for _, part := range acquire {
		epochs[part] = 0
	}
	var out []store.PartitionLease
	for _, l := range all {
		e, named := epochs[l.Partition]
		if named && l.Group == p.Group && l.Owner == p.Node && l.Held && (e == 0 || e == l.Epoch) {
			out = append(out, l)
		}
	}
	return out
}

// giveBack releases leases a failing LeasePartitions acquired, which its
// caller will never know it holds: otherwise nobody would pull their
// partitions until the leases end.
func (s *tenantStore) giveBack(ctx context.Context, node string, acquired []store.PartitionLease) {
	if len(acquired) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.ReleasePartitions(ctx, node, acquired); err != nil {
		s.e.log.Warn("sluice: cannot give back partitions acquired by a failed call; their leases will end", "err", err)
	}
}

func (s *tenantStore) ReleasePartitions(ctx context.Context, node string, leases []store.PartitionLease) error {
	if err := store.ValidateName("node", node); err != nil {
		return fmt.Errorf("sluice: release partitions: %w", err)
	}
	sorted := slices.SortedFunc(slices.Values(leases), func(a, b store.PartitionLease) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Partition, b.Partition))
	})
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		for _, l := range sorted {
			if err := store.ValidatePartition(l.Partition); err != nil {
				return err
			}
			if err := store.ValidateGroup(l.Group); err != nil {
				return err
			}
			if _, err := s.e.exec(ctx, tx, qReleaseLease, s.t.Service, s.t.Provider, l.Partition, node, l.Epoch, l.Group); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sluice: release partitions: %w", err)
	}
	return nil
}
