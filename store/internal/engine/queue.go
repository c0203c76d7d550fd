package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// queueRow is a queue's stored settings and control columns, read together
// with the database's clock.
type queueRow struct {
	settings store.QueueSettings
	evictAt  int64
	lastSeq  int64
	now      int64
	// nextDue is the earliest end of a lease or schedule of the queue.
	nextDue sql.NullInt64
	raw     struct {
		maxDel, evictBatch                                int
		ttl, retention, interval, dlqExpd, dedup, session int64
	}
}

// scanDest returns where the columns of GetQueue go, in order; fill
// completes the row from them once scanned.
func (r *queueRow) scanDest() []any {
	return []any{&r.raw.maxDel, &r.raw.ttl, &r.raw.dlqExpd, &r.raw.retention, &r.raw.interval,
		&r.raw.evictBatch, &r.evictAt, &r.lastSeq, &r.now, &r.nextDue, &r.raw.dedup, &r.raw.session}
}

func (r *queueRow) fill(name string) {
	r.settings = store.QueueSettings{
		Name:                name,
		MaxDeliveryCount:    r.raw.maxDel,
		DefaultTTL:          msDuration(r.raw.ttl),
		DeadLetterOnExpiry:  r.raw.dlqExpd != 0,
		DeadLetterRetention: msDuration(r.raw.retention),
		EvictionInterval:    msDuration(r.raw.interval),
		EvictionBatch:       r.raw.evictBatch,

		DuplicateDetectionWindow: msDuration(r.raw.dedup),
		RequiresSession:          r.raw.session != 0,
	}
}

func (e *Engine) getQueue(ctx context.Context, q querier, t store.Tenant, name string) (queueRow, error) {
	var r queueRow
	err := e.queryRow(ctx, q, qGetQueue, []any{t.Service, t.Provider, name}, r.scanDest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("queue %q: %w", name, sluicetype.ErrQueueNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("GetQueue: %w", err)
	}
	r.fill(name)
	return r, nil
}

// removeAt is when a dead letter made now is due for removal (NULL: never).
func (r *queueRow) removeAt() sql.NullInt64 {
	if r.settings.DeadLetterRetention <= 0 || r.settings.DeadLetterRetention >= store.Forever {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: r.now + ms(r.settings.DeadLetterRetention), Valid: true}
}

func (s *tenantStore) CreateQueue(ctx context.Context, qs *store.QueueSettings) error {
	set := qs.WithDefaults()
	if err := set.Validate(); err != nil {
		return fmt.Errorf("sluice: create queue: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		_, err := s.e.exec(ctx, tx, qCreateQueue, s.t.Service, s.t.Provider, set.Name,
			set.MaxDeliveryCount, ms(set.DefaultTTL), boolInt(set.DeadLetterOnExpiry),
			ms(set.DeadLetterRetention), ms(set.EvictionInterval), set.EvictionBatch, nullText(set.Attributes),
			ms(set.DuplicateDetectionWindow), boolInt(set.RequiresSession))
		return err
	})
	if errors.Is(err, ErrDuplicate) {
		return fmt.Errorf("sluice: create queue %q: %w", set.Name, sluicetype.ErrQueueExists)
	}
	if err != nil {
		return fmt.Errorf("sluice: create queue %q: %w", set.Name, err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *tenantStore) GetQueue(ctx context.Context, name string) (store.QueueSettings, error) {
	if err := store.ValidateName("queue", name); err != nil {
		return store.QueueSettings{}, fmt.Errorf("sluice: get queue: %w", err)
	}
	r, err := s.e.getQueue(ctx, s.e.r, s.t, name)
	if err != nil {
		return store.QueueSettings{}, fmt.Errorf("sluice: get queue: %w", err)
	}
	var attrs sql.NullString
	err = s.e.queryRow(ctx, s.e.r, qGetQueueAttributes, []any{s.t.Service, s.t.Provider, name}, &attrs)
	if errors.Is(err, sql.ErrNoRows) {
		return store.QueueSettings{}, fmt.Errorf("sluice: get queue: queue %q: %w", name, sluicetype.ErrQueueNotFound)
	}
	if err != nil {
		return store.QueueSettings{}, fmt.Errorf("sluice: get queue: %w", err)
	}
	if attrs.Valid {
		r.settings.Attributes = []byte(attrs.String)
	}
	return r.settings, nil
}

// nullText binds bytes as text, or NULL when empty.
func nullText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func (s *tenantStore) UpdateQueue(ctx context.Context, qs *store.QueueSettings) error {
	set := qs.WithDefaults()
	if err := set.Validate(); err != nil {
		return fmt.Errorf("sluice: update queue: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.e.exec(ctx, tx, qUpdateQueue, set.MaxDeliveryCount, ms(set.DefaultTTL), boolInt(set.DeadLetterOnExpiry),
			ms(set.DeadLetterRetention), ms(set.EvictionInterval), set.EvictionBatch, nullText(set.Attributes),
			ms(set.DuplicateDetectionWindow), s.t.Service, s.t.Provider, set.Name)
		if err == nil && n == 0 {
			// MySQL counts changed rows: an update to the same values
			// changes none. Tell that from a missing queue.
			_, err = s.e.getQueue(ctx, tx, s.t, set.Name)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sluice: update queue %q: %w", set.Name, err)
	}
	return nil
}

func (s *tenantStore) ListQueues(ctx context.Context, p *store.ListParams) ([]store.QueueSettings, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: list queues: %w", err)
	}
	from, to := store.PrefixRange(p.Prefix)
	rows, err := s.e.query(ctx, s.e.r, qListQueues, s.t.Service, s.t.Provider, p.After, from, to, p.Max)
	if err != nil {
		return nil, fmt.Errorf("sluice: list queues: %w", err)
	}
	defer rows.Close()
	var out []store.QueueSettings
	for rows.Next() {
		var (
			r     queueRow
			name  string
			attrs sql.NullString
		)
		err := rows.Scan(&name, &r.raw.maxDel, &r.raw.ttl, &r.raw.dlqExpd, &r.raw.retention, &r.raw.interval,
			&r.raw.evictBatch, &attrs, &r.raw.dedup, &r.raw.session)
		if err != nil {
			return nil, fmt.Errorf("sluice: list queues: %w", err)
		}
		r.fill(name)
		if attrs.Valid {
			r.settings.Attributes = []byte(attrs.String)
		}
		out = append(out, r.settings)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sluice: list queues: %w", err)
	}
	return out, nil
}

func (s *tenantStore) DeleteQueue(ctx context.Context, name string) error {
	if err := store.ValidateName("queue", name); err != nil {
		return fmt.Errorf("sluice: delete queue: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.e.exec(ctx, tx, qDeleteQueue, s.t.Service, s.t.Provider, name)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("queue %q: %w", name, sluicetype.ErrQueueNotFound)
		}
		if _, err := s.e.exec(ctx, tx, qDeleteQueueMessages, s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		if s.e.d.Capabilities.ReadyFloor {
			// After the messages: see the query.
			if _, err := s.e.exec(ctx, tx, qDeleteQueueReadyFloors, s.t.Service, s.t.Provider, name); err != nil {
				return err
			}
		}
		if _, err := s.e.exec(ctx, tx, qDeleteQueueDedup, s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, qDeleteQueueSessions, s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, qDeleteQueueRoutedSchedules, s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, qDeleteQueueDeadLetters, s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		// Bodies only the queue's messages referred to go now, as far as
		// one bounded sweep reaches; eviction passes find the rest.
		_, err = s.e.sweepBodies(ctx, tx, s.t, maxChunkRows)
		return err
	})
	if err != nil {
		return fmt.Errorf("sluice: delete queue: %w", err)
	}
	s.e.forgetReadyFloor(s.t, name)
	return nil
}

func (s *tenantStore) QueueStats(ctx context.Context, queue string) (store.QueueStats, error) {
	var st store.QueueStats
	if err := store.ValidateName("queue", queue); err != nil {
		return st, fmt.Errorf("sluice: stats: %w", err)
	}
	qr, err := s.e.getQueue(ctx, s.e.r, s.t, queue)
	if err != nil {
		return st, fmt.Errorf("sluice: stats: %w", err)
	}
	var oldest, oldestDeferred sql.NullInt64
	err = s.e.queryRow(ctx, s.e.r, qQueueStats, []any{qr.now, qr.now, qr.now, qr.now, s.t.Service, s.t.Provider, queue},
		&st.Active, &st.Expired, &st.Scheduled, &st.InFlight, &st.Deferred, &oldest, &oldestDeferred)
	if err != nil {
		return st, fmt.Errorf("sluice: stats: %w", err)
	}
	if err := s.e.queryRow(ctx, s.e.r, qCountDeadLetters, []any{s.t.Service, s.t.Provider, queue}, &st.DeadLettered); err != nil {
		return st, fmt.Errorf("sluice: stats: %w", err)
	}
	age := func(at sql.NullInt64) time.Duration {
		if !at.Valid || at.Int64 >= qr.now {
			return 0
		}
		return time.Duration(qr.now-at.Int64) * time.Millisecond
	}
	st.OldestAge, st.OldestDeferredAge = age(oldest), age(oldestDeferred)
	return st, nil
}

func (s *tenantStore) WatchQueue(queue string) (<-chan struct{}, func()) {
	return s.e.hub.Watch(QueueKey(s.t, queue))
}
