package sluice_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/testdb"
)

// adoptMain is a program as a new user writes it in a module of their
// own: their *sql.DB (driver os.Args[1], DSN os.Args[2], the driver's
// placeholder os.Args[3]) on the backend whose package replaces BACKEND,
// migrations applied as a step of their own, a client that does not
// migrate, and a message completed in the transaction that writes its
// effect.
const adoptMain = `package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"

	"github.com/sluicehq/sluice"
	_ "github.com/sluicehq/sluice/store/BACKEND" // links this backend, and only it
)

func main() {
	ctx := context.Background()
	db, err := sql.Open(os.Args[1], os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE shipments (order_id VARCHAR(100) PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}

	m, err := sluice.NewMigratorDB(ctx, db, nil)
	if err != nil {
		log.Fatal(err)
	}
	applied, err := m.Up(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c, err := sluice.OpenDB(ctx, db, &sluice.Options{SkipMigrations: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
		log.Fatal(err)
	}
	s, _ := c.NewSender("orders")
	if _, err := s.Send(ctx, &sluice.Message{Body: []byte("order-42")}); err != nil {
		log.Fatal(err)
	}
	r, _ := c.NewReceiver("orders", nil)
	msgs, err := r.Receive(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO shipments (order_id) VALUES ("+os.Args[3]+")", string(msgs[0].Body)); err != nil {
		log.Fatal(err)
	}
	if err := r.CompleteTx(ctx, tx, msgs[0]); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	var shipped int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM shipments").Scan(&shipped); err != nil {
		log.Fatal(err)
	}
	st, err := c.GetQueueStats(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("migrations=%v shipments=%d left=%d\n", len(applied) > 0, shipped, st.Active+st.InFlight)
}
`

// adoptPgxMain is adoptMain for a user on pgx: their *pgxpool.Pool on
// PostgreSQL (the DSN in os.Args[1]), migrations applied as a step of
// their own, a client on the pool that does not migrate, and a message
// completed in the pgx.Tx that writes its effect.
const adoptPgxMain = `package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/postgres"
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE shipments (order_id TEXT PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}

	m, err := sluice.NewMigratorDB(ctx, stdlib.OpenDBFromPool(pool), nil)
	if err != nil {
		log.Fatal(err)
	}
	applied, err := m.Up(ctx)
	if err != nil {
		log.Fatal(err)
	}
	b, err := postgres.OpenPool(ctx, pool, &postgres.DBConfig{SkipMigrations: true})
	if err != nil {
		log.Fatal(err)
	}
	c, err := sluice.NewClient(b, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
		log.Fatal(err)
	}
	s, _ := c.NewSender("orders")
	if _, err := s.Send(ctx, &sluice.Message{Body: []byte("order-42")}); err != nil {
		log.Fatal(err)
	}
	r, _ := c.NewReceiver("orders", nil)
	msgs, err := r.Receive(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO shipments (order_id) VALUES ($1)", string(msgs[0].Body)); err != nil {
		log.Fatal(err)
	}
	if err := r.CompleteTx(ctx, postgres.WrapTx(tx), msgs[0]); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	var shipped int
	if err := pool.QueryRow(ctx, "SELECT COUNT(*) FROM shipments").Scan(&shipped); err != nil {
		log.Fatal(err)
	}
	st, err := c.GetQueueStats(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	c.Close()
	fmt.Printf("migrations=%v shipments=%d left=%d\n", len(applied) > 0, shipped, st.Active+st.InFlight)
}
`

// TestAdoptInFreshModule builds and runs adoptMain in a new module that
// requires sluice (replaced by this checkout), with the module cache
// first (see freshModule), on each backend's *sql.DB, and checks that the
// program links that backend's driver and no other.
func TestAdoptInFreshModule(t *testing.T) {
	drivers := map[string]string{"sqlite": "modernc.org/sqlite", "postgres": "github.com/jackc/pgx/v5", "mysql": "github.com/go-sql-driver/mysql"}
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			driver, dsn, placeholder := adoptDB(t, kind)
			deps, run := freshModule(t, strings.ReplaceAll(adoptMain, "BACKEND", kind))
			for k, pkg := range drivers {
				if linked := strings.Contains(deps, pkg+"\n"); linked != (k == kind) {
					t.Errorf("the program on %s links %s: %v", kind, pkg, linked)
				}
			}
			if got, want := run(driver, dsn, placeholder), "migrations=true shipments=1 left=0\n"; got != want {
				t.Errorf("the program printed %q, want %q", got, want)
			}
		})
	}
}

// adoptDB returns the database/sql driver name, the driver's DSN of a
// fresh database of kind (dropped when the test ends) with the settings
// sluice requires of an application's pool, and the driver's placeholder.
func adoptDB(t *testing.T, kind string) (driver, dsn, placeholder string) {
	t.Helper()
	switch kind {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "app.db")
		return "sqlite", "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate", "?"
	case "postgres":
		return "pgx", freshPostgresSchema(t), "$1"
	}
	mdsn, drop, err := testdb.MySQL(t.Context())
	testdb.Check(t, err)
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop the database: %v", err)
		}
	})
	return "mysql", mysqlDriverDSN(t, mdsn, true), "?"
}

// freshPostgresSchema returns the DSN of a new, empty PostgreSQL schema,
// dropped when the test ends.
func freshPostgresSchema(t *testing.T) string {
	t.Helper()
	dsn, drop, err := testdb.Postgres(t.Context())
	testdb.Check(t, err)
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop the schema: %v", err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{u.Query().Get("search_path")}.Sanitize())
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// TestAdoptPgxInFreshModule builds and runs adoptPgxMain as
// TestAdoptInFreshModule does adoptMain, on a fresh PostgreSQL schema:
// the program links pgx and neither SQLite nor MariaDB's driver.
func TestAdoptPgxInFreshModule(t *testing.T) {
	dsn := freshPostgresSchema(t)
	deps, run := freshModule(t, adoptPgxMain)
	if !strings.Contains(deps, "github.com/jackc/pgx/v5\n") {
		t.Errorf("the program does not link github.com/jackc/pgx/v5")
	}
	for _, other := range []string{"modernc.org/sqlite", "github.com/go-sql-driver/mysql"} {
		if strings.Contains(deps, other) {
			t.Errorf("the program links %s, a backend it did not import", other)
		}
	}
	if got, want := run(dsn), "migrations=true shipments=1 left=0\n"; got != want {
		t.Errorf("the program printed %q, want %q", got, want)
	}
}

// freshModule writes main in a new module that requires sluice (replaced
// by this checkout), resolves it with the module cache (the proxy only for
// what the cache lacks) and returns the packages it links and a function that runs it with
// arguments, returning its output.
func freshModule(t *testing.T, main string) (deps string, run func(args ...string) string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a program")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goMod := "module example.com/shop\n\ngo 1.26.0\n\nrequire github.com/sluicehq/sluice v0.0.0\n\nreplace github.com/sluicehq/sluice => " + root + "\n"
	// The checkout's go.sum vouches for every module the new one can
	// need, so that no checksum database is consulted.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"go.mod": goMod, "go.sum": string(sum), "main.go": main} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	// The module cache alone first; a cache that building this checkout
	// filled may lack the go.mod of a module in the new module's graph (a
	// dependency's own requirement), which the environment's proxy then
	// serves, checked against the go.sum above.
	proxy := "off"
	goCmd := func(args ...string) string {
		t.Helper()
		for {
			cmd := exec.Command(gobin, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
			if proxy == "off" {
				cmd.Env = append(cmd.Env, "GOPROXY=off")
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			if err != nil && proxy == "off" && strings.Contains(errb.String(), "module lookup disabled by GOPROXY=off") {
				proxy = "environment"
				continue
			}
			if err != nil {
				t.Fatalf("go %s (GOPROXY %s): %v\n%s%s", strings.Join(args, " "), proxy, err, out.String(), errb.String())
			}
			return out.String()
		}
	}
	// No tidy: it would want the test dependencies of every dependency,
	// which a module cache filled by building need not hold.
	return goCmd("list", "-deps", "."), func(args ...string) string {
		t.Helper()
		return goCmd(append([]string{"run", "."}, args...)...)
	}
}
