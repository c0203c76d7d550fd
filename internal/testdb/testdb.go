// Package testdb gives tests databases of their own on the servers that
// SLUICE_TEST_POSTGRES and SLUICE_TEST_MYSQL name: a fresh PostgreSQL
// schema or a fresh MariaDB/MySQL database, dropped afterwards, so tests
// run in parallel against one server without seeing each other.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// ErrUnset reports that the variable naming a test server is not set.
var ErrUnset = errors.New("test database not configured")

// Env names of the test servers' DSNs.
const (
	PostgresEnv = "SLUICE_TEST_POSTGRES"
	MySQLEnv    = "SLUICE_TEST_MYSQL"
)

func newName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "sluice_test_" + hex.EncodeToString(b)
}

// Postgres creates a schema of its own on the PostgreSQL server and
// returns a DSN whose search_path selects it, and a function that drops
// it with everything in it.
func Postgres(ctx context.Context) (dsn string, drop func() error, err error) {
	base := os.Getenv(PostgresEnv)
	if base == "" {
		return "", nil, fmt.Errorf("%s is not set (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable): %w", PostgresEnv, ErrUnset)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", PostgresEnv, err)
	}
	name := newName()
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	drop = func() error {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		return err
	}
	return u.String(), drop, nil
}

// MySQL creates a database of its own on the MariaDB/MySQL server and
// returns its DSN (mysql://user:pass@host:port/db), and a function that
// drops it.
func MySQL(ctx context.Context) (dsn string, drop func() error, err error) {
	base := os.Getenv(MySQLEnv)
	if base == "" {
		return "", nil, fmt.Errorf("%s is not set (e.g. mysql://root@127.0.0.1:3306/test): %w", MySQLEnv, ErrUnset)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", MySQLEnv, err)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr = "tcp", u.Host
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	name := newName()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create test database: %w", err)
	}
	drop = func() error {
		defer admin.Close()
		_, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
		return err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// Check skips the test when err says a test server is not configured,
// except in CI (CI set), where a missing server fails it; any other error
// fails it.
func Check(t testing.TB, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errors.Is(err, ErrUnset) && os.Getenv("CI") == "":
		t.Skip(err)
	default:
		t.Fatal(err)
	}
}
