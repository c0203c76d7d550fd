package postgres

import (
	"context"
	"database/sql"
	"log/slog"
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

// vacuumTables lists every table sluice writes.
const vacuumTables = `VACUUM (ANALYZE) sluice_messages, sluice_dead_letters, sluice_queues,
    sluice_records, sluice_partitions, sluice_checkpoints`

// vacuumer stands in for autovacuum where it is off. Every message is
// inserted, updated and deleted, and until vacuum runs the dead versions
// stay in the indexes that leases walk: without it a lease gets slower
// with every message the queue ever carried. At each interval, one of the
// processes sharing the schema (the one that takes the advisory lock)
// vacuums sluice's tables, if autovacuum is still off.
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
	_, err = conn.ExecContext(ctx, vacuumTables)
	return err
}
