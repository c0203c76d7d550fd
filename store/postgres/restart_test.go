package postgres_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestDatabaseRestart crashes a private PostgreSQL server under eight
// producers (pg_ctl stop -m immediate: no shutdown checkpoint, the WAL is
// replayed at start) and starts it again; see storetest.SurviveRestart.
func TestDatabaseRestart(t *testing.T) {
	testDSN(t) // the same gate as every PostgreSQL test
	srv := startPrivateServer(t)
	b, err := postgres.Open(t.Context(), postgres.Config{DSN: srv.dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := b.Store(store.Tenant{Service: "svc", Provider: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SurviveRestart(t, st, func(t *testing.T) {
		srv.pgctl(t, "stop", "-m", "immediate")
		time.Sleep(200 * time.Millisecond)
		srv.pgctl(t, "start", "-w", "-t", "60")
	})
}

// privateServer is a PostgreSQL server of the test's own, in a temporary
// directory, so that the test may crash and restart it.
type privateServer struct {
	bin, dir, port string
	dsn            string
	asPostgres     bool // run the server's commands as the postgres user (the test runs as root)
}

// startPrivateServer initializes and starts a server with the machine's
// PostgreSQL binaries, and stops it when the test ends. In CI, missing
// binaries are a failure; elsewhere the test is skipped.
func startPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/pg_ctl) to run a private server")
		}
		t.Skip("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/pg_ctl) to run a private server")
	}
	slices.Sort(matches)
	s := &privateServer{bin: filepath.Dir(matches[len(matches)-1]), asPostgres: os.Geteuid() == 0}
	dir, err := os.MkdirTemp("", "sluice-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if s.asPostgres {
		// initdb refuses to run as root: the data directory belongs to
		// the postgres user, who runs every command.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	s.port = freePort(t)
	s.run(t, filepath.Join(s.bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync")
	s.pgctl(t, "start", "-w", "-t", "60")
	t.Cleanup(func() {
		s.run(t, filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(dir, "data"), "stop", "-m", "immediate")
	})
	s.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", s.port)
	return s
}

// pgctl runs pg_ctl on the server with its options.
func (s *privateServer) pgctl(t *testing.T, args ...string) {
	t.Helper()
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c autovacuum=off", s.port, s.dir)
	full := append([]string{"-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-o", opts}, args...)
	s.run(t, filepath.Join(s.bin, "pg_ctl"), full...)
}

func (s *privateServer) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if s.asPostgres {
		args = append([]string{"-u", "postgres", "--", name}, args...)
		name = "runuser"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		t.Fatalf("%s %s: %v\n%s\nserver log:\n%s", name, strings.Join(args, " "), err, out, log)
	}
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
