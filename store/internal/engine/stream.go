package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// The stream runtime's rows. A partition's owner row carries its epoch and
// checkpoint, and is the partition's retention lock: creating a
// subscription takes it before checking what retention kept, and trimming
// takes it before reading what subscriptions still need, so a
// subscription starting at an old position holds retention back from the
// moment its transaction begins.

func (s *tenantStore) StreamPartitions(ctx context.Context, n int32) (int32, error) {
	if n <= 0 {
		return 0, fmt.Errorf("sluice: stream partitions: %d: %w", n, sluicetype.ErrInvalidArgument)
	}
	// Read first: once a count is recorded no write is needed, so a
	// caller whose own transaction holds SQLite's write lock (PublishTx
	// under BEGIN IMMEDIATE) is not made to wait for itself.
	var got int32
	err := s.e.queryRow(ctx, s.e.r, qGetStreamPartitions, []any{s.t.Service, s.t.Provider}, &got)
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("sluice: stream partitions: %w", err)
	}
	err = s.e.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.e.exec(ctx, tx, qInsertStreamPartitions, s.t.Service, s.t.Provider, n); err != nil {
			return err
		}
		return s.e.queryRow(ctx, tx, qGetStreamPartitions, []any{s.t.Service, s.t.Provider}, &got)
	})
	if err != nil {
		return 0, fmt.Errorf("sluice: stream partitions: %w", err)
	}
	return got, nil
}

// checkPartitionsTx checks the tenant's stream partition count in a
// caller's transaction, recording n there when none is recorded yet.
func (e *Engine) checkPartitionsTx(ctx context.Context, q querier, t store.Tenant, n int32) error {
	var got int32
	err := e.queryRow(ctx, q, qGetStreamPartitions, []any{t.Service, t.Provider}, &got)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := e.exec(ctx, q, qInsertStreamPartitions, t.Service, t.Provider, n); err != nil {
			return err
		}
		err = e.queryRow(ctx, q, qGetStreamPartitions, []any{t.Service, t.Provider}, &got)
	}
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("configured for %d stream partitions, the database has %d (changing it would strand events): %w",
			n, got, sluicetype.ErrPartitionCount)
	}
	return nil
}

func (e *Engine) partitionCheckpoint(ctx context.Context, q querier, t store.Tenant, partition int32) (int64, error) {
	var checkpoint int64
	err := e.queryRow(ctx, q, qGetPartitionCheckpoint, []any{t.Service, t.Provider, partition}, &checkpoint)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return checkpoint, err
}

// lockCheckpoint takes a partition's retention lock, creating its
// checkpoint row (at 0) if it has none, and returns the checkpoint with
// the database's time.
func (e *Engine) lockCheckpoint(ctx context.Context, tx querier, t store.Tenant, partition int32) (checkpoint, now int64, err error) {
	err = e.queryRow(ctx, tx, qLockPartitionCheckpoint, []any{t.Service, t.Provider, partition}, &checkpoint, &now)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := e.exec(ctx, tx, qEnsurePartitionCheckpoint, t.Service, t.Provider, partition); err != nil {
			return 0, 0, err
		}
		err = e.queryRow(ctx, tx, qLockPartitionCheckpoint, []any{t.Service, t.Provider, partition}, &checkpoint, &now)
	}
	return checkpoint, now, err
}

// fence locks a partition's lease row until commit and fails with
// ErrFenced unless its epoch is f's: a fenced write checks it first.
func (e *Engine) fence(ctx context.Context, tx querier, t store.Tenant, f *store.Fence) error {
	var epoch int64
	err := e.queryRow(ctx, tx, qLockLeaseEpoch, []any{t.Service, t.Provider, f.Partition, f.Group}, &epoch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if epoch != f.Epoch { // never leased: epoch 0
		return fmt.Errorf("partition %d: epoch %d, now %d: %w", f.Partition, f.Epoch, epoch, sluicetype.ErrFenced)
	}
	return nil
}

func (s *tenantStore) CreateSubscription(ctx context.Context, p *store.NewSubscription) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sluice: create subscription: %w", err)
	}
	parts := slices.Sorted(maps.Keys(p.Start))
	// Checkpoint rows first, in partition order, then the subscription's
	// rows: the order SaveProgress and trims lock them in.
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		for _, part := range parts {
			if _, _, err := s.e.lockCheckpoint(ctx, tx, s.t, part); err != nil {
				return err
			}
			var head, trimmed, now int64
			err := s.e.queryRow(ctx, tx, qGetPartition, []any{s.t.Service, s.t.Provider, part}, &head, &trimmed, &now)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if start := p.Start[part]; start < trimmed {
				return fmt.Errorf("start %d on partition %d: retention trimmed through %d: %w", start, part, trimmed, sluicetype.ErrTrimmed)
			}
			if _, err := s.e.exec(ctx, tx, qLowerCheckpoint, p.Start[part], s.t.Service, s.t.Provider, part); err != nil {
				return err
			}
		}
		if _, err := s.e.exec(ctx, tx, qInsertSubscription, s.t.Service, s.t.Provider, p.ID, p.Consumer,
			p.Namespace, p.Key, p.Partition); err != nil {
			return err
		}
		for _, part := range parts {
			if _, err := s.e.exec(ctx, tx, qInsertProgress, s.t.Service, s.t.Provider, part, p.ID, p.Start[part]); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ErrDuplicate) {
		return fmt.Errorf("sluice: create subscription %q: %w", p.ID, sluicetype.ErrEntityExists)
	}
	if err != nil {
		return fmt.Errorf("sluice: create subscription %q: %w", p.ID, err)
	}
	return nil
}

func (s *tenantStore) DeleteSubscription(ctx context.Context, id string) error {
	if err := store.ValidateName("subscription id", id); err != nil {
		return fmt.Errorf("sluice: delete subscription: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.e.exec(ctx, tx, qDeleteSubscription, s.t.Service, s.t.Provider, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("subscription %q: %w", id, sluicetype.ErrSubscriptionNotFound)
		}
		if _, err := s.e.exec(ctx, tx, qDeleteSubscriptionProgress, s.t.Service, s.t.Provider, id); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, qDeleteSubscriptionHandled, s.t.Service, s.t.Provider, id); err != nil {
			return err
		}
		_, err = s.e.exec(ctx, tx, qDeleteSubscriptionParked, s.t.Service, s.t.Provider, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sluice: delete subscription: %w", err)
	}
	return nil
}

func (s *tenantStore) Subscriptions(ctx context.Context, p *store.SubscriptionFilter) ([]store.Subscription, error) {
	byPartition, partition := 0, int32(0)
	if p.Partition != nil {
		byPartition, partition = 1, *p.Partition
	}
	rows, err := s.e.query(ctx, s.e.r, qSelectSubscriptions, s.t.Service, s.t.Provider, p.ID, p.Namespace, p.Key, byPartition, partition)
	if err != nil {
		return nil, fmt.Errorf("sluice: subscriptions: %w", err)
	}
	out, err := scanSubscriptions(&rows)
	if err != nil {
		return nil, fmt.Errorf("sluice: subscriptions: %w", err)
	}
	return out, nil
}

func (s *tenantStore) ListSubscriptions(ctx context.Context, p *store.ListSubscriptionsParams) ([]store.Subscription, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: list subscriptions: %w", err)
	}
	from, to := p.ConsumerRange()
	rows, err := s.e.query(ctx, s.e.r, qListSubscriptions, s.t.Service, s.t.Provider, p.Namespace, p.Key, len(p.Key), from, to,
		strings.ToLower(p.AfterConsumer), p.AfterID, p.Max)
	if err != nil {
		return nil, fmt.Errorf("sluice: list subscriptions: %w", err)
	}
	out, err := scanSubscriptions(&rows)
	if err != nil {
		return nil, fmt.Errorf("sluice: list subscriptions: %w", err)
	}
	return out, nil
}

// scanSubscriptions reads the subscriptions a query selected, and closes
// rows.
func scanSubscriptions(rows *rows) ([]store.Subscription, error) {
	defer rows.Close()
	var out []store.Subscription
	for rows.Next() {
		var (
			sub          store.Subscription
			fault        sql.NullString
			faulted      sql.NullInt64
			created      int64
			repositioned sql.NullString
		)
		if err := rows.Scan(&sub.ID, &sub.Consumer, &sub.Namespace, &sub.Key, &sub.Partition, &fault, &faulted, &created,
			&sub.Repositions, &repositioned); err != nil {
			return nil, err
		}
		sub.Fault, sub.FaultedAt, sub.CreatedAt = fault.String, fromMS(faulted.Int64), fromMS(created)
		var err error
		if sub.LastReposition, err = decodeReposition(repositioned); err != nil {
			return nil, err
		}
		out = append(out, sub)
	}
	return out, rows.Err()
}

func (s *tenantStore) FaultSubscription(ctx context.Context, p *store.FaultParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sluice: fault subscription: %w", err)
	}
	reason := store.Truncate(p.Reason, store.MaxReasonLen)
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		if p.Fence != nil {
			if err := s.e.fence(ctx, tx, s.t, p.Fence); err != nil {
				return err
			}
		}
		n, err := s.e.exec(ctx, tx, qSetSubscriptionFault, s.t.Service, s.t.Provider, p.ID, reason)
		if err == nil && n == 0 {
			err = fmt.Errorf("subscription %q: %w", p.ID, sluicetype.ErrSubscriptionNotFound)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sluice: fault subscription: %w", err)
	}
	return nil
}

func (s *tenantStore) Progress(ctx context.Context, partition int32) (store.PartitionProgress, error) {
	var pp store.PartitionProgress
	if err := store.ValidatePartition(partition); err != nil {
		return pp, fmt.Errorf("sluice: progress: %w", err)
	}
	var err error
	pp.Checkpoint, err = s.e.partitionCheckpoint(ctx, s.e.r, s.t, partition)
	if err != nil {
		return pp, fmt.Errorf("sluice: progress: %w", err)
	}
	pp.Positions, pp.Repositions, err = s.e.positions(ctx, s.e.r, s.t, partition)
	if err != nil {
		return pp, fmt.Errorf("sluice: progress: %w", err)
	}
	return pp, nil
}

// positions returns the stored position of each subscription on a
// partition and, read in the same statement, its count of repositions:
// a reposition writes both in one transaction, so the two always match.
func (e *Engine) positions(ctx context.Context, q querier, t store.Tenant, partition int32) (positions, repositions map[string]int64, err error) {
	rows, err := e.query(ctx, q, qSelectProgress, t.Service, t.Provider, partition)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	positions, repositions = make(map[string]int64), make(map[string]int64)
	for rows.Next() {
		var (
			id       string
			pos, cnt int64
		)
		if err := rows.Scan(&id, &pos, &cnt); err != nil {
			return nil, nil, err
		}
		positions[id], repositions[id] = pos, cnt
	}
	return positions, repositions, rows.Err()
}

// progressRow is one row of UpsertProgress: V is the count of the
// subscription's repositions its owner knows.
type progressRow struct {
	ID       string `json:"id"`
	Position int64  `json:"p"`
	V        int64  `json:"v"`
}

func (s *tenantStore) SaveProgress(ctx context.Context, ps []store.ProgressParams) ([]store.ProgressResult, error) {
	if len(ps) == 0 || len(ps) > s.e.limits.MaxBatch {
		return nil, fmt.Errorf("sluice: save progress of %d partitions, 1 to %d allowed: %w", len(ps), s.e.limits.MaxBatch, sluicetype.ErrInvalidArgument)
	}
	// Checkpoint rows in partition order, as subscription creations take
	// them.
	order := make([]int, len(ps))
	js := make([]string, len(ps))
	for i := range ps {
		p := &ps[i]
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("sluice: save progress: %w", err)
		}
		rows := make([]progressRow, 0, len(p.Positions))
		for _, id := range slices.Sorted(maps.Keys(p.Positions)) {
			rows = append(rows, progressRow{id, p.Positions[id], p.Repositions[id]})
		}
		var err error
		if js[i], err = jsonText(rows); err != nil {
			return nil, fmt.Errorf("sluice: save progress: %w", err)
		}
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(ps[a].Partition - ps[b].Partition) })
	for k := 1; k < len(order); k++ {
		if ps[order[k]].Partition == ps[order[k-1]].Partition {
			return nil, fmt.Errorf("sluice: save progress: partition %d named twice: %w", ps[order[k]].Partition, sluicetype.ErrInvalidArgument)
		}
	}
	var results []store.ProgressResult
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		results = make([]store.ProgressResult, len(ps))
		// Every checkpoint row first, then every lease row: a save waiting
		// for a checkpoint row (another group's save of the partition, a
		// subscription's creation) holds no lease row meanwhile, so the
		// node's renewals wait at most for the writes below.
		locked := make([]lockedCheckpoint, len(ps))
		for _, i := range order {
			var err error
			if locked[i].stored, locked[i].now, err = s.e.lockCheckpoint(ctx, tx, s.t, ps[i].Partition); err != nil {
				return err
			}
		}
		fenced := make([]bool, len(ps))
		for _, i := range order {
			p := &ps[i]
			err := s.e.fence(ctx, tx, s.t, &store.Fence{Group: p.Group, Partition: p.Partition, Epoch: p.Epoch})
			if errors.Is(err, sluicetype.ErrFenced) {
				results[i].Err, fenced[i] = err, true
			} else if err != nil {
				return err
			}
		}
		var trims []trimmedThrough
		for _, i := range order {
			if fenced[i] {
				continue
			}
			var (
				tr  trimmedThrough
				err error
			)
			results[i], tr, err = s.e.saveProgress(ctx, tx, s.t, &ps[i], js[i], locked[i])
			if err != nil {
				return err
			}
			if tr.through > 0 {
				trims = append(trims, tr)
			}
		}
		return s.e.setTrimmed(ctx, tx, s.t, trims)
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: save progress: %w", err)
	}
	return results, nil
}

// lockedCheckpoint is a checkpoint row a save locked: the stored
// checkpoint and the database's time.
type lockedCheckpoint struct{ stored, now int64 }

// saveProgress saves one partition's progress and deletes the records it
// trims, returning how far its caller is to mark the partition trimmed.
// The caller holds the partition's checkpoint row (which orders the save
// with subscription creations and trims) and its lease row under the
// save's epoch (which fences a stale owner and holds off acquisitions
// until commit).
func (e *Engine) saveProgress(ctx context.Context, tx querier, t store.Tenant, p *store.ProgressParams, positions string, lk lockedCheckpoint) (store.ProgressResult, trimmedThrough, error) {
	stored, now := lk.stored, lk.now
	if len(p.Positions) > 0 {
		if _, err := e.exec(ctx, tx, qUpsertProgress, t.Service, t.Provider, p.Partition, positions); err != nil {
			return store.ProgressResult{}, trimmedThrough{}, err
		}
	}
	// Never past a subscription the owner does not know of yet.
	checkpoint := p.Checkpoint
	var least sql.NullInt64
	if err := e.queryRow(ctx, tx, qMinProgress, []any{t.Service, t.Provider, p.Partition}, &least); err != nil {
		return store.ProgressResult{}, trimmedThrough{}, err
	}
	if least.Valid {
		checkpoint = min(checkpoint, least.Int64)
	}
	if _, err := e.exec(ctx, tx, qSaveCheckpoint, checkpoint, t.Service, t.Provider, p.Partition); err != nil {
		return store.ProgressResult{}, trimmedThrough{}, err
	}
	// The checkpoint just stored (it never moves back), which the save
	// holds locked.
	res := store.ProgressResult{Checkpoint: max(stored, checkpoint)}
	if p.Trim == 0 {
		return res, trimmedThrough{}, nil
	}
	through := res.Checkpoint
	if least.Valid {
		through = min(through, least.Int64)
	}
	n, tr, err := e.deleteThrough(ctx, tx, t, &store.TrimConsumedParams{Partition: p.Partition, Max: p.Trim}, through, now)
	res.Trimmed, res.TrimmedThrough, res.Timed = n, max(tr.was, tr.through), tr.timed
	return res, tr, err
}

// parkedRow is one row of InsertParked.
type parkedRow struct {
	Partition  int32    `json:"pa"`
	Position   int64    `json:"po"`
	Namespace  string   `json:"ns"`
	Key        string   `json:"k"`
	Properties *string  `json:"pr,omitempty"`
	Payload    hexBytes `json:"p"`
	AppendedAt int64    `json:"at"`
	Error      string   `json:"e"`
	Attempts   int      `json:"n"`
}

// parkedID is one row of DeleteParked.
type parkedID struct {
	Partition int32 `json:"pa"`
	Position  int64 `json:"po"`
}

func (s *tenantStore) Park(ctx context.Context, p *store.ParkParams) error {
	if err := p.Validate(s.e.limits); err != nil {
		return fmt.Errorf("sluice: park: %w", err)
	}
	rows := make([]parkedRow, len(p.Events))
	for i, ev := range p.Events {
		props, err := encodeProps(ev.Properties)
		if err != nil {
			return fmt.Errorf("sluice: park: %w", err)
		}
		rows[i] = parkedRow{ev.Partition, ev.Position, ev.Namespace, ev.Key, props, ev.Payload,
			ev.AppendedAt.UnixMilli(), ev.Error, ev.Attempts}
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		if p.Fence != nil {
			if err := s.e.fence(ctx, tx, s.t, p.Fence); err != nil {
				return err
			}
		}
		// Only for a subscription that exists, and it cannot be deleted
		// before this commits (its deletion then takes these rows along).
		var one int
		err := s.e.queryRow(ctx, tx, qLockSubscription, []any{s.t.Service, s.t.Provider, p.Subscription}, &one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("subscription %q: %w", p.Subscription, sluicetype.ErrSubscriptionNotFound)
		}
		if err != nil {
			return err
		}
		for _, c := range chunks(len(rows), func(i int) int { return 2*len(rows[i].Payload) + len(rows[i].Error) + 128 }) {
			js, err := jsonText(rows[c[0]:c[1]])
			if err != nil {
				return err
			}
			if _, err := s.e.exec(ctx, tx, qInsertParked, s.t.Service, s.t.Provider, p.Subscription, js); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sluice: park: %w", err)
	}
	return nil
}

func (s *tenantStore) Parked(ctx context.Context, p *store.ParkedParams) ([]store.ParkedEvent, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: parked: %w", err)
	}
	rows, err := s.e.query(ctx, s.e.r, qSelectParked, s.t.Service, s.t.Provider, p.Subscription, p.AfterPartition, p.AfterPosition, p.Max)
	if err != nil {
		return nil, fmt.Errorf("sluice: parked: %w", err)
	}
	defer rows.Close()
	var out []store.ParkedEvent
	for rows.Next() {
		var (
			ev               store.ParkedEvent
			props            sql.NullString
			appended, parked int64
		)
		if err := rows.Scan(&ev.Partition, &ev.Position, &ev.Namespace, &ev.Key, &props, &ev.Payload,
			&appended, &ev.Error, &ev.Attempts, &parked); err != nil {
			return nil, fmt.Errorf("sluice: parked: %w", err)
		}
		if ev.Payload == nil {
			ev.Payload = []byte{}
		}
		if ev.Properties, err = decodeProps(props); err != nil {
			return nil, fmt.Errorf("sluice: parked: %w", err)
		}
		ev.AppendedAt, ev.ParkedAt = fromMS(appended), fromMS(parked)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sluice: parked: %w", err)
	}
	return out, nil
}

func (s *tenantStore) Unpark(ctx context.Context, p *store.UnparkParams) error {
	if err := p.Validate(s.e.limits); err != nil {
		return fmt.Errorf("sluice: unpark: %w", err)
	}
	ids := make([]parkedID, len(p.Events))
	for i, id := range p.Events {
		ids[i] = parkedID{id.Partition, id.Position}
	}
	slices.SortFunc(ids, func(a, b parkedID) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return cmpInt64(a.Position, b.Position)
	})
	ids = slices.Compact(ids)
	js, err := jsonText(ids)
	if err != nil {
		return fmt.Errorf("sluice: unpark: %w", err)
	}
	err = s.e.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.e.exec(ctx, tx, qDeleteParked, s.t.Service, s.t.Provider, p.Subscription, js)
		if err != nil {
			return err
		}
		if n != int64(len(ids)) {
			return fmt.Errorf("%d of %d events of subscription %q are not parked: %w", int64(len(ids))-n, len(ids), p.Subscription, sluicetype.ErrMessageNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sluice: unpark: %w", err)
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *tenantStore) SetRetention(ctx context.Context, namespace string, r store.Retention) error {
	if err := store.ValidateName("namespace", namespace); err != nil {
		return fmt.Errorf("sluice: set retention: %w", err)
	}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("sluice: set retention: %w", err)
	}
	var err error
	if r == (store.Retention{}) {
		_, err = s.e.exec(ctx, s.e.w, qDeleteRetention, s.t.Service, s.t.Provider, namespace)
	} else {
		_, err = s.e.exec(ctx, s.e.w, qUpsertRetention, s.t.Service, s.t.Provider, namespace, ms(r.MaxAge), r.MaxBytes,
			ms(r.Expiry), ms(r.Parked))
	}
	if err != nil {
		return fmt.Errorf("sluice: set retention: %w", s.e.committed(err))
	}
	return nil
}

var _ store.Trimmer = (*tenantStore)(nil)

// TrimConsumed trims a partition's consumed records now (store.Trimmer).
func (s *tenantStore) TrimConsumed(ctx context.Context, p *store.TrimConsumedParams) (int64, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return 0, fmt.Errorf("sluice: trim: %w", err)
	}
	var n int64
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = s.e.trimConsumed(ctx, tx, s.t, p)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sluice: trim partition %d: %w", p.Partition, err)
	}
	return n, nil
}

// trimConsumed trims under the partition's retention lock: through the
// checkpoint, no further than any stored subscription position (one just
// created may be behind the checkpoint its owner computed), and no
// further than the first record its namespace's retention keeps.
func (e *Engine) trimConsumed(ctx context.Context, tx querier, t store.Tenant, p *store.TrimConsumedParams) (int64, error) {
	through, now, err := e.lockCheckpoint(ctx, tx, t, p.Partition)
	if err != nil {
		return 0, err
	}
	var least sql.NullInt64
	if err := e.queryRow(ctx, tx, qMinProgress, []any{t.Service, t.Provider, p.Partition}, &least); err != nil {
		return 0, err
	}
	if least.Valid {
		through = min(through, least.Int64)
	}
	n, tr, err := e.deleteThrough(ctx, tx, t, p, through, now)
	if err != nil {
		return 0, err
	}
	return n, e.setTrimmed(ctx, tx, t, []trimmedThrough{tr})
}

// trimmedThrough is how far deleteThrough trimmed a partition (through 0:
// not at all), and its retention watermark before (was).
type trimmedThrough struct {
	partition int32
	through   int64
	was       int64
	// timed: a namespace's expiry or parked retention may trim more with
	// time alone.
	timed bool
}

// deleteThrough deletes, under the retention lock its caller holds, the
// records at most through (the checkpoint, and no further than any stored
// subscription position), at most p.Max of them, and no further than
// retention lets go; where a namespace has an expiry, the records older
// than it are past its subscriptions' hold (see ceilingFloor). It deletes
// the partition's parked events that their namespace's retention lets go
// too. It leaves the partition's trimmed position to its caller
// (setTrimmed), to write last: that update locks the partition's head
// row, and so holds up appends to the partition until commit.
func (e *Engine) deleteThrough(ctx context.Context, tx querier, t store.Tenant, p *store.TrimConsumedParams, through, now int64) (int64, trimmedThrough, error) {
	var head, trimmed, dbNow int64
	err := e.queryRow(ctx, tx, qGetPartition, []any{t.Service, t.Provider, p.Partition}, &head, &trimmed, &dbNow)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, trimmedThrough{}, nil
	}
	if err != nil {
		return 0, trimmedThrough{}, err
	}
	kept, err := e.retentions(ctx, tx, t)
	if err != nil {
		return 0, trimmedThrough{}, err
	}
	if err := e.expireParked(ctx, tx, t, p.Partition, kept, now); err != nil {
		return 0, trimmedThrough{}, err
	}
	timed := ceilings(kept)
	for _, r := range kept {
		timed = timed || r.Parked > 0 && r.Parked < store.Forever
	}
	untouched := trimmedThrough{was: trimmed, timed: timed}
	// At most p.Max records, and the trimmed position says how far they went.
	limit := min(head, trimmed+int64(p.Max))
	floor := func(int64) int64 { return through }
	if ceilings(kept) {
		if floor, err = e.ceilingFloor(ctx, tx, t, p.Partition, kept, through, now); err != nil {
			return 0, trimmedThrough{}, err
		}
	} else {
		limit = min(limit, through)
	}
	if limit <= trimmed {
		return 0, untouched, nil
	}
	if through, err = e.retentionHold(ctx, tx, t, p, kept, trimmed, limit, now, floor); err != nil {
		return 0, trimmedThrough{}, err
	}
	if through <= trimmed {
		return 0, untouched, nil
	}
	n, err := e.exec(ctx, tx, qDeleteRecordRange, t.Service, t.Provider, p.Partition, trimmed, through)
	if err != nil {
		return 0, trimmedThrough{}, err
	}
	return n, trimmedThrough{p.Partition, through, trimmed, timed}, nil
}

// ceilings reports whether a namespace of kept has an expiry.
func ceilings(kept map[string]store.Retention) bool {
	for _, r := range kept {
		if r.HasExpiry() {
			return true
		}
	}
	return false
}

// expired reports whether a record appended at appended (ms) is past the
// expiry of r at now.
func expired(r store.Retention, appended, now int64) bool {
	return r.HasExpiry() && appended < now-ms(r.Expiry)
}

// ceilingFloor returns, for a record appended at a time, the position no
// trim passes: the lowest stored position of the partition's
// subscriptions of each namespace, but for namespaces whose expiry the
// record is past (they hold nothing that old any more); with none of
// those, through (the checkpoint's bound) as without expiries.
func (e *Engine) ceilingFloor(ctx context.Context, tx querier, t store.Tenant, partition int32, kept map[string]store.Retention, through, now int64) (func(int64) int64, error) {
	holds, err := pairs[string, int64](ctx, e, tx, qMinProgressByNamespace, t.Service, t.Provider, partition)
	if err != nil {
		return nil, err
	}
	return func(appended int64) int64 {
		floor, released := int64(math.MaxInt64), false
		for ns, pos := range holds {
			if expired(kept[ns], appended, now) {
				released = true
				continue
			}
			floor = min(floor, pos)
		}
		if !released {
			floor = min(floor, through)
		}
		return floor
	}, nil
}

// expireParked deletes the partition's parked events that their
// namespace's parked retention lets go.
func (e *Engine) expireParked(ctx context.Context, tx querier, t store.Tenant, partition int32, kept map[string]store.Retention, now int64) error {
	for ns, r := range kept {
		if r.Parked <= 0 || r.Parked >= store.Forever {
			continue
		}
		if _, err := e.exec(ctx, tx, qDeleteExpiredParked, t.Service, t.Provider, partition, ns, now-ms(r.Parked)); err != nil {
			return err
		}
	}
	return nil
}

// setTrimmed marks partitions trimmed through their positions, in
// partition order (the order appends lock head rows in).
func (e *Engine) setTrimmed(ctx context.Context, tx querier, t store.Tenant, trims []trimmedThrough) error {
	for _, tr := range trims {
		if tr.through == 0 {
			continue
		}
		if _, err := e.exec(ctx, tx, qSetTrimmed, tr.through, t.Service, t.Provider, tr.partition); err != nil {
			return err
		}
	}
	return nil
}

// retentionHold returns how far, from trimmed through at most limit (and
// p.Max records), a trim may go: while each record is at or below the
// floor for its age and its namespace's retention lets it go, for its age
// or for the bytes of newer records of the namespace, or its namespace's
// expiry passed.
func (e *Engine) retentionHold(ctx context.Context, tx querier, t store.Tenant, p *store.TrimConsumedParams, kept map[string]store.Retention,
	trimmed, limit, now int64, floor func(appended int64) int64) (int64, error) {
	if len(kept) == 0 {
		return limit, nil // the floor is through, and limit is below it
	}
	// The bytes each namespace kept by size holds in (trimmed, limit].
	var sized []string
	for ns, r := range kept {
		if r.MaxBytes > 0 {
			sized = append(sized, ns)
		}
	}
	left := make(map[string]int64)
	if len(sized) > 0 {
		js, err := jsonText(sized)
		if err != nil {
			return 0, err
		}
		rows, err := e.query(ctx, tx, qNamespaceBytes, t.Service, t.Provider, p.Partition, trimmed, limit, js)
		if err != nil {
			return 0, err
		}
		for rows.Next() {
			var (
				ns    string
				bytes int64
			)
			if err := rows.Scan(&ns, &bytes); err != nil {
				rows.Close()
				return 0, err
			}
			left[ns] = bytes
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
	}
	rows, err := e.query(ctx, tx, qTrimCandidates, t.Service, t.Provider, p.Partition, trimmed, limit, p.Max)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	hold := trimmed
	for rows.Next() {
		var (
			pos, appended, size int64
			ns                  string
		)
		if err := rows.Scan(&pos, &ns, &appended, &size); err != nil {
			return 0, err
		}
		if pos > floor(appended) {
			break // a subscription still needs it
		}
		if r, ok := kept[ns]; ok && !expired(r, appended, now) {
			if r.MaxAge > 0 && appended > now-ms(r.MaxAge) {
				break // young enough to keep, with every record after it
			}
			if r.MaxBytes > 0 && left[ns] <= r.MaxBytes {
				break // within the newest MaxBytes of its namespace
			}
		}
		left[ns] -= size
		hold = pos
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return hold, nil
}

func (e *Engine) retentions(ctx context.Context, q querier, t store.Tenant) (map[string]store.Retention, error) {
	rows, err := e.query(ctx, q, qSelectRetentions, t.Service, t.Provider)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]store.Retention)
	for rows.Next() {
		var (
			ns                  string
			age, expiry, parked int64
			r                   store.Retention
		)
		if err := rows.Scan(&ns, &age, &r.MaxBytes, &expiry, &parked); err != nil {
			return nil, err
		}
		r.MaxAge, r.Expiry, r.Parked = msDuration(age), msDuration(expiry), msDuration(parked)
		out[ns] = r
	}
	return out, rows.Err()
}
