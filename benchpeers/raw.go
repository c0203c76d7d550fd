package main

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The raw limit: a table of the shape of a queue's rows (an identity key
// and a 1-KiB payload) that takes plain inserts, on the same server and
// settings, with no queue code in the path. One message a call is one
// single-row INSERT; a batch is PostgreSQL's COPY, or on SQLite one
// multi-row INSERT, in its own transaction.

// rawPG is the raw table on PostgreSQL, in a fresh schema.
type rawPG struct {
	pool *pgxpool.Pool
	drop func(context.Context) error
}

func openRawPG(ctx context.Context, e *env) (queuePeer, error) {
	_, dsn, drop, err := pgSchema(ctx, e.pg)
	if err != nil {
		return nil, err
	}
	r := &rawPG{drop: drop}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err == nil {
		cfg.MaxConns = 16 // sluice's default pool size
		r.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	}
	if err == nil {
		_, err = r.pool.Exec(ctx, "CREATE TABLE raw (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload BYTEA NOT NULL)")
	}
	if err != nil {
		return nil, errors.Join(err, r.close(ctx))
	}
	return r, nil
}

func (r *rawPG) send(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		_, err := r.pool.Exec(ctx, "INSERT INTO raw (payload) VALUES ($1)", bodies[0])
		return err
	}
	rows := make([][]any, len(bodies))
	for i, b := range bodies {
		rows[i] = []any{b}
	}
	_, err := r.pool.CopyFrom(ctx, pgx.Identifier{"raw"}, []string{"payload"}, pgx.CopyFromRows(rows))
	return err
}

func (r *rawPG) consume(context.Context, int, func([]byte)) error { return errSkip }

func (r *rawPG) close(ctx context.Context) error {
	if r.pool != nil {
		r.pool.Close()
	}
	return r.drop(ctx)
}

// rawSQLite is the raw table in a fresh SQLite file with sluice's
// pragmas, one connection.
type rawSQLite struct {
	db *sql.DB
}

func openRawSQLite(ctx context.Context, e *env) (queuePeer, error) {
	db, err := openSQLite(filepath.Join(e.dir, "raw.db"), e.sqliteSync)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE raw (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)"); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &rawSQLite{db: db}, nil
}

func (r *rawSQLite) send(ctx context.Context, bodies [][]byte) error {
	args := make([]any, len(bodies))
	for i, b := range bodies {
		args[i] = b
	}
	q := "INSERT INTO raw (payload) VALUES (?)" + strings.Repeat(", (?)", len(bodies)-1)
	_, err := r.db.ExecContext(ctx, q, args...)
	return err
}

func (r *rawSQLite) consume(context.Context, int, func([]byte)) error { return errSkip }

func (r *rawSQLite) close(context.Context) error { return r.db.Close() }
