package testdb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env names of the PgBouncers in front of the PostgreSQL test server, in
// transaction and in session pooling mode (.ci/run starts both). Each
// must route any database name to the database of that name on
// SLUICE_TEST_POSTGRES's server (`* = host=... port=...` under
// [databases]), accept the DSN's user, and, before PgBouncer 1.20, drop
// the startup parameters sluice sets (ignore_startup_parameters =
// search_path, idle_in_transaction_session_timeout).
const (
	PgBouncerEnv        = "SLUICE_TEST_PGBOUNCER"
	PgBouncerSessionEnv = "SLUICE_TEST_PGBOUNCER_SESSION"
)

// BouncerDB is a database of a test's own on the PostgreSQL test server,
// reached through a PgBouncer and directly.
type BouncerDB struct {
	// Bouncer is the DSN through PgBouncer.
	Bouncer string
	// Direct is the DSN straight to PostgreSQL: for what transaction
	// pooling cannot carry (migrations) and for looking at the server.
	Direct string
	// Name is the database's name.
	Name string
}

// PgBouncer creates a database of its own on the PostgreSQL server behind
// the PgBouncer that the variable env names, and returns it and a
// function that drops it. A database rather than a schema: PgBouncer
// before 1.20 cannot pass the search_path that names a schema, so behind
// it sluice finds its tables in the server's default search_path
// (public).
func PgBouncer(ctx context.Context, env string) (db BouncerDB, drop func() error, err error) {
	bouncer := os.Getenv(env)
	if bouncer == "" {
		return db, nil, fmt.Errorf("%s is not set (e.g. postgres://postgres@127.0.0.1:6432/test?sslmode=disable; .ci/run starts one): %w", env, ErrUnset)
	}
	direct := os.Getenv(PostgresEnv)
	if direct == "" {
		return db, nil, fmt.Errorf("%s is not set (%s needs it to create databases and look at the server): %w", PostgresEnv, env, ErrUnset)
	}
	db.Name = newName()
	if db.Bouncer, err = withDatabase(bouncer, db.Name); err != nil {
		return db, nil, fmt.Errorf("%s: %w", env, err)
	}
	if db.Direct, err = withDatabase(direct, db.Name); err != nil {
		return db, nil, fmt.Errorf("%s: %w", PostgresEnv, err)
	}
	ident := pgx.Identifier{db.Name}.Sanitize()
	if err := execDirect(ctx, direct, "CREATE DATABASE "+ident); err != nil {
		return db, nil, fmt.Errorf("create test database: %w", err)
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE ends PgBouncer's server connections to it.
		return execDirect(ctx, direct, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
	}
	return db, drop, nil
}

// withDatabase returns the URL dsn naming database name.
func withDatabase(dsn, name string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// execDirect runs one statement on a connection of its own to dsn.
func execDirect(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// HeldServer is a transaction through PgBouncer that holds one of its
// server connections, with the named prepared statements found on it.
type HeldServer struct {
	// Prepared lists the statements ("name: text") the server connection
	// holds.
	Prepared []string
	tx       pgx.Tx
}

// Release ends the transaction and its client connection, which returns
// the server connection to PgBouncer's pool.
func (h *HeldServer) Release() {
	if h.tx == nil {
		return
	}
	_ = h.tx.Rollback(context.Background())
	_ = h.tx.Conn().Close(context.Background())
	h.tx = nil
}

// HoldServers looks at every server connection PgBouncer has to db's
// database: pg_prepared_statements shows a session its own statements
// only, so it opens as many transactions through PgBouncer at once as
// the server has connections to the database, each running on one of
// them, and asks each. Call it when nothing else uses the database; the
// caller releases what it returns (ReleaseAll).
func HoldServers(ctx context.Context, db BouncerDB) ([]*HeldServer, error) {
	var n int
	if err := queryDirect(ctx, db.Direct, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", db.Name).Scan(&n)
	}); err != nil {
		return nil, err
	}
	var held []*HeldServer
	for range n {
		h, err := holdServer(ctx, db.Bouncer)
		if err != nil {
			ReleaseAll(held)
			return nil, err
		}
		held = append(held, h)
	}
	return held, nil
}

// holdServer begins a transaction through PgBouncer at dsn and lists the
// prepared statements of the server connection it runs on.
func holdServer(ctx context.Context, dsn string) (*HeldServer, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	// Prepare nothing of its own.
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	h := &HeldServer{tx: tx}
	rows, _ := tx.Query(ctx, "SELECT name || ': ' || statement FROM pg_prepared_statements")
	if h.Prepared, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		h.Release()
		return nil, err
	}
	return h, nil
}

// ReleaseAll releases every one of held.
func ReleaseAll(held []*HeldServer) {
	for _, h := range held {
		h.Release()
	}
}

// PreparedStatements returns the named prepared statements that
// PgBouncer's server connections to db's database hold (see
// HoldServers).
func PreparedStatements(ctx context.Context, db BouncerDB) ([]string, error) {
	held, err := HoldServers(ctx, db)
	if err != nil {
		return nil, err
	}
	defer ReleaseAll(held)
	var all []string
	for _, h := range held {
		all = append(all, h.Prepared...)
	}
	return all, nil
}

// queryDirect runs f on a connection of its own to dsn.
func queryDirect(ctx context.Context, dsn string, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return f(conn)
}

// SessionWatch samples, until stopped, what the server connections to one
// database run, and keeps the statements that need a session of their
// own, which transaction pooling does not give: LISTEN, PREPARE and
// session advisory locks. (A protocol-level named statement does not
// show there: see PreparedStatements.)
type SessionWatch struct {
	stop context.CancelFunc
	done chan watchResult
}

type watchResult struct {
	found []string
	err   error
}

// WatchSessions starts a SessionWatch on db's database.
func WatchSessions(ctx context.Context, db BouncerDB) (*SessionWatch, error) {
	conn, err := pgx.Connect(ctx, db.Direct)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	w := &SessionWatch{stop: stop, done: make(chan watchResult, 1)}
	go func() {
		defer conn.Close(context.Background())
		w.done <- watch(ctx, conn, db.Name)
	}()
	return w, nil
}

// watch samples the session statements on db every 10ms until ctx ends.
func watch(ctx context.Context, conn *pgx.Conn, db string) watchResult {
	seen := map[string]bool{}
	var r watchResult
	for {
		rows, _ := conn.Query(ctx, "SELECT query FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() "+
			"AND (query ILIKE 'LISTEN%' OR query ILIKE 'PREPARE%' OR query ILIKE '%pg_advisory_lock%' OR query ILIKE '%pg_try_advisory_lock%')", db)
		qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if ctx.Err() != nil {
			return r
		}
		if err != nil {
			r.err = errors.Join(r.err, err)
			return r
		}
		for _, q := range qs {
			if !seen[q] {
				seen[q] = true
				r.found = append(r.found, q)
			}
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Stop ends the watch and returns the statements it saw.
func (w *SessionWatch) Stop() ([]string, error) {
	w.stop()
	r := <-w.done
	return r.found, r.err
}
