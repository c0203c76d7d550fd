package mysql

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestDatabaseRestart kills a private MariaDB server with SIGKILL under
// eight producers (InnoDB recovers from its redo log at start) and starts
// it again; see storetest.SurviveRestart.
func TestDatabaseRestart(t *testing.T) {
	testDSN(t) // the same gate as every MySQL test
	srv := startPrivateServer(t)
	b, err := Open(t.Context(), Config{DSN: srv.dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := b.Store(store.Tenant{Service: "svc", Provider: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SurviveRestart(t, st, func(t *testing.T) {
		srv.kill(t)
		time.Sleep(200 * time.Millisecond)
		srv.start(t)
	})
}

// privateServer is a MariaDB (or MySQL) server of the test's own, in a
// temporary directory, so that the test may kill and restart it.
type privateServer struct {
	bin, dir, port string
	dsn            string
	asMySQL        bool // the test runs as root; the server runs as mysql
	cmd            *exec.Cmd
}

// startPrivateServer initializes and starts a server with the machine's
// binaries, and kills it when the test ends. In CI, missing binaries are a
// failure; elsewhere the test is skipped.
func startPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	s := &privateServer{asMySQL: os.Geteuid() == 0}
	install, err := exec.LookPath("mariadb-install-db")
	if err == nil {
		s.bin, err = exec.LookPath("mariadbd")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no MariaDB server binaries (mariadbd, mariadb-install-db) to run a private server")
		}
		t.Skip("no MariaDB server binaries (mariadbd, mariadb-install-db) to run a private server")
	}
	dir, err := os.MkdirTemp("", "sluice-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db"}
	if s.asMySQL {
		u, err := user.Lookup("mysql")
		if err != nil {
			t.Fatalf("running as root needs the mysql user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--user=mysql")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, install, args...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	s.start(t)
	t.Cleanup(func() { s.kill(t) })
	s.dsn = fmt.Sprintf("mysql://root@127.0.0.1:%s/sluice", s.port)
	return s
}

// start runs the server and waits until it accepts connections (creating
// the database the DSN names on first start).
func (s *privateServer) start(t *testing.T) {
	t.Helper()
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(s.dir, "data"),
		"--socket=" + filepath.Join(s.dir, "sock"), "--port=" + s.port, "--bind-address=127.0.0.1",
		"--innodb-flush-log-at-trx-commit=1", "--log-error=" + filepath.Join(s.dir, "log")}
	if s.asMySQL {
		args = append(args, "--user=mysql")
	}
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command("mariadb", "-uroot", "-h127.0.0.1", "-P"+s.port,
			"-e", "CREATE DATABASE IF NOT EXISTS sluice").CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			t.Fatalf("the private server did not start: %v\n%s\nserver log:\n%s", err, out, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL, as a crash would.
func (s *privateServer) kill(t *testing.T) {
	t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}
