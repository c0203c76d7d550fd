package storetest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Environment variables that make a test binary an eviction child.
const (
	envEvictChild   = "SLUICE_STORETEST_EVICT_CHILD"
	envEvictDSN     = "SLUICE_STORETEST_EVICT_DSN"
	envEvictService = "SLUICE_STORETEST_EVICT_SERVICE"
	envEvictUntil   = "SLUICE_STORETEST_EVICT_UNTIL"
	evictQueue      = "evicted"
	evictReady      = "storetest-evict-child-ready"
)

// Timing of EvictionOncePerInterval.
const (
	evictInterval  = 200 * time.Millisecond
	evictProcesses = 4
	evictFor       = 3 * time.Second
)

// IsChild reports whether this process is a child that CrashTest or
// EvictionOncePerInterval started. A TestMain that does expensive setup
// (starting a database container, say) can skip it in the child, which
// only needs to open the database the parent names.
func IsChild() bool {
	return os.Getenv(envCrashChild) != "" || os.Getenv(envEvictChild) != ""
}

// EvictionOncePerInterval checks that a queue's periodic work runs once
// per EvictionInterval however many processes lease from the queue: the
// eviction batch goes to the one lease that wins the compare-and-set of
// the queue's control row, not to one lease per process.
//
// It fills a queue with dead letters already past their retention, on a
// queue whose eviction batch removes at most one of them (EvictionBatch
// 1) every 200 ms, then starts four child processes (the test binary
// again, as CrashTest does, and wired in the same way) that lease from the
// queue as fast as they can for 3 s. The dead letters removed count the
// batches that ran: at most one per interval of the time the children
// leased, and at least one.
func EvictionOncePerInterval(t *testing.T, env CrashEnv) {
	if env.Open == nil {
		t.Fatal("storetest: CrashEnv.Open is nil")
	}
	if os.Getenv(envEvictChild) != "" {
		evictChild(t, env)
		return
	}
	if testing.Short() {
		t.Skip("storetest: the eviction test starts processes; skipped in -short mode")
	}
	ctx := t.Context()
	tn := newTenant()
	st, err := env.Open(t, env.DSN).Store(tn)
	if err != nil {
		t.Fatalf("Store: %v", err)
	}
	createQueue(t, ctx, st, store.QueueSettings{Name: evictQueue, EvictionInterval: evictInterval, EvictionBatch: 1,
		DeadLetterRetention: time.Millisecond})
	const dead = 1000
	msgs := make([]store.NewMessage, dead)
	for i := range msgs {
		msgs[i] = store.NewMessage{Payload: []byte("x"), DeadLetterReason: "test"}
	}
	if _, err := st.EnqueueAll(ctx, &store.EnqueueAllParams{Batches: []store.EnqueueParams{{Queue: evictQueue, Messages: msgs}}}); err != nil {
		t.Fatalf("EnqueueAll: %v", err)
	}

	until := time.Now().Add(evictFor + 5*time.Second) // room for the children to start
	var cmds []*exec.Cmd
	var outs []*lockedBuffer
	readies := make(chan error, evictProcesses)
	for range evictProcesses {
		cmd := exec.Command(os.Args[0], "-test.run="+runPattern(t.Name()), "-test.count=1", "-test.timeout=5m")
		cmd.Env = append(os.Environ(), envEvictChild+"=1", envEvictDSN+"="+env.DSN, envEvictService+"="+tn.Service,
			envEvictUntil+"="+strconv.FormatInt(until.UnixNano(), 10))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		out := &lockedBuffer{}
		cmd.Stderr = out
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting an eviction child: %v", err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
		go func() {
			sc := bufio.NewScanner(stdout)
			ready := false
			for sc.Scan() {
				out.Write(append(sc.Bytes(), '\n'))
				if !ready && strings.Contains(sc.Text(), evictReady) {
					ready = true
					readies <- nil
				}
			}
			if !ready {
				readies <- fmt.Errorf("exited before it was ready")
			}
		}()
	}
	defer func() {
		for _, cmd := range cmds {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	for range evictProcesses {
		if err := <-readies; err != nil {
			t.Fatalf("an eviction child %v", err)
		}
	}
	// Every child leases for evictFor before `until` (less if it was
	// late): the batches that run meanwhile are what the dead letters
	// removed count, since nothing else leases.
	before, err := st.QueueStats(ctx, evictQueue)
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("eviction child %d: %v\n%s", i, err, outs[i].String())
		}
	}
	leased := evictFor
	after, err := st.QueueStats(ctx, evictQueue)
	if err != nil {
		t.Fatal(err)
	}
	leases := 0
	for _, out := range outs {
		for line := range strings.SplitSeq(out.String(), "\n") {
			if n, ok := strings.CutPrefix(line, "leases "); ok {
				k, _ := strconv.Atoi(n)
				leases += k
			}
		}
	}
	runs := before.DeadLettered - after.DeadLettered
	most := int64(leased/evictInterval) + 2
	t.Logf("storetest: %d processes leased %d times in %v; %d eviction batches ran (at most %d: one per %v)",
		evictProcesses, leases, leased.Round(time.Millisecond), runs, most, evictInterval)
	if leases < evictProcesses*int(leased/evictInterval) {
		t.Fatalf("the children leased %d times in %v: too seldom to race for the eviction", leases, leased)
	}
	if runs < 1 || runs > most {
		t.Fatalf("%d eviction batches ran in %v with %d processes leasing; want 1 to %d (one per %v)",
			runs, leased, evictProcesses, most, evictInterval)
	}
}

// evictChild is the child's side of EvictionOncePerInterval: lease until
// the parent's deadline, then print how many leases it made.
func evictChild(t *testing.T, env CrashEnv) {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "storetest eviction child: "+format+"\n", args...)
		os.Exit(3)
	}
	ns, err := strconv.ParseInt(os.Getenv(envEvictUntil), 10, 64)
	if err != nil {
		fail("bad %s: %v", envEvictUntil, err)
	}
	until := time.Unix(0, ns)
	ctx := context.Background()
	st, err := env.Open(t, os.Getenv(envEvictDSN)).Store(store.Tenant{Service: os.Getenv(envEvictService), Provider: "p"})
	if err != nil {
		fail("Store: %v", err)
	}
	fmt.Println(evictReady)
	time.Sleep(time.Until(until.Add(-evictFor)))
	n := 0
	for time.Now().Before(until) {
		if _, err := st.Lease(ctx, &store.LeaseParams{Queue: evictQueue, Max: 1, Visibility: time.Minute}); err != nil {
			fail("Lease: %v", err)
		}
		n++
	}
	fmt.Printf("leases %d\n", n)
	os.Exit(0)
}
