package sluice_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Environment of the node processes of TestClusterFailover.
const (
	clusterChildDSN     = "SLUICE_CLUSTER_CHILD_DSN"
	clusterChildService = "SLUICE_CLUSTER_CHILD_SERVICE"
	clusterChildName    = "SLUICE_CLUSTER_CHILD_NAME"
	clusterChildOut     = "SLUICE_CLUSTER_CHILD_OUT"
)

// Timing of the cluster's nodes in TestClusterFailover.
const (
	clusterHeartbeat = 200 * time.Millisecond
	clusterTimeout   = time.Second
)

// TestClusterNodeChild is a node of TestClusterFailover: each delivery
// takes up to a millisecond (less if its context ends first: then it
// fails), and appends "start end key partition position epoch" to the
// node's file, with the times at which the handler started and finished
// in Unix nanoseconds (the processes share the machine's clock) and the
// epoch of the node's lease on the partition when it started, until
// SIGTERM stops it gracefully.
func TestClusterNodeChild(t *testing.T) {
	dsn := os.Getenv(clusterChildDSN)
	if dsn == "" {
		t.Skip("runs only as a node process of TestClusterFailover")
	}
	name := os.Getenv(clusterChildName)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("child", name)
	runChildProcessor(t, dsn, os.Getenv(clusterChildService), os.Getenv(clusterChildOut), log,
		sluice.StreamProcessorOptions{Name: name, HeartbeatInterval: clusterHeartbeat, FailureTimeout: clusterTimeout,
			ProgressInterval: 50 * time.Millisecond},
		sluice.ConsumerOptions{Namespace: "cluster", MaxConcurrency: 4},
		func(ctx context.Context, p *sluice.StreamProcessor, ev *sluice.StreamEvent) (string, error) {
			start := time.Now()
			var epoch int64
			for _, ps := range p.Stats() {
				if ps.Partition == ev.Partition {
					epoch = ps.Epoch
				}
			}
			select {
			case <-ctx.Done():
				return "", context.Cause(ctx)
			case <-time.After(time.Duration(rand.IntN(1000)) * time.Microsecond):
			}
			return fmt.Sprintf("%d %d %s %d %d %d\n", start.UnixNano(), time.Now().UnixNano(), ev.Key, ev.Partition, ev.Position, epoch), nil
		})
}

// clusterDelivery is one line of a node's file: a delivery that ran from
// at to end, under the node's lease of the partition at epoch.
type clusterDelivery struct {
	at, end   time.Time
	node      string
	key       string
	partition int32
	position  int64
	epoch     int64
}

func readDeliveries(t *testing.T, node, path string) []clusterDelivery {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []clusterDelivery
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 {
			continue // a line cut by a kill
		}
		start, _ := strconv.ParseInt(fs[0], 10, 64)
		end, _ := strconv.ParseInt(fs[1], 10, 64)
		part, _ := strconv.ParseInt(fs[3], 10, 32)
		pos, _ := strconv.ParseInt(fs[4], 10, 64)
		epoch, _ := strconv.ParseInt(fs[5], 10, 64)
		out = append(out, clusterDelivery{time.Unix(0, start), time.Unix(0, end), node, fs[2], int32(part), pos, epoch})
	}
	return out
}

// ownership is one sample of which node held each partition.
type ownership struct {
	at     time.Time
	owners [16]string // "" when no live lease
	leased [16]string // the lease's owner, alive or not ("" when none)
	epochs [16]int64
	nodes  []string // each node's id, liveness and heartbeat's age
}

// Three node processes share the partitions evenly, then four; a node
// killed with SIGKILL loses its partitions within the lease timeout and
// one heartbeat; a node stopped with SIGSTOP past its lease delivers
// nothing on the partitions taken from it once it runs again, and no
// checkpoint ever moves back. Throughout, a producer publishes 100,000
// events to 1,000 streams: every one is delivered, each stream's in order
// (a step back is a redelivery after a failover), and the duplicates are
// counted.
func TestClusterFailover(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		if kind == "sqlite" {
			t.Skip("SQLite runs one stream node at a time")
		}
		ctx := t.Context()
		dsn := shared.DSN(kind)
		dir := t.TempDir()
		type node struct {
			name string
			cmd  *exec.Cmd
			out  string
		}
		var nodes []*node
		start := func(name string) *node {
			n := &node{name: name, out: filepath.Join(dir, name)}
			n.cmd = exec.Command(os.Args[0], "-test.run=^TestClusterNodeChild$", "-test.count=1")
			n.cmd.Env = append(os.Environ(), clusterChildDSN+"="+dsn, clusterChildService+"="+service,
				clusterChildName+"="+name, clusterChildOut+"="+n.out)
			n.cmd.Stderr = os.Stderr
			if err := n.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, n)
			return n
		}
		defer func() {
			for _, n := range nodes {
				n.cmd.Process.Signal(syscall.SIGCONT)
				n.cmd.Process.Kill()
				n.cmd.Wait()
			}
		}()

		// The sampler: who holds each partition, every 25 ms; checkpoints
		// never move back.
		var (
			smu     sync.Mutex
			samples []ownership
		)
		sampleCtx, stopSampling := context.WithCancel(ctx)
		sampled := make(chan struct{})
		defer func() { stopSampling(); <-sampled }()
		go func() {
			defer close(sampled)
			checkpoints := make(map[int32]int64)
			for sampleCtx.Err() == nil {
				// The sample holds at its start or later: a lease taken
				// before its start shows in it.
				at := time.Now()
				st, err := c.ClusterStatus(sampleCtx)
				if err != nil {
					if sampleCtx.Err() == nil {
						t.Errorf("ClusterStatus: %v", err)
					}
					return
				}
				o := ownership{at: at}
				alive := map[string]bool{}
				for _, n := range st.Nodes {
					alive[n.ID] = n.Alive
					o.nodes = append(o.nodes, fmt.Sprintf("%s alive=%v beat %v before", n.ID, n.Alive, at.Sub(n.HeartbeatAt).Round(time.Millisecond)))
				}
				for _, ps := range st.Partitions {
					if ps.Checkpoint < checkpoints[ps.Partition] {
						t.Errorf("partition %d: checkpoint moved back from %d to %d", ps.Partition, checkpoints[ps.Partition], ps.Checkpoint)
					}
					checkpoints[ps.Partition] = ps.Checkpoint
					if ps.Held {
						o.leased[ps.Partition] = ps.Owner
						if alive[ps.Owner] {
							o.owners[ps.Partition] = ps.Owner
						}
					}
					o.epochs[ps.Partition] = ps.Epoch
				}
				smu.Lock()
				samples = append(samples, o)
				smu.Unlock()
				time.Sleep(25 * time.Millisecond)
			}
		}()
		latest := func() ownership {
			smu.Lock()
			defer smu.Unlock()
			if len(samples) == 0 {
				return ownership{}
			}
			return samples[len(samples)-1]
		}
		// spread waits until the partitions are all held, by as many
		// partitions per named node as want (sorted), and returns when.
		spread := func(within time.Duration, want []int, names ...string) time.Time {
			t.Helper()
			deadline := time.Now().Add(within)
			for {
				o := latest()
				counts := map[string]int{}
				held := 0
				for _, owner := range o.owners {
					if owner != "" {
						held++
						counts[strings.Join(strings.Split(owner, "-")[:1], "")]++
					}
				}
				var got []int
				for _, name := range names {
					got = append(got, counts[name])
				}
				slices.Sort(got)
				if held == 16 && slices.Equal(got, want) {
					return o.at
				}
				if time.Now().After(deadline) {
					t.Fatalf("partitions per node %v (%d held) after %v, want %v over %v; the sample, taken %v ago, has leases %q and nodes %q",
						counts, held, within, want, names, time.Since(o.at).Round(time.Millisecond), o.leased, o.nodes)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}

		for _, name := range []string{"n1", "n2", "n3"} {
			start(name)
		}
		spread(20*time.Second, []int{5, 5, 6}, "n1", "n2", "n3")

		// The producer: 1,000 streams, 100 events each, published in
		// rounds of 10 events a stream by 4 publishers, each with its
		// own streams, over about 12 s.
		const streams, perStream, publishers = 1000, 100, 4
		published := make([][]int64, streams) // positions of each stream, in order
		produced := make(chan struct{})
		pctx, stopProducing := context.WithCancel(ctx)
		defer func() { stopProducing(); <-produced }()
		go func() {
			defer close(produced)
			var wg sync.WaitGroup
			for w := range publishers {
				wg.Go(func() {
					for round := range perStream / 10 {
						for s := w; s < streams; s += publishers {
							evs := make([]sluice.Event, 10)
							for i := range evs {
								evs[i] = sluice.Event{Body: []byte(strconv.Itoa(round*10 + i))}
							}
							pos, err := c.Publish(pctx, sluice.StreamID{Namespace: "cluster", Key: "s-" + strconv.Itoa(s)}, evs...)
							if err != nil {
								if pctx.Err() == nil {
									t.Errorf("Publish: %v", err)
								}
								return
							}
							published[s] = append(published[s], pos...)
							if rand.IntN(4) == 0 {
								time.Sleep(2 * time.Millisecond)
							}
						}
						select {
						case <-pctx.Done():
							return
						case <-time.After(800 * time.Millisecond):
						}
					}
				})
			}
			wg.Wait()
		}()

		// A fourth node joins: even again within a few lease periods.
		joined := time.Now()
		start("n4")
		at := spread(20*time.Second, []int{4, 4, 4, 4}, "n1", "n2", "n3", "n4")
		t.Logf("%s: 4 nodes pull 4 partitions each %v after the fourth started", kind, at.Sub(joined).Round(time.Millisecond))

		// SIGKILL of n1: its partitions are owned again, by the others.
		// How soon (the lease timeout and one heartbeat, on a machine not
		// busy with other tests) is for sluice bench --scenario cluster
		// --kills to measure: here it is logged.
		killed := time.Now()
		nodes[0].cmd.Process.Signal(syscall.SIGKILL)
		nodes[0].cmd.Wait()
		at = spread(20*time.Second, []int{5, 5, 6}, "n2", "n3", "n4")
		t.Logf("%s: n1's partitions owned again %v after SIGKILL (lease %v, heartbeat %v)",
			kind, at.Sub(killed).Round(time.Millisecond), clusterTimeout, clusterHeartbeat)

		// SIGSTOP of n2 past its lease: the others take its partitions;
		// after SIGCONT it delivers nothing on them while another holds
		// them.
		stopped := time.Now()
		nodes[1].cmd.Process.Signal(syscall.SIGSTOP)
		spread(20*time.Second, []int{8, 8}, "n3", "n4")
		time.Sleep(clusterHeartbeat)
		resumed := time.Now()
		nodes[1].cmd.Process.Signal(syscall.SIGCONT)
		spread(20*time.Second, []int{5, 5, 6}, "n2", "n3", "n4")

		<-produced
		stopSampling()
		<-sampled
		if t.Failed() || pctx.Err() != nil {
			return
		}
		// Every event delivered.
		want := 0
		for _, ps := range published {
			want += len(ps)
		}
		var all []clusterDelivery
		deadline := time.Now().Add(60 * time.Second)
		for {
			all = all[:0]
			for _, n := range nodes {
				all = append(all, readDeliveries(t, n.name, n.out)...)
			}
			seen := map[string]bool{}
			for _, d := range all {
				seen[d.key+" "+strconv.FormatInt(d.position, 10)] = true
			}
			if len(seen) == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d published events delivered 60 s after the producer ended", len(seen), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
		slices.SortStableFunc(all, func(a, b clusterDelivery) int { return a.at.Compare(b.at) })
		smu.Lock()
		defer smu.Unlock()
		// The paused node delivered nothing on a partition it had lost,
		// once it ran again: a delivery of n2 is late when it started
		// under an epoch that a sample taken before its start shows moved
		// on. The handler notes a delivery when it starts running, which
		// for one the agent started just before the pause may be after
		// SIGCONT: at most the consumer's concurrency (4) of them per
		// partition.
		movedOn := func(d clusterDelivery) bool {
			i, _ := slices.BinarySearchFunc(samples, d.at, func(o ownership, at time.Time) int { return o.at.Compare(at) })
			return i > 0 && d.epoch > 0 && samples[i-1].epochs[d.partition] > d.epoch // 0: the node did not know
		}
		late := map[int32][]string{}
		lateOnes := map[clusterDelivery]bool{}
		for _, d := range all {
			if d.node == "n2" && !d.at.Before(resumed) && movedOn(d) {
				late[d.partition] = append(late[d.partition], fmt.Sprintf("%s/%d at epoch %d, %v after SIGCONT",
					d.key, d.position, d.epoch, d.at.Sub(resumed).Round(time.Millisecond)))
				lateOnes[d] = true
			}
		}
		for part, ds := range late {
			if len(ds) > 4 {
				t.Fatalf("n2 delivered %d events of partition %d after SIGCONT under a lease another node had taken: %v", len(ds), part, ds)
			}
		}
		// Never two deliveries of one stream at once, on one node or two:
		// a node delivers a partition only while it holds its lease.
		// Left out: the paused node's deliveries in progress at the pause,
		// which nothing can stop, and the late ones above.
		paused := func(d clusterDelivery) bool {
			return d.node == "n2" && d.at.Before(resumed) && d.end.After(stopped) || lateOnes[d]
		}
		byKey := map[string][]clusterDelivery{}
		for _, d := range all {
			byKey[d.key] = append(byKey[d.key], d)
		}
		overlaps := 0
		for key, ds := range byKey {
			var last *clusterDelivery // of those before d, the one that ends last
			for i := range ds {
				d := &ds[i]
				if paused(*d) {
					continue
				}
				if last != nil && d.at.Before(last.end) {
					if overlaps++; overlaps <= 5 {
						t.Errorf("stream %s: %s delivered position %d from %v while %s delivered %d until %v",
							key, d.node, d.position, d.at.Format("15:04:05.000000"), last.node, last.position, last.end.Format("15:04:05.000000"))
					}
				}
				if last == nil || d.end.After(last.end) {
					last = d
				}
			}
		}
		if overlaps > 0 {
			t.Fatalf("%d deliveries overlapped another of their stream", overlaps)
		}
		// In order per stream: no delivery of an event starts before a
		// delivery of the stream's previous event has ended (so, by
		// induction, before each earlier event was delivered once).
		for s, want := range published {
			ds := byKey["s-"+strconv.Itoa(s)]
			done := map[int64]time.Time{} // each event's first delivery's end
			for _, d := range ds {
				if e, ok := done[d.position]; !ok || d.end.Before(e) {
					done[d.position] = d.end
				}
			}
			for j, pos := range want[1:] {
				prev := done[want[j]]
				for _, d := range ds {
					if d.position == pos && d.at.Before(prev) {
						var around []string
						for _, o := range ds {
							if o.position >= want[max(0, j-3)] && o.position <= want[min(len(want)-1, j+4)] {
								around = append(around, fmt.Sprintf("%d by %s at epoch %d, %s to %s", o.position, o.node, o.epoch,
									o.at.Format("15:04:05.000000"), o.end.Format("15:04:05.000000")))
							}
						}
						t.Fatalf("stream s-%d (partition %d): %s started %d at %s, before %d was first delivered (%s); deliveries:\n%s",
							s, d.partition, d.node, pos, d.at.Format("15:04:05.000000"), want[j], prev.Format("15:04:05.000000"),
							strings.Join(around, "\n"))
					}
				}
			}
		}
		dups := len(all) - want
		t.Logf("%s: %d events, %d deliveries, %d duplicates (redeliveries after the kill, the pause and the hand-offs)", kind, want, len(all), dups)
		for _, n := range nodes[1:] {
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, n := range nodes[1:] {
			if err := n.cmd.Wait(); err != nil {
				t.Errorf("node %s did not stop cleanly: %v", n.name, err)
			}
		}
	})
}
