package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Processors of two groups, handling different consumers, each pull
// every partition for their own consumers: both consumers get every
// event in order. A consumer stopped in one group holds the partitions'
// checkpoints at its position while the other group's runs on, and a
// third group cannot take a consumer a live group handles.
func TestStreamGroups(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		billing, mail := newCollector(), newCollector()
		opts := func(name, group string) *sluice.StreamProcessorOptions {
			o := clusterOptions(name)
			o.Group = group
			return o
		}
		startStreamProcessor(t, c, opts("billing", ""), func(p *sluice.StreamProcessor) {
			p.Handle("billing", billing.handle, &sluice.ConsumerOptions{Namespace: "orders"})
		})
		other := reopen(t, kind, service) // another process
		mailer := startStreamProcessor(t, other, opts("mailer", "mailers"), func(p *sluice.StreamProcessor) {
			p.Handle("mail", mail.handle, &sluice.ConsumerOptions{Namespace: "orders"})
		})
		waitPulled(t, 10*time.Second, []int{16}, mailer)

		const keys, each = 20, 5
		publishAll := func(round int) {
			for k := range keys {
				id := sluice.StreamID{Namespace: "orders", Key: fmt.Sprintf("o-%d", k)}
				for i := range each {
					publish(t, c, id, fmt.Sprintf("%d-%d", round, i))
				}
			}
		}
		publishAll(0)
		billing.waitDistinct(t, keys*each, 30*time.Second)
		mail.waitDistinct(t, keys*each, 30*time.Second)
		for _, col := range []struct {
			name string
			c    *collector
			sub  string
		}{{"billing", billing, "ns/orders/billing"}, {"mail", mail, "ns/orders/mail"}} {
			for k := range keys {
				got := firstSeen(col.c.positions(col.sub, fmt.Sprintf("o-%d", k)))
				if len(got) != each || !slices.IsSorted(got) {
					t.Fatalf("%s got stream o-%d at %v, want %d events in order", col.name, k, got, each)
				}
			}
		}
		waitCheckpoints(t, c, func(ps sluice.PartitionStatus) bool { return ps.Checkpoint == ps.Head })

		// The mailers stop: billing goes on; the checkpoints wait for mail.
		stopCtx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := mailer.Stop(stopCtx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		before, err := c.ClusterStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, ps := range before.Partitions { // given back at once, not left to end
			if i := slices.IndexFunc(ps.Leases, func(l sluice.GroupLease) bool { return l.Group == "mailers" }); i < 0 || ps.Leases[i].Held {
				t.Fatalf("partition %d: leases %+v after the mailers stopped, want the mailers' released", ps.Partition, ps.Leases)
			}
		}
		publishAll(1)
		billing.waitDistinct(t, 2*keys*each, 30*time.Second)
		time.Sleep(300 * time.Millisecond) // several progress intervals
		after, err := c.ClusterStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for i, ps := range after.Partitions {
			if ps.Head > before.Partitions[i].Head && ps.Checkpoint != before.Partitions[i].Checkpoint {
				t.Fatalf("partition %d: checkpoint moved from %d to %d while mail, stopped, is at %d",
					ps.Partition, before.Partitions[i].Checkpoint, ps.Checkpoint, before.Partitions[i].Checkpoint)
			}
		}

		// Mail starts again, in the same group, and catches up.
		startStreamProcessor(t, other, opts("mailer-2", "mailers"), func(p *sluice.StreamProcessor) {
			p.Handle("mail", mail.handle, &sluice.ConsumerOptions{Namespace: "orders"})
		})
		mail.waitDistinct(t, 2*keys*each, 30*time.Second)
		waitCheckpoints(t, c, func(ps sluice.PartitionStatus) bool { return ps.Checkpoint == ps.Head })

		// Both groups live, each holding every partition (a heartbeat may
		// come late on a loaded machine: look again).
		var groups map[string]bool
		waitCheckpoints(t, c, func(ps sluice.PartitionStatus) bool {
			return len(ps.Leases) == 2 && ps.Leases[0].Group == "" && ps.Leases[1].Group == "mailers" && ps.Leases[0].Held && ps.Leases[1].Held
		})
		for deadline := time.Now().Add(20 * time.Second); ; {
			status, err := c.ClusterStatus(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			groups = map[string]bool{}
			for _, nd := range status.Nodes {
				if nd.Alive {
					groups[nd.Group+":"+fmt.Sprint(nd.Consumers)] = true
				}
			}
			if groups[":[billing]"] && groups["mailers:[mail]"] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("live nodes by group and consumers: %v", groups)
			}
			time.Sleep(50 * time.Millisecond)
		}

		// A third group cannot handle billing while the first runs. (On a
		// loaded machine the first group's heartbeat may lapse just then,
		// and the thief rightly starts: stop it, wait for the first group
		// to be live again, and try once more.)
		for attempt := 1; ; attempt++ {
			thief := reopen(t, kind, service).NewStreamProcessor(opts("thief", "thieves"))
			thief.Handle("billing", billing.handle, nil)
			err := thief.Start(t.Context())
			if err == nil {
				stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				thief.Stop(stopCtx)
				cancel()
				if attempt < 3 {
					t.Logf("attempt %d: a processor of another group started handling billing (a lapsed heartbeat?); again", attempt)
					waitCheckpoints(t, c, func(ps sluice.PartitionStatus) bool {
						return len(ps.Leases) == 2 && ps.Leases[0].Group == "" && ps.Leases[0].Held
					})
					continue
				}
			}
			wantErr(t, "a processor of another group handling billing", err, sluice.ErrConsumerConflict)
			break
		}
	})
}

// waitCheckpoints waits until every partition's status satisfies ok.
func waitCheckpoints(t *testing.T, c *sluice.Client, ok func(sluice.PartitionStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := c.ClusterStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(s.Partitions, func(ps sluice.PartitionStatus) bool { return !ok(ps) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions after 20 s: %+v", s.Partitions)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Processors of two groups that handle one consumer and start at the
// same moment: at most one of them pulls partitions for it, the other
// refusing to start or giving its partitions up.
func TestStreamGroupsRaceForAConsumer(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		procs := make([]*sluice.StreamProcessor, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		done := make(chan int)
		for i := range procs {
			cl := c
			if i == 1 {
				cl = reopen(t, kind, service)
			}
			o := clusterOptions(fmt.Sprint("racer-", i))
			o.Group = fmt.Sprint("group-", i)
			procs[i] = cl.NewStreamProcessor(o)
			procs[i].Handle("billing", func(context.Context, *sluice.StreamEvent) error { return nil }, &sluice.ConsumerOptions{Namespace: "orders"})
			go func() {
				<-start
				errs[i] = procs[i].Start(t.Context())
				done <- i
			}()
		}
		close(start)
		<-done
		<-done
		for i, p := range procs {
			if errs[i] == nil {
				t.Cleanup(func() { p.Stop(context.Background()) })
			} else if !errors.Is(errs[i], sluice.ErrConsumerConflict) || !strings.Contains(errs[i].Error(), "consumer billing is handled by node racer-") {
				t.Fatalf("Start of racer %d: %v", i, errs[i])
			}
		}
		t.Logf("starts: %v; %v", errs[0], errs[1])
		if errs[0] != nil && errs[1] != nil {
			t.Fatalf("both refused: %v; %v", errs[0], errs[1])
		}
		// Settled: one pulls all 16 partitions, the other none, for a
		// while.
		deadline := time.Now().Add(10 * time.Second)
		settled := 0
		for settled < 10 {
			n0, n1 := len(pulled(procs[0])), len(pulled(procs[1]))
			if (n0 == 16 && n1 == 0) || (n0 == 0 && n1 == 16) {
				settled++
			} else {
				settled = 0
			}
			if time.Now().After(deadline) {
				t.Fatalf("racers pull %d and %d partitions (starts: %v; %v)", n0, n1, errs[0], errs[1])
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// firstSeen is positions in the order they first appear: at least once,
// a redelivery repeats events from the last stored progress.
func firstSeen(positions []int64) []int64 {
	seen := make(map[int64]bool)
	var out []int64
	for _, p := range positions {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// waitDistinct waits until the collector holds n distinct deliveries
// (subscription, stream and position).
func (c *collector) waitDistinct(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c.mu.Lock()
		distinct := 0
		for _, ps := range c.got {
			distinct += len(firstSeen(ps))
		}
		c.mu.Unlock()
		if distinct >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d distinct deliveries after %v, want %d", distinct, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
