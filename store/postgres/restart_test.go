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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/postgres"
)

// TestDatabaseRestart checks DESIGN invariant 1 across a crash of the
// database: on a private PostgreSQL server, eight producers enqueue while
// the server is stopped in immediate mode (no shutdown checkpoint; the
// WAL is replayed at start, as after a power cut of the server process)
// and started again. Every enqueue that returned nil is there afterwards,
// and the same backend, never reopened, enqueues and leases again.
func TestDatabaseRestart(t *testing.T) {
	testDSN(t) // the same gate as every PostgreSQL test
	srv := startPrivateServer(t)
	ctx := t.Context()
	b, err := postgres.Open(ctx, postgres.Config{DSN: srv.dsn})
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
		acked    sync.Map // payload -> true
		okAfter  atomic.Int64
		restarts atomic.Bool
		next     atomic.Int64
		wg       sync.WaitGroup
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
				if restarts.Load() {
					okAfter.Add(1)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	srv.pgctl(t, "stop", "-m", "immediate")
	time.Sleep(200 * time.Millisecond)
	srv.pgctl(t, "start", "-w", "-t", "60")
	restarts.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for okAfter.Load() < 200 {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("only %d enqueues succeeded within 30 s of the restart; last error: %v", okAfter.Load(), lastErr.Load())
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
