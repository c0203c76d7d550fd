package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Migrator applies and reports a dialect's migrations on one pool: the
// one code path that both Open and the migrate command take.
type Migrator struct {
	d     *Dialect
	q     map[string]string
	db    *sql.DB
	log   *slog.Logger
	migs  []migration
	close func() error
}

var _ store.Migrator = (*Migrator)(nil)

// NewMigrator returns a Migrator of a dialect's migrations on db. Close
// runs closeFn (nil: nothing), for a pool the backend opened for it.
func NewMigrator(d *Dialect, db *sql.DB, log *slog.Logger, closeFn func() error) (*Migrator, error) {
	q, err := ParseQueries(d.Queries)
	if err != nil {
		return nil, fmt.Errorf("sluice: %s queries: %w", d.Features.Name, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMigrator(d, q, db, log)
	if err != nil {
		return nil, err
	}
	m.close = closeFn
	return m, nil
}

func newMigrator(d *Dialect, q map[string]string, db *sql.DB, log *slog.Logger) (*Migrator, error) {
	migs, err := parseMigrations(d.Migrations)
	if err != nil {
		return nil, fmt.Errorf("sluice: migrate: %w", err)
	}
	if len(migs) == 0 {
		return nil, errors.New("sluice: migrate: the dialect has no migrations")
	}
	return &Migrator{d: d, q: q, db: db, log: log, migs: migs}, nil
}

// ListMigrations returns the migrations of a directory of NNNN_name.sql
// files, in version order.
func ListMigrations(fsys fs.FS) ([]store.Migration, error) {
	migs, err := parseMigrations(fsys)
	if err != nil {
		return nil, err
	}
	return publicMigrations(migs), nil
}

func publicMigrations(migs []migration) []store.Migration {
	out := make([]store.Migration, len(migs))
	for i, m := range migs {
		out[i] = store.Migration{Version: m.version, Name: m.name, SQL: m.text}
	}
	return out
}

// Migrations implements store.Migrator.
func (m *Migrator) Migrations() []store.Migration { return publicMigrations(m.migs) }

// required is the version the last migration reaches.
func (m *Migrator) required() int { return m.migs[len(m.migs)-1].version }

// Close implements store.Migrator.
func (m *Migrator) Close() error {
	if m.close == nil {
		return nil
	}
	return m.close()
}

// Status implements store.Migrator. It reads without taking the
// migration lock: a migration running meanwhile shows as pending until
// it commits.
func (m *Migrator) Status(ctx context.Context) (store.MigrationStatus, error) {
	var exists int
	if err := m.db.QueryRowContext(ctx, m.q[qMigrationsTableExists]).Scan(&exists); err != nil {
		return store.MigrationStatus{}, fmt.Errorf("sluice: migrate: status: %w", err)
	}
	var applied []int
	if exists != 0 {
		var err error
		if applied, err = m.applied(ctx, m.db); err != nil {
			return store.MigrationStatus{}, fmt.Errorf("sluice: migrate: status: %w", err)
		}
	}
	return m.status(applied), nil
}

func (m *Migrator) status(applied []int) store.MigrationStatus {
	st := store.MigrationStatus{Required: m.required(), Applied: applied}
	done := make(map[int]bool, len(applied))
	for _, v := range applied {
		done[v] = true
		st.Database = max(st.Database, v)
	}
	for _, mig := range m.migs {
		if !done[mig.version] {
			st.Pending = append(st.Pending, store.Migration{Version: mig.version, Name: mig.name, SQL: mig.text})
		}
	}
	return st
}

// check fails with a *sluicetype.SchemaVersionError unless the database
// has applied every migration and none this build does not know.
func (m *Migrator) check(ctx context.Context) error {
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	if st.Database > st.Required {
		return fmt.Errorf("sluice: %w", &sluicetype.SchemaVersionError{Database: st.Database, Required: st.Required})
	}
	if len(st.Pending) > 0 {
		// A database missing a migration in the middle is behind, even
		// at the last version.
		return fmt.Errorf("sluice: %w", &sluicetype.SchemaVersionError{Database: min(st.Database, st.Pending[0].Version-1), Required: st.Required})
	}
	return nil
}

// applied reads the applied versions, in order.
func (m *Migrator) applied(ctx context.Context, q sqlQuerier) ([]int, error) {
	rows, err := q.QueryContext(ctx, m.q[qAppliedMigrations])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, int(v))
	}
	return out, rows.Err()
}

// Up implements store.Migrator. It holds the dialect's migration lock on
// one connection while it reads what was applied and applies the rest.
func (m *Migrator) Up(ctx context.Context) (done []store.Migration, err error) {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sluice: migrate: %w", err)
	}
	defer conn.Close()
	if err := m.lock(ctx, conn); err != nil {
		return nil, fmt.Errorf("sluice: migrate: lock: %w", err)
	}
	defer func() {
		end := m.q[qMigrateUnlock]
		if err != nil {
			end = m.q[qMigrateAbort]
		}
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), end); uerr != nil && err == nil {
			done, err = nil, fmt.Errorf("sluice: migrate: unlock: %w", uerr)
		}
	}()
	if _, err := conn.ExecContext(ctx, m.q[qCreateMigrationsTable]); err != nil {
		return nil, fmt.Errorf("sluice: migrate: %w", err)
	}
	applied, err := m.applied(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("sluice: migrate: %w", err)
	}
	st := m.status(applied)
	if st.Database > st.Required {
		return nil, fmt.Errorf("sluice: migrate: %w", &sluicetype.SchemaVersionError{Database: st.Database, Required: st.Required})
	}
	for _, p := range st.Pending {
		mig := m.migs[m.index(p.Version)]
		if err := m.apply(ctx, conn, mig); err != nil {
			return done, fmt.Errorf("sluice: migrate %s: %w", mig.name, err)
		}
		m.log.Debug("sluice: applied migration", "backend", m.d.Features.Name, "migration", mig.name)
		done = append(done, p)
	}
	if len(done) > 0 {
		// One line for all of them: a new database applies every one.
		m.log.Info("sluice: migrated the schema", "backend", m.d.Features.Name, "applied", len(done),
			"from", done[0].Name, "to", done[len(done)-1].Name, "version", st.Required)
	}
	return done, nil
}

// index returns the position of a known version in m.migs.
func (m *Migrator) index(version int) int {
	for i, mig := range m.migs {
		if mig.version == version {
			return i
		}
	}
	panic(fmt.Sprintf("engine: migration %d unknown", version))
}

// lock takes the lock that keeps concurrent starts from migrating at
// once. Where the dialect's lock reports its outcome as a value (MySQL's
// GET_LOCK returns 0 on timeout), anything but 1 is an error.
func (m *Migrator) lock(ctx context.Context, conn *sql.Conn) error {
	if !m.d.Capabilities.LockResult {
		_, err := conn.ExecContext(ctx, m.q[qMigrateLock])
		return err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, m.q[qMigrateLock]).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return errors.New("another process holds the migration lock; try again once it has finished")
	}
	return nil
}

// apply runs one migration and records it, in a transaction of its own
// where the dialect's DDL is transactional (TxMigrations).
func (m *Migrator) apply(ctx context.Context, conn *sql.Conn, mig migration) error {
	var q querier = conn
	var tx *sql.Tx
	if m.d.Capabilities.TxMigrations {
		var err error
		if tx, err = conn.BeginTx(ctx, nil); err != nil {
			return err
		}
		defer tx.Rollback()
		q = tx
	}
	for _, s := range mig.statements {
		if _, err := q.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%w\nin statement:\n%s", err, s)
		}
	}
	if _, err := q.ExecContext(ctx, m.q[qRecordMigration], mig.version); err != nil {
		return err
	}
	if tx != nil {
		return tx.Commit()
	}
	return nil
}
