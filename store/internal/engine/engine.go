// Package engine runs sluice's storage operations on any database/sql
// backend. The logic (lock order, leases, eviction, group commit, fencing)
// lives here once; each backend supplies a Dialect: its SQL files, its
// migrations, and how its driver encodes lists and reports errors.
package engine

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/backoff"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Config opens an Engine.
type Config struct {
	Dialect *Dialect
	// Write runs every write transaction. Read runs browsing queries; it
	// may be the same pool.
	Write, Read *sql.DB
	// Limits bound calls; zero fields take defaults.
	Limits store.Limits
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// Pipelines is how many group commits may run at once, each on a
	// connection of Write (see committer): 0 is DefaultPipelines, or a
	// quarter of Write's MaxOpenConns if that is fewer (at least one). It
	// must be below Write's MaxOpenConns.
	Pipelines int
	// OnClose runs after the engine stopped, before the pools are closed.
	OnClose func()
	// SkipMigrations checks that the schema is at the version the
	// dialect's migrations end at instead of applying them.
	SkipMigrations bool
	// KeepPools leaves Write and Read open on Close: the caller owns them.
	KeepPools bool
	// Unprepared sends every query with its text instead of preparing it
	// (a connection pooler that does not keep prepared statements).
	Unprepared bool
	// ReadyFloorGap is how far a queue's ready floor may fall behind its
	// first ready message before a lease raises it (capability
	// ReadyFloor): 0 is defaultReadyFloorGap. Tests make it small.
	ReadyFloorGap int64
}

// Engine implements store.Backend.
type Engine struct {
	d       *Dialect
	q       map[string]string
	w, r    *sql.DB
	limits  store.Limits
	log     *slog.Logger
	hub     *Hub
	commit  *committer
	onClose func()
	stmtMu  sync.Mutex
	stmts   map[stmtKey]*sql.Stmt
	closeMu sync.RWMutex
	closed  bool
	// keepPools: the pools are the caller's; Close leaves them open.
	keepPools bool
	// unprepared: queries are never prepared (Config.Unprepared).
	unprepared bool
	// noPipeline is set once the write pool's connections turned out not
	// to be the dialect's driver's: groups no longer try Pipeline.
	noPipeline atomic.Bool
	sweeps     bodySweeps
	// deadNotes holds, for each transaction tryTx has open, the
	// dead-letterings it made (*[]store.DeadLettered, by *sql.Tx), to
	// report once it commits.
	deadNotes sync.Map
	// evicting holds the queues (queueID) whose eviction runs in the
	// background now, each with a channel closed when it ends; background
	// counts those goroutines, and stopping ends when Close begins.
	evicting   sync.Map
	background sync.WaitGroup
	stopping   context.Context
	stop       context.CancelFunc
	// handled counts first records of handled events (MarkHandledTx),
	// to delete the stale ones now and then.
	handled atomic.Int64
	// floors holds what the engine knows of the queues' ready floors
	// (*floorState by queueID); floorGap is Config.ReadyFloorGap.
	floors   sync.Map
	floorGap int64
}

// maxRetries bounds how often a transaction is retried after a deadlock,
// serialization failure or busy error.
const maxRetries = 8

// New applies migrations and starts the engine.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	q, err := ParseQueries(cfg.Dialect.Queries)
	if err == nil {
		err = cfg.Dialect.Capabilities.check(q)
	}
	if err != nil {
		return nil, fmt.Errorf("sluice: %s queries: %w", cfg.Dialect.Features.Name, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		d: cfg.Dialect, q: q, w: cfg.Write, r: cfg.Read,
		limits: cfg.Limits.WithDefaults(), log: log, hub: NewHub(), onClose: cfg.OnClose,
		stmts: make(map[stmtKey]*sql.Stmt), keepPools: cfg.KeepPools,
		unprepared: cfg.Unprepared,
		floorGap:   cmp.Or(cfg.ReadyFloorGap, defaultReadyFloorGap),
	}
	e.stopping, e.stop = context.WithCancel(context.Background())
	if e.r == nil {
		e.r = e.w
	}
	m, err := newMigrator(cfg.Dialect, q, e.w, log)
	if err != nil {
		return nil, err
	}
	if cfg.SkipMigrations {
		err = m.check(ctx)
	} else {
		_, err = m.Up(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := e.prepareAll(ctx); err != nil {
		return nil, fmt.Errorf("sluice: %s: %w", cfg.Dialect.Features.Name, err)
	}
	maxOpen := cfg.Write.Stats().MaxOpenConnections
	n, err := pipelines(cfg.Pipelines, maxOpen)
	if err != nil {
		return nil, err
	}
	e.commit = startCommitter(e, n, maxStalled(n, maxOpen))
	return e, nil
}

// DefaultPipelines is how many group commits run at once by default.
const DefaultPipelines = 2

// pipelines returns how many commit pipelines to run on a pool of at most
// maxOpen connections (0: unlimited) when asked for n (0: the default).
func pipelines(n, maxOpen int) (int, error) {
	switch {
	case n < 0 || maxOpen > 0 && n >= maxOpen:
		return 0, fmt.Errorf("sluice: %d commit pipelines on a pool of %d connections: want 0 (the default) to one less than the pool's size: %w",
			n, maxOpen, sluicetype.ErrInvalidArgument)
	case n > 0:
		return n, nil
	case maxOpen > 0:
		return max(1, min(DefaultPipelines, maxOpen/4)), nil
	}
	return DefaultPipelines, nil
}

// maxStalled is how many stalled groups n pipelines on a pool of at most
// maxOpen connections (0: unlimited) may leave waiting at once: as many as
// there are pipelines, and at least four, within the connections the
// pipelines leave.
func maxStalled(n, maxOpen int) int {
	m := max(n, 4)
	if maxOpen > 0 {
		return max(0, min(m, maxOpen-n))
	}
	return m
}

// Hub returns the engine's wake-up hub, so a backend can feed it
// notifications from other processes.
func (e *Engine) Hub() *Hub { return e.hub }

// Features implements store.Backend.
func (e *Engine) Features() store.Features {
	f := e.d.Features
	if e.commit != nil {
		f.CommitPipelines = len(e.commit.pipes)
	}
	return f
}

// Close stops the group committer and closes the pools. It is safe to call
// more than once.
func (e *Engine) Close() error {
	e.closeMu.Lock()
	if e.closed {
		e.closeMu.Unlock()
		return nil
	}
	e.closed = true
	e.closeMu.Unlock()
	e.stop()
	e.background.Wait()
	e.commit.stop()
	if e.onClose != nil {
		e.onClose()
	}
	var err error
	e.stmtMu.Lock()
	for _, st := range e.stmts {
		err = errors.Join(err, st.Close())
	}
	e.stmtMu.Unlock()
	if e.keepPools {
		return err
	}
	err = errors.Join(err, e.w.Close())
	if e.r != e.w {
		err = errors.Join(err, e.r.Close())
	}
	return err
}

// Store implements store.Backend.
func (e *Engine) Store(t store.Tenant) (store.Store, error) {
	if err := store.ValidateTenant(t); err != nil {
		return nil, fmt.Errorf("sluice: store: %w", err)
	}
	return &tenantStore{e: e, t: t}, nil
}

func (e *Engine) isClosed() bool {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	return e.closed
}

// inTx runs fn in a write transaction, retrying it from the start after a
// deadlock, serialization failure or busy error, with jittered backoff, at
// most maxRetries times; then it fails with ErrContention.
func (e *Engine) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return e.retry(ctx, func() error { return e.tryTx(ctx, fn) })
}

// txBackoff spaces the retries of a transaction: short, for contention
// clears within milliseconds.
var txBackoff = backoff.Policy{Initial: time.Millisecond, Max: 100 * time.Millisecond, Jitter: true}

// retry runs fn again while it fails with ErrRetry, as inTx says.
func (e *Engine) retry(ctx context.Context, fn func() error) error {
	if e.isClosed() {
		return sluicetype.ErrClosed
	}
	var err error
	werr := backoff.Retry(ctx, txBackoff, func(attempt int) bool {
		err = e.wrap(fn())
		if err == nil || !errors.Is(err, ErrRetry) {
			return true
		}
		if attempt > maxRetries {
			err = fmt.Errorf("%w after %d attempts: %v", sluicetype.ErrContention, attempt, err)
			return true
		}
		e.log.Debug("sluice: retrying transaction", "attempt", attempt, "err", err)
		return false
	})
	if werr != nil {
		return werr
	}
	return err
}

func (e *Engine) tryTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	return e.tryTxOn(ctx, e.w.BeginTx, fn)
}

// inConnTx is inTx on a connection of its own, which fn may also use
// outside the transaction's statements (sql.Conn.Raw, for CopyFrom).
func (e *Engine) inConnTx(ctx context.Context, fn func(conn *sql.Conn, tx *sql.Tx) error) error {
	return e.retry(ctx, func() error {
		conn, err := e.w.Conn(ctx)
		if err != nil {
			return e.wrap(err)
		}
		defer conn.Close()
		return e.tryTxOn(ctx, conn.BeginTx, func(tx *sql.Tx) error { return fn(conn, tx) })
	})
}

// tryTxOn is tryTx with the transaction begun by begin.
func (e *Engine) tryTxOn(ctx context.Context, begin func(context.Context, *sql.TxOptions) (*sql.Tx, error), fn func(tx *sql.Tx) error) (err error) {
	tx, err := begin(ctx, nil)
	if err != nil {
		return e.wrap(err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	notes := new([]store.DeadLettered)
	e.deadNotes.Store(tx, notes)
	defer e.deadNotes.Delete(tx)
	if err := fn(tx); err != nil {
		return e.wrap(err)
	}
	if err := e.committed(tx.Commit()); err != nil {
		return err
	}
	e.hub.DeadLettered(*notes)
	return nil
}

// noteDeadLetters records that tx dead-lettered n messages of a queue
// for reason, to report once it commits (nothing when tx is not one of
// tryTx's: a caller's transaction).
func (e *Engine) noteDeadLetters(q querier, t store.Tenant, queue, reason string, n int) {
	tx, ok := q.(*sql.Tx)
	if !ok {
		return
	}
	if v, ok := e.deadNotes.Load(tx); ok {
		notes := v.(*[]store.DeadLettered)
		*notes = append(*notes, store.DeadLettered{Tenant: t, Queue: queue, Reason: reason, Count: n})
	}
}

// ObserveDeadLetters implements store.DeadLetterObserver.
func (s *tenantStore) ObserveDeadLetters(fn func(store.DeadLettered)) (stop func()) {
	return s.e.hub.ObserveDeadLetters(s.t, fn)
}

// committed is the error of a statement that commits: a COMMIT, or a
// write outside a transaction. If the connection broke after it was sent
// (ErrNoReply), the write may or may not have been applied: it is
// reported as sluicetype.ErrOutcomeUnknown, never retried here, since a
// second run could apply it twice. (Inside a transaction a broken
// connection applied nothing: the error stays what it is.)
func (e *Engine) committed(err error) error {
	err = e.wrap(err)
	if errors.Is(err, ErrNoReply) && !errors.Is(err, sluicetype.ErrOutcomeUnknown) {
		return fmt.Errorf("%w: %w", sluicetype.ErrOutcomeUnknown, err)
	}
	return err
}

// wrap marks a driver error with the kind Classify reports.
func (e *Engine) wrap(err error) error {
	if err == nil {
		return nil
	}
	if kind := e.d.Classify(err); kind != nil && !errors.Is(err, kind) {
		return fmt.Errorf("%w: %w", kind, err)
	}
	return err
}

// querier is what statements run on: the engine's *sql.Tx or *sql.DB, a
// migration's *sql.Conn, or a caller's transaction (foreignTx, nativeTx).
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// sqlQuerier is a querier of database/sql.
type sqlQuerier interface {
	querier
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// rows are a query's rows: database/sql's, or those of a caller's
// native transaction. A concrete type, not an interface, so that the
// engine's own paths call *sql.Rows directly.
type rows struct {
	sql    *sql.Rows
	native store.Rows
}

// Next prepares the next row.
func (r *rows) Next() bool {
	if r.sql != nil {
		return r.sql.Next()
	}
	return r.native.Next()
}

// Scan reads the current row's columns into dest.
func (r *rows) Scan(dest ...any) error {
	if r.sql != nil {
		return r.sql.Scan(dest...)
	}
	return scanNative(r.native.Scan, dest)
}

// Err is the error that ended the rows, if any.
func (r *rows) Err() error {
	if r.sql != nil {
		return r.sql.Err()
	}
	return r.native.Err()
}

// Close releases the rows.
func (r *rows) Close() error {
	if r.sql != nil {
		return r.sql.Close()
	}
	return r.native.Close()
}

// row is a query's first row, as rows are.
type row struct {
	sql    *sql.Row
	native store.Row
}

// Scan reads the row's columns into dest; sql.ErrNoRows if there is none.
func (r row) Scan(dest ...any) error {
	if r.sql != nil {
		return r.sql.Scan(dest...)
	}
	return scanNative(r.native.Scan, dest)
}

// scanNative hands a native transaction's Scan a copy of dest: dest
// itself, handed to no interface, does not escape, so the argument list
// each caller builds stays on its stack (the values it points to escape
// anyway, as database/sql's Scan makes them).
func scanNative(scan func(dest ...any) error, dest []any) error {
	return scan(slices.Clone(dest)...)
}

// Statements are prepared once per pool and reused: parsing and planning
// every call costs more than running most of these queries.
type stmtKey struct {
	db   *sql.DB
	name string
}

// prepared returns the statement of a named query on a pool, preparing
// it if needed. Never call it while holding a connection of a pool that
// may have only one (SQLite's writer): preparing takes a connection.
func (e *Engine) prepared(ctx context.Context, db *sql.DB, name string) (*sql.Stmt, error) {
	key := stmtKey{db, name}
	e.stmtMu.Lock()
	defer e.stmtMu.Unlock()
	if st, ok := e.stmts[key]; ok {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, e.q[name])
	if err != nil {
		return nil, e.wrap(fmt.Errorf("prepare %s: %w", name, err))
	}
	e.stmts[key] = st
	return st, nil
}

// prepareAll prepares the operations' queries on the write pool, so that
// transactions find them ready (see stmt).
func (e *Engine) prepareAll(ctx context.Context) error {
	if e.unprepared {
		return nil
	}
	for _, name := range queryNames {
		if migrationQueries[name] || benchQueries[name] {
			continue
		}
		if _, err := e.prepared(ctx, e.w, name); err != nil {
			return err
		}
	}
	for _, name := range e.d.Capabilities.optionalIn() {
		if _, err := e.prepared(ctx, e.w, name); err != nil {
			return err
		}
	}
	return nil
}

// benchQueries serve `sluice bench --scenario raw-insert` only, on a
// table of their own; they are prepared when used.
var benchQueries = map[string]bool{qBenchCreateTable: true, qBenchInsert: true, qBenchDropTable: true}

// migrationQueries run on one connection during migration only.
var migrationQueries = map[string]bool{
	qCreateMigrationsTable: true, qMigrateLock: true, qMigrateUnlock: true,
	qMigrateAbort: true, qAppliedMigrations: true, qRecordMigration: true,
	qMigrationsTableExists: true,
}

// runner is what runs one named query: a prepared statement, or the
// query's text on a transaction when it was not prepared beforehand.
type runner interface {
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, args ...any) (rows, error)
	QueryRowContext(ctx context.Context, args ...any) row
}

// stmtRunner runs a prepared statement.
type stmtRunner struct{ st *sql.Stmt }

func (r stmtRunner) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return r.st.ExecContext(ctx, args...)
}

func (r stmtRunner) QueryContext(ctx context.Context, args ...any) (rows, error) {
	rs, err := r.st.QueryContext(ctx, args...)
	return rows{sql: rs}, err
}

func (r stmtRunner) QueryRowContext(ctx context.Context, args ...any) row {
	return row{sql: r.st.QueryRowContext(ctx, args...)}
}

// textRunner runs a query's text on a database/sql querier.
type textRunner struct {
	q    sqlQuerier
	text string
}

func (t textRunner) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return t.q.ExecContext(ctx, t.text, args...)
}

func (t textRunner) QueryContext(ctx context.Context, args ...any) (rows, error) {
	rs, err := t.q.QueryContext(ctx, t.text, args...)
	return rows{sql: rs}, err
}

func (t textRunner) QueryRowContext(ctx context.Context, args ...any) row {
	return row{sql: t.q.QueryRowContext(ctx, t.text, args...)}
}

// nativeRunner runs a query's text on a caller's native transaction.
type nativeRunner struct {
	tx   store.NativeTx
	text string
}

func (n nativeRunner) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return n.tx.ExecContext(ctx, n.text, args...)
}

func (n nativeRunner) QueryContext(ctx context.Context, args ...any) (rows, error) {
	rs, err := n.tx.QueryRows(ctx, n.text, args...)
	return rows{native: rs}, err
}

func (n nativeRunner) QueryRowContext(ctx context.Context, args ...any) row {
	return row{native: n.tx.QueryOne(ctx, n.text, args...)}
}

// stmt returns what runs a named query on a transaction or a pool: in a
// transaction, the statement prepareAll made (re-prepared on the
// transaction's connection by database/sql if need be), else the text.
func (e *Engine) stmt(ctx context.Context, q querier, name string) (runner, error) {
	if e.isClosed() {
		return nil, sluicetype.ErrClosed
	}
	switch v := q.(type) {
	case *sql.Tx:
		e.stmtMu.Lock()
		st, ok := e.stmts[stmtKey{e.w, name}]
		e.stmtMu.Unlock()
		if !ok {
			return textRunner{v, e.q[name]}, nil
		}
		return stmtRunner{v.StmtContext(ctx, st)}, nil
	case *sql.DB:
		if e.unprepared {
			return textRunner{v, e.q[name]}, nil
		}
		st, err := e.prepared(ctx, v, name)
		if err != nil {
			return nil, err
		}
		return stmtRunner{st}, nil
	case nativeTx:
		return nativeRunner{v.tx, e.q[name]}, nil
	case sqlQuerier:
		return textRunner{v, e.q[name]}, nil
	}
	return nil, fmt.Errorf("sluice: engine: cannot run statements on %T: %w", q, sluicetype.ErrInvalidArgument)
}

func (e *Engine) query(ctx context.Context, q querier, name string, args ...any) (rows, error) {
	st, err := e.stmt(ctx, q, name)
	if err != nil {
		return rows{}, err
	}
	rs, err := st.QueryContext(ctx, args...)
	if err != nil {
		return rows{}, fmt.Errorf("%s: %w", name, err)
	}
	return rs, nil
}

// queryRow scans the first row of a named query; sql.ErrNoRows if none.
func (e *Engine) queryRow(ctx context.Context, q querier, name string, args []any, dest ...any) error {
	st, err := e.stmt(ctx, q, name)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

func (e *Engine) exec(ctx context.Context, q querier, name string, args ...any) (int64, error) {
	st, err := e.stmt(ctx, q, name)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// int64s runs a query returning one integer column.
func (e *Engine) int64s(ctx context.Context, q querier, name string, args ...any) ([]int64, error) {
	rows, err := e.query(ctx, q, name, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// pairs runs a query of two columns, a key and a value, into a map.
func pairs[K comparable, V any](ctx context.Context, e *Engine, q querier, name string, args ...any) (map[K]V, error) {
	rows, err := e.query(ctx, q, name, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[K]V)
	for rows.Next() {
		var (
			k K
			v V
		)
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// tenantStore is one tenant's view of an Engine.
type tenantStore struct {
	e *Engine
	t store.Tenant
}

var _ store.Store = (*tenantStore)(nil)

// maxMS is the most milliseconds a time.Duration holds: store.Forever,
// stored.
const maxMS = int64(store.Forever / time.Millisecond)

// ms converts a duration to whole milliseconds, rounding up so that a
// positive duration never becomes zero, and saturating: store.Forever
// (and anything within a millisecond of it) is maxMS, a negative
// duration 0. So a stored time now + ms(d) is never negative or wrapped:
// at most about 292 years from now.
func ms(d time.Duration) int64 {
	switch {
	case d <= 0:
		return 0
	case d > store.Forever-time.Millisecond:
		return maxMS
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// msDuration converts stored milliseconds back to a duration: maxMS (or
// more) is store.Forever again.
func msDuration(v int64) time.Duration {
	if v >= maxMS {
		return store.Forever
	}
	return time.Duration(v) * time.Millisecond
}

// maxTimeMS is the latest time stored: the end of the year 9999, the last
// a protobuf Timestamp holds.
const maxTimeMS = 253402300799999

// timeMS converts a time to milliseconds since the epoch, saturating at
// maxTimeMS (time.Time.UnixMilli is undefined far from the epoch).
func timeMS(t time.Time) int64 {
	if t.After(time.UnixMilli(maxTimeMS)) {
		return maxTimeMS
	}
	return t.UnixMilli()
}

// fromMS converts milliseconds since the epoch to a time; 0 to zero time.
func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// nullMS is fromMS for a nullable column.
func nullMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMS(v.Int64)
}

// newToken returns a random lock token.
func newToken() int64 {
	return rand.Int64N(1<<62) + 1
}
