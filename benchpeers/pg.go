package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// pgSchema creates a fresh schema on the server dsn names for one run:
// the schema's name, dsn with search_path set to it, and a func that
// drops it.
func pgSchema(ctx context.Context, dsn string) (name, schemaDSN string, drop func(context.Context) error, err error) {
	b := make([]byte, 6)
	rand.Read(b)
	name = "benchpeers_" + hex.EncodeToString(b)
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", "", nil, fmt.Errorf("--pg %q: want a postgres:// URL", dsn)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", "", nil, err
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	drop = func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
		return err
	}
	return name, u.String(), drop, nil
}

// inSchema opens a system with open on a fresh schema of the server dsn
// names, and returns it with what drops the schema (dropped already if
// open failed).
func inSchema[T any](ctx context.Context, dsn string, open func(context.Context, string) (T, error)) (T, func(context.Context) error, error) {
	var zero T
	_, schemaDSN, drop, err := pgSchema(ctx, dsn)
	if err != nil {
		return zero, nil, err
	}
	v, err := open(ctx, schemaDSN)
	if err != nil {
		return zero, nil, errors.Join(err, drop(ctx))
	}
	return v, drop, nil
}
