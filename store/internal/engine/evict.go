package engine

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// deadLetter moves messages to dead letters.
func (e *Engine) deadLetter(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, seqs []int64, reason, desc string) error {
	if len(seqs) == 0 {
		return nil
	}
	slices.Sort(seqs)
	list := e.d.IntList(seqs)
	if _, err := e.exec(ctx, tx, qMoveToDeadLetters, reason, desc, qr.now, qr.removeAt(),
		t.Service, t.Provider, qr.settings.Name, list); err != nil {
		return err
	}
	if _, err := e.exec(ctx, tx, qDeleteMessages, t.Service, t.Provider, qr.settings.Name, list); err != nil {
		return err
	}
	e.noteDeadLetters(tx, t, qr.settings.Name, reason, len(seqs))
	return nil
}

// expire dead-letters or drops messages whose time-to-live ran out, as the
// queue says.
func (e *Engine) expire(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	if qr.settings.DeadLetterOnExpiry {
		return e.deadLetter(ctx, tx, t, qr, seqs, sluicetype.ReasonTTLExpired, "the message's time-to-live ran out")
	}
	slices.Sort(seqs)
	_, err := e.exec(ctx, tx, qDeleteMessages, t.Service, t.Provider, qr.settings.Name, e.d.IntList(seqs))
	return err
}

// evictInBackground runs maybeEvict for a queue whose eviction is due
// on a goroutine of its own, unless one already runs for it: the lease
// that noticed returns at once. The claim updates the queue's row, which
// a send in progress holds (its counter): a receive must not wait for a
// producer's commit, or a caller's open transaction, to evict.
func (s *tenantStore) evictInBackground(queue string, qr queueRow) {
	key := queueID{s.t, queue}
	done := make(chan struct{})
	if _, running := s.e.evicting.LoadOrStore(key, done); running {
		return
	}
	s.e.closeMu.RLock()
	defer s.e.closeMu.RUnlock()
	if s.e.closed {
		s.e.evicting.Delete(key)
		close(done)
		return
	}
	s.e.background.Add(1)
	go func() {
		defer s.e.background.Done()
		defer close(done)
		defer s.e.evicting.Delete(key)
		if err := s.maybeEvict(s.e.stopping, queue, qr); err != nil && s.e.stopping.Err() == nil {
			s.e.log.Warn("sluice: eviction failed", "queue", queue, "err", err)
		}
	}()
}

// maybeEvict races to move the queue's control column to the next
// eviction time; the one caller that wins runs one eviction batch. So
// eviction runs about once per interval per queue, however many nodes
// lease from it.
func (s *tenantStore) maybeEvict(ctx context.Context, queue string, qr queueRow) error {
	won := false
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.e.exec(ctx, tx, qClaimEviction, qr.now+ms(qr.settings.EvictionInterval),
			s.t.Service, s.t.Provider, queue, qr.evictAt)
		won = n == 1
		return err
	})
	if err != nil || !won {
		return err
	}
	_, err = s.evict(ctx, queue, s.e.sweeps.due(s.t, qr.settings.EvictionInterval))
	return err
}

var _ store.Evicter = (*tenantStore)(nil)

// Evict runs one eviction batch of a queue now (store.Evicter).
func (s *tenantStore) Evict(ctx context.Context, queue string) (store.EvictResult, error) {
	if err := store.ValidateName("queue", queue); err != nil {
		return store.EvictResult{}, fmt.Errorf("sluice: evict: %w", err)
	}
	// An eviction a lease started is waited for, so that what it took
	// is done when this one returns.
	if running, ok := s.e.evicting.Load(queueID{s.t, queue}); ok {
		select {
		case <-running.(chan struct{}):
		case <-ctx.Done():
			return store.EvictResult{}, fmt.Errorf("sluice: evict: %w", ctx.Err())
		}
	}
	res, err := s.evict(ctx, queue, true)
	if err != nil {
		return res, fmt.Errorf("sluice: evict: %w", err)
	}
	return res, nil
}

// evict runs one bounded eviction batch: ended leases and schedules are
// resolved, expired messages expire, and dead letters past retention are
// removed, each step at most the queue's eviction batch; with sweep, as
// many of the tenant's shared bodies that nothing refers to any more are
// deleted.
func (s *tenantStore) evict(ctx context.Context, queue string, sweep bool) (store.EvictResult, error) {
	var res store.EvictResult
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.e.getQueue(ctx, tx, s.t, queue)
		if err != nil {
			return err
		}
		batch := qr.settings.EvictionBatch
		if res, err = s.e.resolveDue(ctx, tx, s.t, &qr, batch); err != nil {
			return err
		}
		expired, err := s.e.int64s(ctx, tx, qSelectExpired, s.t.Service, s.t.Provider, queue, qr.now, qr.now, batch)
		if err != nil {
			return err
		}
		if err := s.e.expire(ctx, tx, s.t, &qr, expired); err != nil {
			return err
		}
		res.Expired += int64(len(expired))
		if _, err := s.e.exec(ctx, tx, qTrimDedup, s.t.Service, s.t.Provider, queue, qr.now, batch); err != nil {
			return err
		}
		if qr.settings.RequiresSession {
			if err := s.trimSessions(ctx, tx, &qr); err != nil {
				return err
			}
		}
		removable, err := s.e.int64s(ctx, tx, qSelectRemovableDeadLetters, s.t.Service, s.t.Provider, queue, qr.now, batch)
		if err != nil {
			return err
		}
		if len(removable) > 0 {
			slices.Sort(removable)
			if res.Removed, err = s.e.exec(ctx, tx, qDeleteDeadLetters, s.t.Service, s.t.Provider, queue, s.e.d.IntList(removable)); err != nil {
				return err
			}
		}
		if sweep {
			res.Bodies, err = s.e.sweepBodies(ctx, tx, s.t, batch)
		}
		return err
	})
	return res, err
}
