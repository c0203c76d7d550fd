package engine

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Duplicate detection on the way. A topic, or a queue that forwards,
// stores no copy of what is sent through it, yet with duplicate detection
// it must drop a message whose id it saw within its window, before its
// copies are made. Such an entity's ids live in sluice_dedup under its own
// name, as a queue's do, and are checked as a queue checks them: under
// its counter row. The counter rows of the entities a group checks are
// locked first, in (tenant, name) order, before any counter row of the
// group's enqueues; then each send's arrivals are decided in the order
// they happened (an arrival after a duplicate is no arrival at all), the
// new ids recorded, and only the copies whose arrivals were all new are
// enqueued.

// dedupTrimBatch bounds the expired ids a check deletes: an entity that
// is never leased from is never evicted, so its checks trim it.
const dedupTrimBatch = 64

// checkArrivals runs the duplicate checks of the EnqueueAlls of a group
// and drops from their children the copies that came through a
// duplicate.
func (e *Engine) checkArrivals(ctx context.Context, gt *groupTx, alls []allReq) error {
	keys := map[queueID][]string{}
	for _, a := range alls {
		for _, arr := range a.r.all.Arrivals {
			id := queueID{a.r.t, arr.Queue}
			keys[id] = append(keys[id], arrivalKey(arr))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	ids := make([]queueID, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b queueID) int {
		return cmp.Or(cmp.Compare(a.t.Service, b.t.Service), cmp.Compare(a.t.Provider, b.t.Provider), cmp.Compare(a.name, b.name))
	})
	seen := make(map[queueID]map[string]int64, len(ids))
	for _, id := range ids {
		got, err := e.lockChecked(ctx, gt, id, keys[id])
		if err != nil {
			return err
		}
		seen[id] = got
	}
	accepted := map[queueID][]dedupRow{}
	for i := range alls {
		a := &alls[i]
		arrs := a.r.all.Arrivals
		if len(arrs) == 0 {
			continue
		}
		a.accepted = make([]bool, len(arrs))
		if rs := a.r.all.Routed; rs != nil {
			a.dup = make([]bool, len(rs.VisibleAt))
		}
		for k, arr := range arrs {
			if arr.After >= 0 && !a.accepted[arr.After] {
				continue // never arrived
			}
			id := queueID{a.r.t, arr.Queue}
			qr := gt.queues[id]
			key := arrivalKey(arr)
			if key == "" || qr.settings.DuplicateDetectionWindow == 0 {
				a.accepted[k] = true
				continue
			}
			if _, dup := seen[id][key]; dup {
				if arr.After < 0 && arr.Message < len(a.dup) {
					a.dup[arr.Message] = true
				}
				continue
			}
			seen[id][key] = 0
			a.accepted[k] = true
			accepted[id] = append(accepted[id], dedupRow{Key: key, Expires: qr.now + ms(qr.settings.DuplicateDetectionWindow)})
		}
		a.keep()
	}
	for _, id := range ids {
		if len(accepted[id]) == 0 {
			continue
		}
		js, err := jsonText(accepted[id])
		if err != nil {
			return err
		}
		if _, err := e.exec(ctx, gt.tx, qUpsertDedup, id.t.Service, id.t.Provider, id.name, js); err != nil {
			return err
		}
	}
	return nil
}

// lockChecked locks the counter row of an entity whose duplicate check a
// group runs, reads its row for the clock and window, trims a few
// expired ids, and returns which of keys it has recorded.
func (e *Engine) lockChecked(ctx context.Context, gt *groupTx, id queueID, keys []string) (map[string]int64, error) {
	t, name := id.t, id.name
	var last int64
	err := e.queryRow(ctx, gt.tx, qLockQueue, []any{t.Service, t.Provider, name}, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("queue %q: %w", name, sluicetype.ErrQueueNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("LockQueue: %w", err)
	}
	qr, err := e.getQueue(ctx, gt.tx, t, name)
	if err != nil {
		return nil, err
	}
	gt.queues[id] = qr
	seen := map[string]int64{}
	if qr.settings.DuplicateDetectionWindow == 0 {
		return seen, nil
	}
	if _, err := e.exec(ctx, gt.tx, qTrimDedup, t.Service, t.Provider, name, qr.now, dedupTrimBatch); err != nil {
		return nil, err
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) > 0 && keys[0] == "" {
		keys = keys[1:]
	}
	if len(keys) == 0 {
		return seen, nil
	}
	js, err := jsonText(keys)
	if err != nil {
		return nil, err
	}
	rows, err := e.query(ctx, gt.tx, qSelectDedup, t.Service, t.Provider, name, qr.now, js)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k   string
			seq int64
		)
		if err := rows.Scan(&k, &seq); err != nil {
			return nil, fmt.Errorf("SelectDedup: %w", err)
		}
		seen[k] = seq
	}
	return seen, rows.Err()
}

// arrivalKey is what an arrival's check compares, as dedupKey.
func arrivalKey(a store.Arrival) string {
	return dedupKey(&store.NewMessage{MessageID: a.MessageID, PartitionKey: a.PartitionKey})
}
