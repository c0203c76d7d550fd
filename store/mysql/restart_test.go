package mysql

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
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// TestDatabaseRestart checks DESIGN invariant 1 across a crash of the
// database: on a private MariaDB server, eight producers enqueue while the
// server is killed with SIGKILL (InnoDB recovers from its redo log at
// start) and started again. Every enqueue that returned nil is there
// afterwards, and the same backend, never reopened, enqueues and leases
// again.
func TestDatabaseRestart(t *testing.T) {
	testDSN(t) // the same gate as every MySQL test
	srv := startPrivateServer(t)
	ctx := t.Context()
	b, err := Open(ctx, Config{DSN: srv.dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := b.Store(store.Tenant{Service: "svc", Provider: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	var (
		acked   sync.Map
		okAfter atomic.Int64
		after   atomic.Bool
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	var lastErr atomic.Value
	lastErr.Store("none")
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := strconv.FormatInt(next.Add(1), 10)
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := st.Enqueue(cctx, &store.EnqueueParams{Queue: "q", Messages: []store.NewMessage{{Payload: []byte(p)}}})
				cancel()
				if err != nil {
					lastErr.Store(err.Error())
					time.Sleep(10 * time.Millisecond) // the server is down
					continue
				}
				acked.Store(p, true)
				if after.Load() {
					okAfter.Add(1)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	srv.kill(t)
	time.Sleep(200 * time.Millisecond)
	srv.start(t)
	after.Store(true)
	deadline := time.Now().Add(60 * time.Second)
	for okAfter.Load() < 200 {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("only %d enqueues succeeded within 60 s of the restart; last error: %v", okAfter.Load(), lastErr.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	stored := map[string]bool{}
	for from := int64(0); ; {
		ms, err := st.Peek(ctx, &store.PeekParams{Queue: "q", FromSeq: from, Max: 1000})
		if err != nil {
			t.Fatalf("Peek after the restart: %v", err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			stored[string(m.Payload)] = true
		}
		from = ms[len(ms)-1].Seq + 1
	}
	var lost []string
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if !stored[k.(string)] {
			lost = append(lost, k.(string))
		}
		return true
	})
	if len(lost) > 0 {
		slices.Sort(lost)
		t.Fatalf("%d of %d acknowledged enqueues are missing after the restart: %v", len(lost), n, lost[:min(len(lost), 20)])
	}
	got, err := st.Lease(ctx, &store.LeaseParams{Queue: "q", Max: 10, Visibility: time.Minute})
	if err != nil || len(got) == 0 {
		t.Fatalf("Lease after the restart: %d messages, %v", len(got), err)
	}
	t.Logf("%d acknowledged enqueues, all present after the restart (%d stored)", n, len(stored))
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
