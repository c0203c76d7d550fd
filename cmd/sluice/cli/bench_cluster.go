package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
)

// benchNodeCommand runs a node process of the cluster scenario.
const benchNodeCommand = "bench-node"

// benchNodeEnv, set to 1, makes a test binary run benchNodeCommand (the
// cluster scenario starts its nodes from its own executable).
const benchNodeEnv = "SLUICE_BENCH_NODE"

// Timing of the cluster scenario's nodes.
const (
	benchHeartbeat = 200 * time.Millisecond
	benchTimeout   = time.Second
)

// benchNode is a node of the cluster scenario: a processor that counts
// the events it delivers and prints the count every 50 ms, until SIGTERM.
func benchNode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(benchNodeCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "", "database DSN (env SLUICE_DB)")
	service := fs.String("service", "", "tenant service")
	provider := fs.String("provider", "", "tenant provider")
	ns := fs.String("namespace", "", "stream namespace")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if *db == "" {
		*db = os.Getenv("SLUICE_DB")
	}
	c, err := sluice.Open(ctx, *db, &sluice.Options{Service: *service, Provider: *provider, StreamPartitions: benchPartitions})
	if err != nil {
		fmt.Fprintln(stderr, "sluice bench-node:", err)
		return ExitError
	}
	defer c.Close()
	var delivered atomic.Int64
	p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{Name: "bench",
		HeartbeatInterval: benchHeartbeat, FailureTimeout: benchTimeout})
	err = p.Handle("consumer", func(context.Context, *sluice.StreamEvent) error {
		delivered.Add(1)
		return nil
	}, &sluice.ConsumerOptions{Namespace: *ns})
	if err == nil {
		err = p.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice bench-node:", err)
		return ExitError
	}
	fmt.Fprintln(stdout, "node", p.NodeID())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			p.Stop(sctx)
			fmt.Fprintln(stdout, "delivered", delivered.Load())
			return ExitOK
		case <-tick.C:
			fmt.Fprintln(stdout, "delivered", delivered.Load())
		}
	}
}

// clusterNode is a node process and the last count it printed.
type clusterNode struct {
	cmd       *exec.Cmd
	id        chan string // the node's id, once it started
	delivered atomic.Int64
	done      chan struct{}
}

// benchCluster starts --nodes node processes, publishes to 1,000 streams
// from --producers publishers (--batch events a call) for --duration,
// and reports events delivered per second once every node delivered
// everything; with --kills, it then kills a node at a time with SIGKILL,
// timing until all partitions are owned again, and starts another.
func benchCluster(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	if e.cfg.nodes > 1 && !e.backend.Features().SharedStreams {
		return nil, fmt.Errorf("the %s backend runs one stream node at a time: --nodes 1", e.backend.Features().Name)
	}
	if e.cfg.kills > 0 && e.cfg.nodes < 2 {
		return nil, errors.New("--kills needs --nodes 2 or more")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ns := "bench-" + randomHex(4)
	var (
		mu    sync.Mutex
		nodes []*clusterNode
	)
	start := func() (*clusterNode, error) {
		n := &clusterNode{id: make(chan string, 1), done: make(chan struct{})}
		// The DSN goes in the environment: a command line, password
		// and all, is there for any process listing to show.
		n.cmd = exec.Command(exe, benchNodeCommand, "--service", e.tenant.Service,
			"--provider", e.tenant.Provider, "--namespace", ns)
		n.cmd.Env = append(os.Environ(), benchNodeEnv+"=1", "SLUICE_DB="+e.cfg.db)
		n.cmd.Stderr = os.Stderr
		out, err := n.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := n.cmd.Start(); err != nil {
			return nil, err
		}
		go func() {
			defer close(n.done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if id, ok := strings.CutPrefix(sc.Text(), "node "); ok {
					n.id <- id
				}
				if v, ok := strings.CutPrefix(sc.Text(), "delivered "); ok {
					if d, err := strconv.ParseInt(v, 10, 64); err == nil {
						n.delivered.Store(d)
					}
				}
			}
			n.cmd.Wait()
		}()
		mu.Lock()
		nodes = append(nodes, n)
		mu.Unlock()
		return n, nil
	}
	defer func() {
		for _, n := range nodes {
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, n := range nodes {
			select {
			case <-n.done:
			case <-time.After(15 * time.Second):
				n.cmd.Process.Kill()
			}
		}
	}()
	for range e.cfg.nodes {
		if _, err := start(); err != nil {
			return nil, err
		}
	}
	dead := make(map[string]bool) // ids of killed nodes
	if _, err := e.waitSpread(ctx, e.cfg.nodes, dead, 60*time.Second); err != nil {
		return nil, err
	}

	// Throughput: publish for --duration, then wait for every delivery.
	body := payload(e.cfg.size)
	var (
		lat       latencies
		published atomic.Int64
	)
	begin := time.Now()
	_, _, err = timed(ctx, e.cfg.producers, e.cfg.duration, func(ctx context.Context, _ int) (int, error) {
		n, err := e.publishBatch(ctx, ns, body, &lat)
		published.Add(int64(n))
		return n, err
	})
	if err != nil {
		return nil, err
	}
	total := func() int64 {
		var sum int64
		for _, n := range nodes {
			sum += n.delivered.Load()
		}
		return sum
	}
	deadline := time.Now().Add(60 * time.Second)
	for total() < published.Load() {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the nodes delivered %d of %d events within 60 s of the end", total(), published.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := result(published.Load(), time.Since(begin), &lat)
	nodeCount := e.cfg.nodes
	r.Producers, r.Batch, r.Nodes = e.cfg.producers, e.cfg.batch, &nodeCount
	r.Note = fmt.Sprintf("events/s delivered by %d node processes; p50/p99: one Publish", e.cfg.nodes)
	results := []benchResult{r}
	if e.cfg.kills == 0 {
		return results, nil
	}

	// Failover: SIGKILL one live node at a time; time until every
	// partition has a live owner again; start another; wait for an even
	// spread.
	var failovers latencies
	for k := range e.cfg.kills {
		victim := nodes[rand.IntN(len(nodes))]
		var id string
		select {
		case id = <-victim.id:
		case <-time.After(30 * time.Second):
			return nil, errors.New("a node process did not say its id")
		}
		killed := time.Now()
		victim.cmd.Process.Signal(syscall.SIGKILL)
		<-victim.done
		dead[id] = true
		at, err := e.waitOwned(ctx, dead, 30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("kill %d: %w", k+1, err)
		}
		failovers.add(at.Sub(killed))
		mu.Lock()
		nodes = slices.DeleteFunc(nodes, func(n *clusterNode) bool { return n == victim })
		mu.Unlock()
		if _, err := start(); err != nil {
			return nil, err
		}
		if _, err := e.waitSpread(ctx, e.cfg.nodes, dead, 60*time.Second); err != nil {
			return nil, fmt.Errorf("after kill %d: %w", k+1, err)
		}
	}
	f := result(int64(e.cfg.kills), time.Since(begin), &failovers)
	f.Nodes, f.Kills = &nodeCount, &e.cfg.kills
	f.MsgsPerSec = 0
	f.Note = fmt.Sprintf("p50/p99: SIGKILL of a node to every partition owned again, over %d kills (1 s leases, 200 ms heartbeats); max %.0f ms",
		e.cfg.kills, failovers.max())
	return append(results, f), nil
}

// waitSpread waits until every partition is held by a live node and the
// n live nodes (not counting dead ones) hold P/n or P/n+1 each.
func (e *benchEnv) waitSpread(ctx context.Context, n int, dead map[string]bool, within time.Duration) (time.Time, error) {
	return e.waitLeases(ctx, dead, within, func(counts map[string]int, held int) bool {
		if held != benchPartitions || len(counts) != n {
			return false
		}
		for _, c := range counts {
			if c < benchPartitions/n || c > benchPartitions/n+1 {
				return false
			}
		}
		return true
	})
}

// waitOwned waits until every partition is held by a live node, not
// counting dead ones.
func (e *benchEnv) waitOwned(ctx context.Context, dead map[string]bool, within time.Duration) (time.Time, error) {
	return e.waitLeases(ctx, dead, within, func(_ map[string]int, held int) bool { return held == benchPartitions })
}

// waitLeases polls the leases until done says so, given how many
// partitions each live node holds and how many are held in all, and
// returns the time of the poll that satisfied it (taken before reading:
// what it saw held then).
func (e *benchEnv) waitLeases(ctx context.Context, dead map[string]bool, within time.Duration, done func(counts map[string]int, held int) bool) (time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		at := time.Now()
		nodes, err := e.store.Nodes(ctx)
		if err != nil {
			return at, err
		}
		leases, err := e.store.Leases(ctx)
		if err != nil {
			return at, err
		}
		alive := make(map[string]bool)
		for _, n := range nodes {
			alive[n.ID] = n.Alive && !dead[n.ID]
		}
		counts := make(map[string]int)
		held := 0
		for _, l := range leases {
			if l.Held && alive[l.Owner] {
				counts[l.Owner]++
				held++
			}
		}
		if done(counts, held) {
			return at, nil
		}
		if time.Now().After(deadline) {
			return at, fmt.Errorf("partitions per node %v (%d of %d held) after %v", counts, held, benchPartitions, within)
		}
		select {
		case <-ctx.Done():
			return at, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
