package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// repositionRecord is a reposition as the subscription row records it.
type repositionRecord struct {
	Kind string           `json:"kind"`
	By   string           `json:"by"`
	At   int64            `json:"at"`
	From map[string]int64 `json:"from"`
	To   map[string]int64 `json:"to"`
}

var repositionKinds = map[string]store.RepositionKind{
	"position": store.RepositionToPosition, "oldest": store.RepositionToOldest, "head": store.RepositionToHead,
}

func decodeReposition(js sql.NullString) (*store.Reposition, error) {
	if !js.Valid || js.String == "" {
		return nil, nil
	}
	var rec repositionRecord
	if err := json.Unmarshal([]byte(js.String), &rec); err != nil {
		return nil, fmt.Errorf("reposition record: %w", err)
	}
	r := &store.Reposition{Kind: repositionKinds[rec.Kind], By: rec.By, At: fromMS(rec.At),
		From: make(map[int32]int64, len(rec.From)), To: make(map[int32]int64, len(rec.To))}
	for _, m := range []struct {
		in  map[string]int64
		out map[int32]int64
	}{{rec.From, r.From}, {rec.To, r.To}} {
		for k, v := range m.in {
			part, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("reposition record: partition %q: %w", k, err)
			}
			m.out[int32(part)] = v
		}
	}
	return r, nil
}

func (s *tenantStore) RepositionSubscription(ctx context.Context, p *store.RepositionParams) (store.Reposition, error) {
	if err := p.Validate(); err != nil {
		return store.Reposition{}, fmt.Errorf("sluice: reposition subscription: %w", err)
	}
	var out store.Reposition
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.e.reposition(ctx, tx, s.t, p)
		return err
	})
	if err != nil {
		return store.Reposition{}, fmt.Errorf("sluice: reposition subscription %q: %w", p.ID, err)
	}
	return out, nil
}

// reposition moves a subscription under the retention locks of every
// partition it covers, taken in partition order (as saves and
// subscription creations take them): no save or trim of those partitions
// runs between the checks and the commit, and a save computed before
// the reposition, which carries the old count, writes nothing of it.
func (e *Engine) reposition(ctx context.Context, tx querier, t store.Tenant, p *store.RepositionParams) (store.Reposition, error) {
	from, err := e.subscriptionProgress(ctx, tx, t, p.ID)
	if err != nil {
		return store.Reposition{}, err
	}
	if len(from) == 0 {
		return store.Reposition{}, fmt.Errorf("subscription %q: %w", p.ID, sluicetype.ErrSubscriptionNotFound)
	}
	parts := slices.Sorted(maps.Keys(from))
	if p.Kind == store.RepositionToPosition {
		if _, ok := from[p.Partition]; !ok {
			return store.Reposition{}, fmt.Errorf("partition %d: the subscription does not read it: %w", p.Partition, sluicetype.ErrInvalidArgument)
		}
	}
	for _, part := range parts {
		if _, _, err := e.lockCheckpoint(ctx, tx, t, part); err != nil {
			return store.Reposition{}, err
		}
	}
	// Read again under the locks: a save may have moved it meanwhile.
	if from, err = e.subscriptionProgress(ctx, tx, t, p.ID); err != nil {
		return store.Reposition{}, err
	}
	rec := repositionRecord{Kind: p.Kind.String(), By: p.By, From: map[string]int64{}, To: map[string]int64{}}
	out := store.Reposition{Kind: p.Kind, By: p.By, From: map[int32]int64{}, To: map[int32]int64{}}
	for _, part := range parts {
		if p.Kind == store.RepositionToPosition && part != p.Partition {
			continue
		}
		to, err := e.repositionTarget(ctx, tx, t, p, part)
		if err != nil {
			return store.Reposition{}, err
		}
		if _, err := e.exec(ctx, tx, qSetSubscriptionProgress, to, t.Service, t.Provider, part, p.ID); err != nil {
			return store.Reposition{}, err
		}
		// The events delivered again are handled again: a transactional
		// handler's records of them (MarkHandledTx) go.
		if _, err := e.exec(ctx, tx, qForgetHandled, t.Service, t.Provider, p.ID, part, int64(math.MaxInt64)); err != nil {
			return store.Reposition{}, err
		}
		// Back: the checkpoint comes with it; forward: the next save
		// moves it on.
		if _, err := e.exec(ctx, tx, qLowerCheckpoint, to, t.Service, t.Provider, part); err != nil {
			return store.Reposition{}, err
		}
		key := strconv.Itoa(int(part))
		rec.From[key], rec.To[key] = from[part], to
		out.From[part], out.To[part] = from[part], to
	}
	js, err := json.Marshal(rec)
	if err != nil {
		return store.Reposition{}, err
	}
	n, err := e.exec(ctx, tx, qRecordReposition, string(js), t.Service, t.Provider, p.ID)
	if err != nil {
		return store.Reposition{}, err
	}
	if n == 0 {
		return store.Reposition{}, fmt.Errorf("subscription %q: %w", p.ID, sluicetype.ErrSubscriptionNotFound)
	}
	var (
		count  int64
		stored sql.NullString
	)
	if err := e.queryRow(ctx, tx, qGetReposition, []any{t.Service, t.Provider, p.ID}, &count, &stored); err != nil {
		return store.Reposition{}, err
	}
	got, err := decodeReposition(stored)
	if err != nil || got == nil {
		return store.Reposition{}, fmt.Errorf("reposition not recorded: %v", err)
	}
	out.At = got.At
	return out, nil
}

// repositionTarget returns the stored position a reposition moves a
// subscription to on a partition: the subscription is done with every
// record at or below it. Retention must have kept every record after it.
func (e *Engine) repositionTarget(ctx context.Context, tx querier, t store.Tenant, p *store.RepositionParams, part int32) (int64, error) {
	var head, trimmed, now int64
	err := e.queryRow(ctx, tx, qGetPartition, []any{t.Service, t.Provider, part}, &head, &trimmed, &now)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	switch p.Kind {
	case store.RepositionToOldest:
		return trimmed, nil
	case store.RepositionToHead:
		return head, nil
	}
	to := p.Position - 1
	if to < trimmed {
		return 0, fmt.Errorf("position %d of partition %d: retention trimmed through %d: %w", p.Position, part, trimmed, sluicetype.ErrTrimmed)
	}
	if to > head {
		return 0, fmt.Errorf("position %d of partition %d: past the head's next position %d: %w", p.Position, part, head+1, sluicetype.ErrInvalidArgument)
	}
	return to, nil
}

// subscriptionProgress returns a subscription's stored position on each
// partition it covers (none: it does not exist).
func (e *Engine) subscriptionProgress(ctx context.Context, q querier, t store.Tenant, id string) (map[int32]int64, error) {
	return pairs[int32, int64](ctx, e, q, qSelectSubscriptionProgress, t.Service, t.Provider, id)
}
