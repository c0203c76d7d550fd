// Package mysql is sluice's MariaDB and MySQL backend (MariaDB 10.6+,
// MySQL 8+), on github.com/go-sql-driver/mysql.
//
// It runs the shared storage engine on InnoDB at READ COMMITTED: queue
// workers take rows with FOR UPDATE SKIP LOCKED, so they never wait for
// each other, and bulk inserts and lists travel as one JSON parameter read
// with JSON_TABLE, so every statement is one static, parameterized query.
//
// The connection settings sluice relies on are forced whatever the DSN
// says: the session time zone is UTC, the character set is utf8mb4, times
// are not parsed, and affected-row counts report changed rows
// (clientFoundRows off), which the eviction compare-and-set needs.
// Parameters are interpolated by the driver (escaped, one round trip) for
// statements run from text; the engine's prepared statements use the
// server's binary protocol.
//
// MySQL has no LISTEN/NOTIFY: an enqueue wakes leasers in the same process
// at once, and leasers in other processes on their next poll
// (Features.CrossProcessWake is false).
//
// Schema changes run under the named lock GET_LOCK('sluice_migrate'), one
// statement at a time: MySQL DDL is not transactional.
package mysql

import (
	"cmp"
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the schema's migrations in this dialect, one SQL
// file a version (0001_init.sql, ...), for an operator or a DBA to read.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the directory is embedded
	}
	return sub
}

//go:embed queries/*.sql
var queries embed.FS

// Config opens a MariaDB or MySQL backend.
type Config struct {
	// DSN names the database, as a URL
	// (mysql://user:pass@host:port/db?param=value) or in the driver's own
	// format (user:pass@tcp(host:port)/db?param=value). Parameters are
	// the driver's; those sluice depends on are overridden (see the package
	// documentation).
	DSN string
	// Limits bound calls; zero fields take defaults.
	Limits store.Limits
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// MaxConns caps the pool's connections (default 16).
	MaxConns int
	// CommitPipelines is how many group commits run at once, each on a
	// connection of the pool (default 2; see
	// store.OpenOptions.CommitPipelines).
	CommitPipelines int
	// SkipMigrations opens without migrating: the schema must be at this
	// build's version (see store.OpenOptions.SkipMigrations).
	SkipMigrations bool
}

// options returns the settings a Config shares with every backend.
func (cfg Config) options() store.OpenOptions {
	return store.OpenOptions{Limits: cfg.Limits, Logger: cfg.Logger, MaxConns: cfg.MaxConns, CommitPipelines: cfg.CommitPipelines, SkipMigrations: cfg.SkipMigrations}
}

// Pool settings.
const (
	defaultMaxConns = 16
	connMaxLifetime = 30 * time.Minute
	connMaxIdleTime = 5 * time.Minute
	// minAllowedPacket is the smallest client packet limit sluice accepts:
	// the engine keeps bulk statements near 2 MiB and a batch at 16 MiB,
	// so 64 MiB (the driver's default) leaves room to spare.
	minAllowedPacket = 64 << 20
)

// Open connects to the database and applies migrations.
func Open(ctx context.Context, cfg Config) (store.Backend, error) {
	db, err := openPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b, err := start(ctx, db, cfg.options(), false)
	if err != nil {
		db.Close()
		return nil, err
	}
	return b, nil
}

// openPool validates cfg and opens a pool with the settings sluice
// relies on.
func openPool(ctx context.Context, cfg Config) (*sql.DB, error) {
	if err := cfg.options().Validate(); err != nil {
		return nil, fmt.Errorf("sluice: mysql: %w", err)
	}
	dc, err := connConfig(ctx, cfg.DSN)
	if err != nil {
		return nil, err
	}
	conn, err := driver.NewConnector(dc)
	if err != nil {
		return nil, fmt.Errorf("sluice: mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	n := cmp.Or(cfg.MaxConns, defaultMaxConns)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(connMaxLifetime)
	db.SetConnMaxIdleTime(connMaxIdleTime)
	return db, nil
}

// start runs the engine on db; keepPools leaves db open on Close.
func start(ctx context.Context, db *sql.DB, o store.OpenOptions, keepPools bool) (store.Backend, error) {
	if err := checkPacketLimit(ctx, db, o.Limits.WithDefaults()); err != nil {
		return nil, err
	}
	return engine.New(ctx, engine.Config{
		Dialect:        dialect(),
		Write:          db,
		Limits:         o.Limits,
		Logger:         o.Logger,
		Pipelines:      o.CommitPipelines,
		SkipMigrations: o.SkipMigrations,
		KeepPools:      keepPools,
	})
}

// dialect returns what the engine needs to know of MySQL.
func dialect() *engine.Dialect {
	qfs, _ := fs.Sub(queries, "queries")
	mfs, _ := fs.Sub(migrations, "migrations")
	return &engine.Dialect{
		Features:     store.Features{Name: "mysql", Driver: "github.com/go-sql-driver/mysql", SharedStreams: true, PositionedReads: true},
		Queries:      qfs,
		Migrations:   mfs,
		Capabilities: engine.Capabilities{LockResult: true, LastInsertID: true},
		IntList:      engine.JSONList,
		Classify:     classify,
	}
}

// statementOverhead bounds what a bulk statement adds to its rows' data:
// the statement text, other parameters and JSON framing.
const statementOverhead = 64 << 10

// checkPacketLimit fails when the server's max_allowed_packet is too small
// for the largest message the limits admit: a message travels hex-encoded
// in a JSON parameter, twice its size, and a statement larger than the
// server's limit is refused whole.
func checkPacketLimit(ctx context.Context, db *sql.DB, l store.Limits) error {
	var max int64
	if err := db.QueryRowContext(ctx, "SELECT @@max_allowed_packet").Scan(&max); err != nil {
		return fmt.Errorf("sluice: mysql: read max_allowed_packet: %w", err)
	}
	if need := 2*int64(l.MaxMessageBytes) + statementOverhead; max < need {
		return fmt.Errorf("sluice: mysql: the server's max_allowed_packet is %d bytes, and messages of up to %d bytes "+
			"(Limits.MaxMessageBytes) need %d: raise max_allowed_packet or lower the limit", max, l.MaxMessageBytes, need)
	}
	return nil
}

// connConfig returns the driver configuration of the pool: the DSN's,
// with the settings sluice relies on forced.
func connConfig(ctx context.Context, dsn string) (*driver.Config, error) {
	dc, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if err := forceSettings(dc); err != nil {
		return nil, fmt.Errorf("sluice: mysql: %w", err)
	}
	// READ COMMITTED is set through the session variable, whose name
	// depends on the server: MySQL 8 and MariaDB 11.1+ know
	// transaction_isolation, MariaDB before 11.1 only tx_isolation.
	isolationVar, idleTimeout, err := serverVariables(ctx, dc)
	if err != nil {
		return nil, fmt.Errorf("sluice: mysql: connect to %s: %w", dc.Addr, err)
	}
	dc.Params[isolationVar] = "'READ-COMMITTED'"
	// A process paused in the middle of one of sluice's transactions
	// (SIGSTOP, a frozen VM) would hold its row locks, and stall every
	// other node's leases and writes, until it ran again: MariaDB ends
	// such a transaction after this long (MySQL has no such setting). A
	// DSN that sets it keeps its value.
	if _, set := dc.Params["idle_transaction_timeout"]; idleTimeout && !set {
		dc.Params["idle_transaction_timeout"] = strconv.Itoa(int(store.IdleTransactionTimeout.Seconds()))
	}
	return dc, nil
}

// parseDSN parses a DSN in URL form (mysql://user:pass@host:port/db?params)
// or in the driver's own form (user:pass@tcp(host:port)/db?params) into
// the driver's configuration, before sluice forces its settings.
func parseDSN(dsn string) (*driver.Config, error) {
	if dsn == "" {
		return nil, fmt.Errorf("sluice: mysql: Config.DSN is empty (try mysql://user:password@127.0.0.1:3306/sluice): %w", sluicetype.ErrInvalidArgument)
	}
	rest, isURL := strings.CutPrefix(dsn, "mysql://")
	if !isURL {
		dc, err := driver.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("sluice: mysql: DSN: %w (try mysql://user:password@host:3306/db): %w", err, sluicetype.ErrInvalidArgument)
		}
		return dc, nil
	}
	u, err := url.Parse("mysql://" + rest)
	if err != nil {
		// url.Parse quotes the DSN, password included; say less.
		return nil, fmt.Errorf("sluice: mysql: DSN is not a valid URL (try mysql://user:password@host:3306/db, with special characters in the password %%-escaped): %w", sluicetype.ErrInvalidArgument)
	}
	// The driver parses the query parameters, so that both forms accept
	// the same ones.
	dc, err := driver.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("sluice: mysql: DSN parameters: %w: %w", err, sluicetype.ErrInvalidArgument)
	}
	dc.Net = "tcp"
	dc.Addr = u.Host
	if u.Port() == "" && u.Hostname() != "" {
		dc.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	if u.User != nil {
		dc.User = u.User.Username()
		dc.Passwd, _ = u.User.Password()
	}
	dc.DBName = strings.TrimPrefix(u.Path, "/")
	if dc.DBName == "" || strings.Contains(dc.DBName, "/") {
		return nil, fmt.Errorf("sluice: mysql: DSN names no database %q (try mysql://user:password@host:3306/sluice): %w", dc.DBName, sluicetype.ErrInvalidArgument)
	}
	return dc, nil
}

// forceSettings overrides the connection settings the SQL depends on.
func forceSettings(dc *driver.Config) error {
	if dc.DBName == "" {
		return errors.New("DSN names no database (try mysql://user:password@host:3306/sluice)")
	}
	// Text statements carry their parameters in the SQL, escaped by the
	// driver: one round trip instead of prepare, execute and close.
	dc.InterpolateParams = true
	// Times are BIGINT milliseconds; nothing to parse.
	dc.ParseTime = false
	// Affected rows count changed rows: ClaimEviction's compare-and-set
	// relies on it.
	dc.ClientFoundRows = false
	// The queries are one statement each.
	dc.MultiStatements = false
	if dc.MaxAllowedPacket > 0 && dc.MaxAllowedPacket < minAllowedPacket {
		dc.MaxAllowedPacket = minAllowedPacket
	}
	collation := dc.Collation
	if !strings.HasPrefix(collation, "utf8mb4_") {
		collation = "utf8mb4_general_ci"
	}
	if err := dc.Apply(driver.Charset("utf8mb4", collation)); err != nil {
		return err
	}
	if dc.Params == nil {
		dc.Params = make(map[string]string)
	}
	// The database clock is read as UNIX_TIMESTAMP(NOW(3)), which is exact
	// only where local time has no daylight-saving jumps.
	dc.Params["time_zone"] = "'+00:00'"
	delete(dc.Params, "transaction_isolation")
	delete(dc.Params, "tx_isolation")
	return nil
}

// serverVariables returns the name of the session variable that sets
// the transaction isolation level on the server dc names, and whether it
// knows idle_transaction_timeout (MariaDB 10.3 and later).
func serverVariables(ctx context.Context, dc *driver.Config) (isolation string, idleTimeout bool, err error) {
	conn, err := driver.NewConnector(dc)
	if err != nil {
		return "", false, err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	var names []string
	rows, err := db.QueryContext(ctx, "SHOW SESSION VARIABLES WHERE Variable_name IN "+
		"('transaction_isolation', 'tx_isolation', 'idle_transaction_timeout')")
	if err != nil {
		return "", false, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return "", false, err
		}
		names = append(names, strings.ToLower(name))
	}
	if err := rows.Err(); err != nil {
		return "", false, err
	}
	isolation = "tx_isolation"
	if slices.Contains(names, "transaction_isolation") {
		isolation = "transaction_isolation"
	}
	return isolation, slices.Contains(names, "idle_transaction_timeout"), nil
}

// Server error numbers.
const (
	errDuplicateEntry  = 1062
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
)

// classify reports deadlocks and lock wait timeouts as retryable,
// unique-key violations as duplicates, and a connection lost once a
// request may have gone out as engine.ErrNoReply.
func classify(err error) error {
	var me *driver.MySQLError
	if !errors.As(err, &me) {
		if noReply(err) {
			return engine.ErrNoReply
		}
		return nil
	}
	switch me.Number {
	case errDeadlock, errLockWaitTimeout:
		return engine.ErrRetry
	case errDuplicateEntry:
		return engine.ErrDuplicate
	}
	return nil
}

// noReply reports whether err is a connection that broke once a request
// may have gone out. The driver reports a failure before anything was
// written as driver.ErrBadConn (database/sql retries those on another
// connection), one while reading a reply as ErrInvalidConn, and one in
// the middle of a write as the network's error; a dial that failed sent
// nothing, and a context that ended is reported as the context's error.
// (A handshake cut short also reads as ErrInvalidConn: a statement that
// needed a new connection is then reported as perhaps applied. Only
// statements outside a transaction can be, and on MySQL those are the
// idempotent ones: heartbeats, retention settings; a COMMIT runs on the
// transaction's open connection.)
func noReply(err error) bool {
	var op *net.OpError
	switch {
	case errors.Is(err, sqldriver.ErrBadConn), errors.As(err, &op) && op.Op == "dial",
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, driver.ErrInvalidConn), errors.Is(err, driver.ErrPktSync),
		errors.Is(err, driver.ErrPktSyncMul), errors.Is(err, driver.ErrMalformPkt),
		errors.Is(err, io.ErrShortWrite), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
