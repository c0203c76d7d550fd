package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var clusterTests = []suiteTest{
	{"Membership", testMembership},
	{"Leases", testLeases},
	{"PartitionLeaseExpiry", testPartitionLeaseExpiry},
	{"InvalidCluster", testInvalidCluster},
	{"Groups", testGroups},
	{"LeaseCacheSizes", testLeaseCacheSizes},
}

func heartbeat(t *testing.T, st store.Store, node string, timeout time.Duration) []store.Node {
	t.Helper()
	nodes, err := st.Heartbeat(t.Context(), &store.HeartbeatParams{Node: node, Address: node + ":7070", Timeout: timeout, Forget: 10 * timeout})
	if err != nil {
		t.Fatalf("Heartbeat(%s): %v", node, err)
	}
	return nodes
}

// alive lists the ids of nodes, with "+" for the live ones.
func alive(nodes []store.Node) []string {
	var out []string
	for _, n := range nodes {
		mark := "-"
		if n.Alive {
			mark = "+"
		}
		out = append(out, mark+n.ID)
	}
	return out
}

func testMembership(t *testing.T, h *harness) {
	_, st := h.setup(t)
	const timeout = 400 * time.Millisecond
	heartbeat(t, st, "node-a", timeout)
	nodes := heartbeat(t, st, "node-b", timeout)
	if got := alive(nodes); !slices.Equal(got, []string{"+node-a", "+node-b"}) {
		t.Fatalf("nodes after two heartbeats: %v", got)
	}
	if nodes[0].Address != "node-a:7070" || nodes[0].StartedAt.IsZero() || nodes[0].HeartbeatAt.Before(nodes[0].StartedAt) || nodes[0].Timeout != timeout {
		t.Fatalf("node-a = %+v", nodes[0])
	}
	listed, err := st.Nodes(t.Context())
	if err != nil || !slices.Equal(alive(listed), alive(nodes)) {
		t.Fatalf("Nodes = %v (%v), Heartbeat listed %v", alive(listed), err, alive(nodes))
	}
	started := nodes[1].StartedAt
	// node-a keeps beating, node-b falls silent: dead after the timeout,
	// by the database's clock, and forgotten after ten of them.
	deadline := time.Now().Add(20 * timeout)
	for {
		time.Sleep(timeout / 4)
		nodes = heartbeat(t, st, "node-a", timeout)
		if got := alive(nodes); slices.Equal(got, []string{"+node-a", "-node-b"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-b still counted alive %v after its last heartbeat: %v", 20*timeout, alive(nodes))
		}
	}
	if n := heartbeat(t, st, "node-b", timeout); !slices.Equal(alive(n), []string{"+node-a", "+node-b"}) || !n[1].StartedAt.Equal(started) {
		t.Fatalf("node-b after beating again: %v, started %v (was %v)", alive(n), n[1].StartedAt, started)
	}
	forget := time.Now().Add(15 * timeout)
	for len(heartbeat(t, st, "node-a", timeout)) == 2 {
		if time.Now().After(forget) {
			t.Fatalf("node-b not forgotten %v after its last heartbeat", 15*timeout)
		}
		time.Sleep(timeout)
	}
	if err := st.LeaveCluster(t.Context(), "node-a"); err != nil {
		t.Fatalf("LeaveCluster: %v", err)
	}
	if got := alive(heartbeat(t, st, "node-c", timeout)); !slices.Equal(got, []string{"+node-c"}) {
		t.Fatalf("nodes after node-a left: %v", got)
	}
	// Another tenant sees none of them.
	if got := alive(heartbeat(t, h.store(t, newTenant()), "node-x", timeout)); !slices.Equal(got, []string{"+node-x"}) {
		t.Fatalf("another tenant's nodes: %v", got)
	}
}

func leasePartitions(t *testing.T, st store.Store, node string, d time.Duration, renew []store.PartitionLease, acquire ...int32) []store.PartitionLease {
	t.Helper()
	ls, err := st.LeasePartitions(t.Context(), &store.PartitionLeaseParams{Node: node, Renew: renew, Acquire: acquire, Duration: d})
	if err != nil {
		t.Fatalf("LeasePartitions(%s): %v", node, err)
	}
	for _, l := range ls {
		if l.Owner != node || !l.Held || l.Epoch <= 0 {
			t.Fatalf("LeasePartitions(%s) returned %+v", node, l)
		}
	}
	return ls
}

// leased describes leases as partition@epoch.
func leased(ls []store.PartitionLease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%d@%d", l.Partition, l.Epoch))
	}
	return out
}

func testLeases(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	const long = time.Minute
	a := leasePartitions(t, st, "node-a", long, nil, 2, 0, 1)
	if got := leased(a); !slices.Equal(got, []string{"0@1", "1@1", "2@1"}) {
		t.Fatalf("node-a acquired %v", got)
	}
	// Held partitions cannot be taken; free ones can.
	if got := leased(leasePartitions(t, st, "node-b", long, nil, 1, 2, 3)); !slices.Equal(got, []string{"3@1"}) {
		t.Fatalf("node-b acquired %v beside node-a's leases", got)
	}
	// A renewal extends a lease; a release frees it at once, for a new
	// epoch.
	before := a[0].Until
	time.Sleep(5 * time.Millisecond)
	renewed := leasePartitions(t, st, "node-a", long, a[:1])
	if len(renewed) != 1 || !renewed[0].Until.After(before) || renewed[0].Epoch != 1 {
		t.Fatalf("renewal returned %+v, lease was until %v", renewed, before)
	}
	if err := st.ReleasePartitions(ctx, "node-a", a[1:2]); err != nil {
		t.Fatalf("ReleasePartitions: %v", err)
	}
	// A release under someone else's name or an old epoch changes nothing.
	if err := st.ReleasePartitions(ctx, "node-b", a[2:3]); err != nil {
		t.Fatalf("ReleasePartitions by another node: %v", err)
	}
	if got := leased(leasePartitions(t, st, "node-b", long, nil, 1, 2)); !slices.Equal(got, []string{"1@2"}) {
		t.Fatalf("node-b acquired %v after node-a released partition 1", got)
	}
	// node-a renews what it holds and learns what it lost.
	if got := leased(leasePartitions(t, st, "node-a", long, a)); !slices.Equal(got, []string{"0@1", "2@1"}) {
		t.Fatalf("node-a renewed %v", got)
	}
	ls, err := st.Leases(ctx)
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	var owners []string
	for _, l := range ls {
		owners = append(owners, fmt.Sprintf("%d@%d:%s", l.Partition, l.Epoch, l.Owner))
		if !l.Held || l.Until.IsZero() {
			t.Errorf("lease %+v not held", l)
		}
	}
	if want := []string{"0@1:node-a", "1@2:node-b", "2@1:node-a", "3@1:node-b"}; !slices.Equal(owners, want) {
		t.Fatalf("Leases = %v, want %v", owners, want)
	}
	// Progress is written under the current epoch only.
	wantErr(t, "SaveProgress under node-a's released epoch", saveProgress(st, store.ProgressParams{Partition: 1, Epoch: 1}), sluicetype.ErrFenced)
	if err := saveProgress(st, store.ProgressParams{Partition: 1, Epoch: 2}); err != nil {
		t.Fatalf("SaveProgress under node-b's epoch: %v", err)
	}
}

func testPartitionLeaseExpiry(t *testing.T, h *harness) {
	_, st := h.setup(t)
	const short = 300 * time.Millisecond
	a := leasePartitions(t, st, "node-a", short, nil, 5)
	if len(a) != 1 {
		t.Fatalf("node-a acquired %v", leased(a))
	}
	if got := leasePartitions(t, st, "node-b", time.Minute, nil, 5); len(got) != 0 {
		t.Fatalf("node-b took a lease that had not ended: %v", leased(got))
	}
	// node-a is paused past its lease: node-b takes the partition under a
	// new epoch, and node-a can neither renew nor write progress.
	deadline := time.Now().Add(10 * time.Second)
	var b []store.PartitionLease
	for len(b) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("node-b could not take the partition 10 s after node-a's lease ended")
		}
		time.Sleep(50 * time.Millisecond)
		b = leasePartitions(t, st, "node-b", time.Minute, nil, 5)
	}
	if b[0].Epoch != a[0].Epoch+1 {
		t.Fatalf("node-b took the partition under epoch %d, node-a held %d", b[0].Epoch, a[0].Epoch)
	}
	if got := leasePartitions(t, st, "node-a", time.Minute, a); len(got) != 0 {
		t.Fatalf("node-a renewed a lease node-b took: %v", leased(got))
	}
	wantErr(t, "SaveProgress of the paused owner", saveProgress(st, store.ProgressParams{Partition: 5, Epoch: a[0].Epoch, Checkpoint: 0}), sluicetype.ErrFenced)
	// A lease that ended but that nobody took can still be renewed: its
	// epoch never moved.
	c := leasePartitions(t, st, "node-c", short, nil, 6)
	time.Sleep(2 * short)
	if got := leasePartitions(t, st, "node-c", time.Minute, c); !slices.Equal(leased(got), leased(c)) {
		t.Fatalf("node-c renewed %v, held %v", leased(got), leased(c))
	}
}

func testInvalidCluster(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	hb := func(p store.HeartbeatParams) error { _, err := st.Heartbeat(ctx, &p); return err }
	wantErr(t, "Heartbeat without a node", hb(store.HeartbeatParams{Timeout: time.Second, Forget: time.Second}), sluicetype.ErrInvalidName)
	wantErr(t, "Heartbeat of a bad node name", hb(store.HeartbeatParams{Node: "a b", Timeout: time.Second, Forget: time.Second}), sluicetype.ErrInvalidName)
	wantErr(t, "Heartbeat without a timeout", hb(store.HeartbeatParams{Node: "n"}), sluicetype.ErrInvalidArgument)
	wantErr(t, "Heartbeat forgetting before the timeout", hb(store.HeartbeatParams{Node: "n", Timeout: time.Second, Forget: time.Millisecond}), sluicetype.ErrInvalidArgument)
	lp := func(p store.PartitionLeaseParams) error { _, err := st.LeasePartitions(ctx, &p); return err }
	wantErr(t, "LeasePartitions without a duration", lp(store.PartitionLeaseParams{Node: "n", Acquire: []int32{1}}), sluicetype.ErrInvalidArgument)
	wantErr(t, "LeasePartitions of a negative partition", lp(store.PartitionLeaseParams{Node: "n", Acquire: []int32{-1}, Duration: time.Second}), sluicetype.ErrInvalidArgument)
	wantErr(t, "LeasePartitions naming a partition twice", lp(store.PartitionLeaseParams{Node: "n", Acquire: []int32{1}, Renew: []store.PartitionLease{{Partition: 1, Epoch: 1}}, Duration: time.Second}), sluicetype.ErrInvalidArgument)
	wantErr(t, "LeasePartitions renewing epoch 0", lp(store.PartitionLeaseParams{Node: "n", Renew: []store.PartitionLease{{Partition: 1}}, Duration: time.Second}), sluicetype.ErrInvalidArgument)
	wantErr(t, "LeaveCluster of a bad name", st.LeaveCluster(ctx, ""), sluicetype.ErrInvalidName)
	wantErr(t, "ReleasePartitions of a bad name", st.ReleasePartitions(ctx, "", nil), sluicetype.ErrInvalidName)
	if ls, err := st.Leases(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("bad calls left leases %v (%v)", ls, err)
	}
}

// Each group leases every partition on its own, under epochs of its own,
// and fences its own writes; the checkpoint stays one per partition,
// never past any group's subscriptions.
func testGroups(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	const d = time.Minute
	if _, err := st.Heartbeat(ctx, &store.HeartbeatParams{Node: "node-a", Consumers: []string{"billing", "audit"}, Timeout: d, Forget: d}); err != nil {
		t.Fatalf("Heartbeat(node-a): %v", err)
	}
	nodes, err := st.Heartbeat(ctx, &store.HeartbeatParams{Node: "node-g", Group: "api.mail", Consumers: []string{"mail"}, Timeout: d, Forget: d})
	if err != nil {
		t.Fatalf("Heartbeat(node-g): %v", err)
	}
	if len(nodes) != 2 || nodes[0].Group != "" || !slices.Equal(nodes[0].Consumers, []string{"billing", "audit"}) ||
		nodes[1].Group != "api.mail" || !slices.Equal(nodes[1].Consumers, []string{"mail"}) {
		t.Fatalf("nodes = %+v, want node-a of the default group and node-g of api.mail with their consumers", nodes)
	}
	lease := func(node, group string, renew []store.PartitionLease, acquire ...int32) []store.PartitionLease {
		t.Helper()
		ls, err := st.LeasePartitions(ctx, &store.PartitionLeaseParams{Node: node, Group: group, Renew: renew, Acquire: acquire, Duration: d})
		if err != nil {
			t.Fatalf("LeasePartitions(%s, %q): %v", node, group, err)
		}
		for _, l := range ls {
			if l.Group != group || l.Owner != node || !l.Held {
				t.Fatalf("LeasePartitions(%s, %q) returned %+v", node, group, l)
			}
		}
		return ls
	}
	a := lease("node-a", "", nil, 1, 2)
	g := lease("node-g", "api.mail", nil, 1)
	if len(a) != 2 || len(g) != 1 || g[0].Epoch != 1 {
		t.Fatalf("leases: default group %v, api.mail %v; want partitions 1 and 2, and 1 at epoch 1", leased(a), leased(g))
	}
	if got := lease("node-x", "", nil, 1); len(got) != 0 {
		t.Fatalf("another node of the default group acquired a held lease: %v", leased(got))
	}
	ls, err := st.Leases(ctx)
	if err != nil || len(ls) != 3 || ls[0].Group != "" || ls[2].Group != "api.mail" || ls[2].Partition != 1 {
		t.Fatalf("Leases = %+v (%v), want the default group's two, then api.mail's", ls, err)
	}

	billing := newStreamSub(t, st, "ns", "k", 1, 0)
	mail := store.NewSubscription{ID: "s" + randHex(6), Consumer: "mail", Namespace: "ns", Key: "k", Partition: 1, Start: map[int32]int64{1: 0}}
	if err := st.CreateSubscription(ctx, &mail); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	save := func(group string, epoch int64, sub string, pos int64) error {
		return saveProgress(st, store.ProgressParams{Group: group, Partition: 1, Epoch: epoch, Checkpoint: pos, Positions: map[string]int64{sub: pos}})
	}
	if err := save("api.mail", g[0].Epoch, mail.ID, 5); err != nil {
		t.Fatalf("SaveProgress under api.mail's lease: %v", err)
	}
	wantProgress(t, st, 1, 0, map[string]int64{billing: 0, mail.ID: 5})
	if err := save("", a[0].Epoch, billing, 3); err != nil {
		t.Fatalf("SaveProgress under the default group's lease: %v", err)
	}
	wantProgress(t, st, 1, 3, map[string]int64{billing: 3, mail.ID: 5})
	wantErr(t, "SaveProgress under an epoch of another group", save("api.mail", g[0].Epoch+1, mail.ID, 6), sluicetype.ErrFenced)
	wantErr(t, "SaveProgress in a group that never leased the partition", save("api.other", 1, mail.ID, 6), sluicetype.ErrFenced)
	fence := &store.Fence{Group: "api.mail", Partition: 1, Epoch: g[0].Epoch}
	if err := st.FaultSubscription(ctx, &store.FaultParams{ID: mail.ID, Reason: "down", Fence: fence}); err != nil {
		t.Fatalf("FaultSubscription under api.mail's lease: %v", err)
	}

	// Giving back one group's lease leaves the other's.
	if err := st.ReleasePartitions(ctx, "node-g", g); err != nil {
		t.Fatalf("ReleasePartitions: %v", err)
	}
	if got := lease("node-a", "", a); len(got) != 2 {
		t.Fatalf("the default group's leases after api.mail gave its back: %v", leased(got))
	}
	g2 := lease("node-h", "api.mail", nil, 1)
	if len(g2) != 1 || g2[0].Epoch != 2 {
		t.Fatalf("api.mail's lease after its release: %v, want partition 1 at epoch 2", leased(g2))
	}
	wantErr(t, "FaultSubscription under api.mail's old lease",
		st.FaultSubscription(ctx, &store.FaultParams{ID: mail.ID, Reason: "", Fence: fence}), sluicetype.ErrFenced)

	wantErr(t, "Heartbeat of a bad group name", func() error {
		_, err := st.Heartbeat(ctx, &store.HeartbeatParams{Node: "n", Group: "a b", Timeout: d, Forget: d})
		return err
	}(), sluicetype.ErrInvalidName)
	wantErr(t, "LeasePartitions of a bad group name", func() error {
		_, err := st.LeasePartitions(ctx, &store.PartitionLeaseParams{Node: "n", Group: "-g", Acquire: []int32{1}, Duration: d})
		return err
	}(), sluicetype.ErrInvalidName)
}

// cacheSizes describes leases as partition:windows/records.
func cacheSizes(ls []store.PartitionLease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%d:%d/%d", l.Partition, l.CacheWindows, l.CachedRecords))
	}
	return out
}

// A renewal stores what the owner's cache of each partition holds, in the
// renewal's own statement, and Leases returns it; a new owner's lease
// and a released one hold 0 until renewed, one that ended keeps its last,
// and a renewal that is not the owner's changes nothing.
func testLeaseCacheSizes(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	const long, short = time.Minute, 300 * time.Millisecond
	listed := func(what string, want ...string) {
		t.Helper()
		ls, err := st.Leases(ctx)
		if err != nil {
			t.Fatalf("Leases: %v", err)
		}
		if got := cacheSizes(ls); !slices.Equal(got, want) {
			t.Fatalf("%s: Leases has caches %v, want %v", what, got, want)
		}
	}
	a := leasePartitions(t, st, "node-a", long, nil, 1, 2)
	if got := cacheSizes(a); !slices.Equal(got, []string{"1:0/0", "2:0/0"}) {
		t.Fatalf("acquired leases with caches %v, want none", got)
	}
	// The largest records a cache may count, and zero.
	const many = int64(1) << 40
	a[0].CacheWindows, a[0].CachedRecords = 3, many
	renewed := leasePartitions(t, st, "node-a", long, a)
	if got, want := cacheSizes(renewed), []string{"1:3/" + fmt.Sprint(many), "2:0/0"}; !slices.Equal(got, want) {
		t.Fatalf("renewal returned caches %v, want %v", got, want)
	}
	listed("after a renewal", "1:3/"+fmt.Sprint(many), "2:0/0")
	a[0].CacheWindows, a[0].CachedRecords, a[1].CacheWindows, a[1].CachedRecords = 1, 0, 2, 96
	leasePartitions(t, st, "node-a", long, a)
	listed("after a second renewal", "1:1/0", "2:2/96")

	// Negative sizes are refused, and nothing is renewed.
	bad := slices.Clone(a)
	bad[1].CachedRecords = -1
	_, err := st.LeasePartitions(ctx, &store.PartitionLeaseParams{Node: "node-a", Renew: bad, Duration: long})
	wantErr(t, "a renewal with negative cached records", err, sluicetype.ErrInvalidArgument)
	bad[1].CachedRecords, bad[1].CacheWindows = 0, -1
	_, err = st.LeasePartitions(ctx, &store.PartitionLeaseParams{Node: "node-a", Renew: bad, Duration: long})
	wantErr(t, "a renewal with negative cache windows", err, sluicetype.ErrInvalidArgument)
	// Another node, or an old epoch, renews nothing and stores nothing.
	other := []store.PartitionLease{{Partition: 1, Epoch: a[0].Epoch, CacheWindows: 9, CachedRecords: 9}}
	if got := leasePartitions(t, st, "node-b", long, other); len(got) != 0 {
		t.Fatalf("node-b renewed node-a's lease: %v", leased(got))
	}
	other[0].Epoch = a[0].Epoch + 1
	if got := leasePartitions(t, st, "node-a", long, other); len(got) != 0 {
		t.Fatalf("node-a renewed under an epoch it never held: %v", leased(got))
	}
	listed("after renewals that were not the owner's", "1:1/0", "2:2/96")

	// A release forgets the cache; so does a new owner of a lease that
	// ended, which kept its last until then.
	if err := st.ReleasePartitions(ctx, "node-a", a[:1]); err != nil {
		t.Fatalf("ReleasePartitions: %v", err)
	}
	listed("after a release", "1:0/0", "2:2/96")
	c := leasePartitions(t, st, "node-a", short, nil, 3)
	c[0].CacheWindows, c[0].CachedRecords = 4, 7
	leasePartitions(t, st, "node-a", short, c)
	listed("after a short renewal", "1:0/0", "2:2/96", "3:4/7")
	deadline := time.Now().Add(10 * time.Second)
	var b []store.PartitionLease
	for len(b) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("node-b could not take partition 3 10 s after node-a's lease ended")
		}
		time.Sleep(50 * time.Millisecond)
		if ls, err := st.Leases(ctx); err == nil && len(ls) == 3 && !ls[2].Held {
			if got := cacheSizes(ls[2:]); !slices.Equal(got, []string{"3:4/7"}) {
				t.Fatalf("a lease that ended has caches %v, want its last renewal's", got)
			}
		}
		b = leasePartitions(t, st, "node-b", long, nil, 3)
	}
	listed("after node-b took partition 3", "1:0/0", "2:2/96", "3:0/0")
	b[0].CacheWindows, b[0].CachedRecords = 1, 5
	leasePartitions(t, st, "node-b", long, b)
	listed("after node-b renewed", "1:0/0", "2:2/96", "3:1/5")
}
