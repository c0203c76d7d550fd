package sluice_test

import (
	"database/sql"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the application's pools of the OpenDB tests

	"github.com/sluicehq/sluice/internal/testdb"
)

// freshDSN returns the DSN of a database of the kind that no test has
// used, dropped when the test ends.
func freshDSN(t *testing.T, kind string) string {
	t.Helper()
	var (
		dsn  string
		drop func() error
		err  error
	)
	switch kind {
	case "sqlite":
		return "sqlite://" + filepath.Join(t.TempDir(), "fresh.db")
	case "postgres":
		dsn, drop, err = testdb.Postgres(t.Context())
	case "mysql":
		dsn, drop, err = testdb.MySQL(t.Context())
	}
	testdb.Check(t, err)
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop the test database: %v", err)
		}
	})
	if kind == "postgres" {
		// sluice creates the schema on open; an application's pool
		// (appDB) needs it to exist.
		db := appDB(t, kind, dsn, true)
		schema := parseURL(t, dsn).Query().Get("search_path")
		if _, err := db.ExecContext(t.Context(), `CREATE SCHEMA "`+schema+`"`); err != nil {
			t.Fatal(err)
		}
	}
	return dsn
}

// appDB opens an application's own pool on a fresh database's DSN, as
// an application would, closed when the test ends. ready says whether
// to set what sluice needs of the connections (SQLite's WAL mode and
// busy timeout; MySQL's time zone, isolation and character set).
func appDB(t *testing.T, kind, dsn string, ready bool) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	switch kind {
	case "sqlite":
		path := strings.TrimPrefix(dsn, "sqlite://")
		if ready {
			path += "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
		}
		db, err = sql.Open("sqlite", "file:"+path)
	case "postgres":
		db, err = sql.Open("pgx", dsn)
	case "mysql":
		db, err = sql.Open("mysql", mysqlDriverDSN(t, dsn, ready))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// mysqlDriverDSN turns a mysql:// URL into the driver's own DSN.
func mysqlDriverDSN(t *testing.T, dsn string, ready bool) string {
	t.Helper()
	u := parseURL(t, dsn)
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
	if !ready {
		return cfg.FormatDSN()
	}
	cfg.Collation = "utf8mb4_general_ci"
	probe, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	// MariaDB before 11.1 knows only tx_isolation.
	isolation := "transaction_isolation"
	var v string
	if probe.QueryRowContext(t.Context(), "SELECT @@session.transaction_isolation").Scan(&v) != nil {
		isolation = "tx_isolation"
	}
	cfg.Params = map[string]string{"time_zone": "'+00:00'", isolation: "'READ-COMMITTED'"}
	return cfg.FormatDSN()
}

func parseURL(t *testing.T, dsn string) *url.URL {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
