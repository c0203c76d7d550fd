package sluice_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Subscribe with an empty key stores a consumer's subscription to the
// whole namespace ahead of its processor: from now, what is published
// after the call and before the processor starts is delivered; from the
// beginning, what was published before it too. The processor finds the
// subscription stored and keeps it; a second one is refused, and so is a
// position, which names one partition's place.
func TestSubscribeNamespace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		early := publish(t, c, sluice.StreamID{Namespace: "audit", Key: "a"}, "before")
		fromNow, err := c.Subscribe(ctx, sluice.StreamID{Namespace: "audit"}, "recent", sluice.FromNow())
		if err != nil {
			t.Fatalf("Subscribe to a namespace from now: %v", err)
		}
		if fromNow.Partition != -1 || fromNow.Stream.Key != "" || fromNow.Consumer != "recent" {
			t.Fatalf("Subscribe returned %+v", fromNow)
		}
		all, err := c.Subscribe(ctx, sluice.StreamID{Namespace: "audit"}, "everything", sluice.FromBeginning())
		if err != nil {
			t.Fatalf("Subscribe to a namespace from the beginning: %v", err)
		}
		_, err = c.Subscribe(ctx, sluice.StreamID{Namespace: "audit"}, "recent", sluice.FromBeginning())
		wantErr(t, "a second subscription of a consumer to a namespace", err, sluice.ErrEntityExists)
		_, err = c.Subscribe(ctx, sluice.StreamID{Namespace: "audit"}, "other", sluice.FromPosition(1))
		wantErr(t, "a subscription to a namespace from a position", err, sluice.ErrInvalidArgument)
		_, err = c.Subscribe(ctx, sluice.StreamID{Namespace: "audit!"}, "other", sluice.FromNow())
		wantErr(t, "a subscription to an invalid namespace", err, sluice.ErrInvalidName)
		_, err = c.Subscribe(ctx, sluice.StreamID{Namespace: "audit"}, "", sluice.FromNow())
		wantErr(t, "a subscription of no consumer", err, sluice.ErrInvalidName)

		// Published while no processor runs.
		a := publish(t, c, sluice.StreamID{Namespace: "audit", Key: "a"}, "1", "2")
		b := publish(t, c, sluice.StreamID{Namespace: "audit", Key: "b"}, "3")
		col := newCollector()
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			for _, consumer := range []string{"recent", "everything"} {
				if err := p.Handle(consumer, col.handle, &sluice.ConsumerOptions{Namespace: "audit"}); err != nil {
					t.Fatal(err)
				}
			}
		})
		col.waitCount(t, 3+4, 30*time.Second)
		if got := col.positions(fromNow.ID, "a"); !slices.Equal(got, a) {
			t.Fatalf("from now, stream a: %v, want %v", got, a)
		}
		if got := col.positions(fromNow.ID, "b"); !slices.Equal(got, b) {
			t.Fatalf("from now, stream b: %v, want %v", got, b)
		}
		if got := col.positions(all.ID, "a"); !slices.Equal(got, append(early, a...)) {
			t.Fatalf("from the beginning, stream a: %v, want %v", got, append(early, a...))
		}
		subs, err := c.ListStreamSubscriptions(ctx, sluice.StreamID{Namespace: "audit", Key: "c"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(subs))
		for i, s := range subs {
			ids[i] = s.ID
		}
		slices.Sort(ids)
		if want := []string{all.ID, fromNow.ID}; !slices.Equal(ids, want) {
			t.Fatalf("the namespace's subscriptions are %v, want %v (the processor keeps those stored)", ids, want)
		}
	})
}

// Closing a client stops its running processors: the one on it leaves
// the cluster and gives back its partitions, and stores the progress of
// what it delivered, so that a processor of the consumer on another
// client takes over at once, from there.
func TestCloseStopsProcessors(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		first := reopen(t, kind, service)
		col := newCollector()
		p := first.NewStreamProcessor(&sluice.StreamProcessorOptions{FailureTimeout: time.Hour, HeartbeatInterval: time.Second})
		if err := p.Handle("reader", col.handle, &sluice.ConsumerOptions{Namespace: "feed"}); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		before := publish(t, c, sluice.StreamID{Namespace: "feed", Key: "k"}, "1", "2")
		col.waitCount(t, 2, 30*time.Second)
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		status, err := c.ClusterStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range status.Nodes {
			if n.ID == p.NodeID() {
				t.Fatalf("the closed client's processor is still a node of the cluster: %+v", n)
			}
		}
		for _, ps := range status.Partitions {
			if ps.Held && ps.Owner == p.NodeID() {
				t.Fatalf("the closed client's processor still holds partition %d", ps.Partition)
			}
		}
		late := first.NewStreamProcessor(nil)
		if err := late.Handle("late", col.handle, nil); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "a processor started on a closed client", late.Start(ctx), sluice.ErrClosed)
		// With an hour's failure timeout, a processor that had not left
		// would hold the partitions (and, on SQLite, refuse the next
		// one) far beyond the test's time.
		after := publish(t, c, sluice.StreamID{Namespace: "feed", Key: "k"}, "3")
		next := newCollector()
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			if err := p.Handle("reader", next.handle, &sluice.ConsumerOptions{Namespace: "feed"}); err != nil {
				t.Fatal(err)
			}
		})
		next.waitCount(t, 1, 30*time.Second)
		if got := next.positions("ns/feed/reader", "k"); !slices.Equal(got, after) {
			t.Fatalf("the next processor delivered %v, want %v (%v were delivered before the close)", got, after, before)
		}
	})
}

// On SQLite a processor's Start waits for another node of its group to
// fall silent; closing its client cuts that wait short.
func TestCloseCutsStartShort(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		if kind != "sqlite" {
			t.Skip("only SQLite runs one node of a group at a time")
		}
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			if err := p.Handle("reader", newCollector().handle, nil); err != nil {
				t.Fatal(err)
			}
		})
		other := reopen(t, kind, service)
		p := other.NewStreamProcessor(&sluice.StreamProcessorOptions{FailureTimeout: time.Hour})
		if err := p.Handle("reader", newCollector().handle, nil); err != nil {
			t.Fatal(err)
		}
		started := make(chan error, 1)
		go func() { started <- p.Start(context.Background()) }()
		// Once it is waiting: registered as a node of the cluster.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			status, err := c.ClusterStatus(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(status.Nodes, func(n sluice.ClusterNode) bool { return n.ID == p.NodeID() }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the second processor never registered")
			}
		}
		closed := make(chan error, 1)
		go func() { closed <- other.Close() }() // it waits for the Start
		select {
		case err := <-started:
			wantErr(t, "a Start its client's Close cut short", err, sluice.ErrClosed)
		case <-time.After(30 * time.Second):
			t.Fatal("Close did not cut short a Start waiting for another node (it waits up to an hour)")
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
	})
}
