package postgres

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"time"
)

// defaultVacuumInterval is how often sluice vacuums its own tables when
// autovacuum is off for them.
const defaultVacuumInterval = 10 * time.Second

// vacuumLockKey is the first key of the advisory lock that elects the one
// process vacuuming a schema ("slvc" in ASCII); the second is a hash of
// the schema's name.
const vacuumLockKey = 0x736c7663

// vacuumNeeded reports whether autovacuum is off for sluice's messages,
// for the whole server or for the table.
const vacuumNeeded = `SELECT current_setting('autovacuum') <> 'on' OR EXISTS (
    SELECT 1 FROM pg_class
    WHERE oid = 'sluice_messages'::regclass
      AND 'autovacuum_enabled=false' = ANY (coalesce(reloptions, '{}')))`

// dueForVacuum lists sluice's tables of the current schema that
// autovacuum would visit by its default rule (50 dead rows plus 20% of
// the live ones; for sluice_messages, its own 1,000 plus 2%), all of them
// if the server keeps no such counts (track_counts off).
const dueForVacuum = `SELECT c.relname FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.relkind = 'r' AND c.relname IN ('sluice_messages', 'sluice_dead_letters', 'sluice_queues',
    'sluice_records', 'sluice_partitions', 'sluice_sessions', 'sluice_dedup',
    'sluice_routed_schedules', 'sluice_partition_leases', 'sluice_partition_checkpoints', 'sluice_stream_progress', 'sluice_stream_parked', 'sluice_nodes',
    'sluice_ready_floors')
  AND (current_setting('track_counts') <> 'on'
       OR s.n_dead_tup > CASE c.relname WHEN 'sluice_messages' THEN 1000 + 0.02 * s.n_live_tup
                                        ELSE 50 + 0.2 * s.n_live_tup END)
ORDER BY c.relname`

// vacuumCostDelay throttles the vacuum as autovacuum's default does, so
// that it takes its share of the disk and no more.
const vacuumCostDelay = "SET vacuum_cost_delay = '2ms'"

// vacuumer stands in for autovacuum where it is off. Every message is
// inserted, updated and deleted, and until vacuum runs the dead versions
// stay in the indexes that leases walk: without it a lease gets slower
// with every message the queue ever carried. At each interval, one of the
// processes sharing the schema (the one that takes the advisory lock)
// vacuums those of sluice's tables that autovacuum would, throttled as
// autovacuum is, if autovacuum is still off.
type vacuumer struct {
	db       *sql.DB
	log      *slog.Logger
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}
}

// startVacuumer starts vacuuming every interval if autovacuum is off, and
// returns nil (nothing to stop) if it is on.
func startVacuumer(ctx context.Context, db *sql.DB, log *slog.Logger, interval time.Duration) (*vacuumer, error) {
	var needed bool
	if err := db.QueryRowContext(ctx, vacuumNeeded).Scan(&needed); err != nil {
		return nil, err
	}
	if !needed {
		return nil, nil
	}
	log.Warn("sluice: postgres: autovacuum is off for sluice's tables; sluice vacuums them itself",
		"every", interval)
	vctx, cancel := context.WithCancel(context.Background())
	v := &vacuumer{db: db, log: log, interval: interval, cancel: cancel, done: make(chan struct{})}
	go v.run(vctx)
	return v, nil
}

// stop ends the loop, interrupting a vacuum in progress, and waits for it.
func (v *vacuumer) stop() {
	if v == nil {
		return
	}
	v.cancel()
	<-v.done
}

func (v *vacuumer) run(ctx context.Context) {
	defer close(v.done)
	t := time.NewTicker(v.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := v.vacuum(ctx); err != nil && ctx.Err() == nil {
			v.log.Warn("sluice: postgres: vacuum failed", "err", err)
		}
	}
}

// vacuum runs one round, if this process takes the lock and autovacuum is
// still off.
func (v *vacuumer) vacuum(ctx context.Context) error {
	conn, err := v.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var locked bool
	err = conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))", vacuumLockKey).Scan(&locked)
	if err != nil || !locked {
		return err
	}
	defer func() {
		// A fresh context: the lock must go even when ctx has ended.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.ExecContext(uctx, "SELECT pg_advisory_unlock($1, hashtext(current_schema()))", vacuumLockKey)
	}()
	var needed bool
	if err := conn.QueryRowContext(ctx, vacuumNeeded).Scan(&needed); err != nil || !needed {
		return err
	}
	rows, err := conn.QueryContext(ctx, dueForVacuum)
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(tables) == 0 {
		return err
	}
	if _, err := conn.ExecContext(ctx, vacuumCostDelay); err != nil {
		return err
	}
	// Table names come from the catalog query above, from a fixed list;
	// an identifier cannot be a parameter.
	_, err = conn.ExecContext(ctx, "VACUUM (ANALYZE) "+strings.Join(tables, ", "))
	return err
}
