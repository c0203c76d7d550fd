package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// cluster status lists nodes and partitions; with events published, a
// partition's head shows them.
func TestClusterStatus(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		part := sluice.PartitionOf(sluice.StreamID{Namespace: "orders", Key: "k"}, 16)
		w.ok(t, "stream", "publish", "orders", "k", "one", "two")
		out := w.ok(t, "cluster", "status")
		wantContains(t, "cluster status", out, "no stream nodes", "PARTITION  GROUP    OWNER  HELD  EPOCH  HEAD  CHECKPOINT  LAG")
		if n := strings.Count(out, "\n"); n != 1+1+1+16 {
			t.Errorf("cluster status printed %d lines, want 19:\n%s", n, out)
		}
		parts := jsonLines(t, w.ok(t, "cluster", "status", "--json"))
		if len(parts) != 16 {
			t.Fatalf("cluster status --json: %d lines, want 16 partitions", len(parts))
		}
		head := 2.0
		p := parts[part]
		if p["kind"] != "partition" || p["partition"] != float64(part) || p["head"] != head || p["lag"] != head || p["checkpoint"] != 0.0 {
			t.Errorf("partition %d: %v", part, p)
		}
	})
}

// stats prints one entity's counts, or every queue's and subscription's.
func TestStats(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.ok(t, "queue", "create", "jobs")
		w.ok(t, "queue", "create", "idle")
		w.ok(t, "topic", "create", "news")
		w.ok(t, "subscription", "create", "news", "reader")
		w.ok(t, "send", "jobs", "a", "b", "c")
		w.ok(t, "send", "jobs", "later", "--schedule-in", "1h")
		w.ok(t, "send", "news", "headline")
		w.ok(t, "receive", "jobs", "--no-complete")
		w.ok(t, "receive", "jobs", "--dead-letter", "Bad")

		out := w.ok(t, "stats")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[0], "ENTITY ") || !strings.HasPrefix(lines[1], "idle ") ||
			!strings.HasPrefix(lines[2], "jobs ") || !strings.HasPrefix(lines[3], "news/Subscriptions/reader ") {
			t.Fatalf("stats:\n%s", out)
		}
		if f := strings.Fields(lines[2]); len(f) != 9 || strings.Join(f[1:7], " ") != "1 0 1 1 0 1" {
			t.Errorf("stats of jobs: %q", lines[2])
		}
		all := jsonLines(t, w.ok(t, "stats", "--json"))
		if len(all) != 3 || all[2]["entity"] != "news/Subscriptions/reader" || all[2]["topic"] != "news" || all[2]["active"] != 1.0 {
			t.Fatalf("stats --json: %v", all)
		}
		one := jsonLines(t, w.ok(t, "stats", "jobs", "--json"))
		if len(one) != 1 || one[0]["entity"] != "jobs" || one[0]["active"] != 1.0 || one[0]["scheduled"] != 1.0 ||
			one[0]["inFlight"] != 1.0 || one[0]["deadLettered"] != 1.0 {
			t.Fatalf("stats jobs --json: %v", one)
		}
		w.fails(t, ExitNotFound, "", "stats", "nosuchqueue")
	})
}

// The exit codes scripts rely on.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, w where) {
		w.fails(t, ExitUsage, "sluice queue create: flag provided but not defined: -bogus", "queue", "create", "q", "--bogus")
		w.fails(t, ExitUsage, "missing arguments: want NAME", "queue", "create")
		w.fails(t, ExitUsage, `unexpected arguments ["extra"]`, "queue", "show", "q", "extra")
		w.fails(t, ExitNotFound, "sluice send: ", "send", "nosuchqueue", "x")
		w.fails(t, ExitNotFound, "sluice receive: ", "receive", "nosuchqueue")
		w.fails(t, ExitNotFound, "sluice peek: ", "peek", "nosuchqueue")
		w.ok(t, "queue", "create", "empty")
		w.fails(t, ExitNothing, "sluice receive: empty: no message to receive", "receive", "empty")
		w.fails(t, ExitNothing, "no message to receive", "receive", "empty", "--wait", "100ms")
	})
	db := filepath.Join(t.TempDir(), "x.db")
	w := where{name: "none"}
	w.fails(t, ExitUsage, "exclude each other", "queue", "list", "--db", db, "--server", "http://127.0.0.1:1")
	w.fails(t, ExitUsage, "--server", "queue", "list", "--server", "ftp://x")
}

// A server with keys refuses a missing or wrong token, and a key without
// the permission, with exit code 5.
func TestExitRefused(t *testing.T) {
	t.Parallel()
	const admin, reader = "admin-token-0123456789", "reader-token-0123456789"
	url := startServer(t,
		server.Key{Name: "admin", Token: admin, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
		server.Key{Name: "reader", Token: reader, Grants: []server.Grant{{Actions: server.Receive, Entities: []string{"*"}}}})
	w := where{name: "server", flags: []string{"--server", url}}
	w.fails(t, ExitRefused, "missing credentials", "queue", "list")
	w.fails(t, ExitRefused, "unknown token", "queue", "list", "--token", "wrong-token-0123456789")
	w.fails(t, ExitRefused, `key "reader" may not manage`, "queue", "create", "q", "--token", reader)
	w.ok(t, "queue", "create", "q", "--token", admin)
	w.fails(t, ExitRefused, "may not send", "send", "q", "x", "--token", reader)
	w.fails(t, ExitNothing, "no message", "receive", "q", "--token", reader)
}

// clusterAPI answers ClusterStatus with a fixed status; the other
// methods of sluiceAPI are not called.
type clusterAPI struct {
	sluiceAPI
	st sluice.ClusterStatus
}

func (a clusterAPI) ClusterStatus(context.Context) (sluice.ClusterStatus, error) { return a.st, nil }

// cluster status prints, for each partition's lease in each group, what
// its owner's cache holds ("-" for a lease nobody holds), in a table and
// as JSON.
func TestClusterStatusOutput(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	a := sluice.GroupLease{Owner: "node-a", Epoch: 3, LeaseUntil: at, Held: true, CacheWindows: 2, CachedRecords: 96}
	mail := sluice.GroupLease{Group: "mail", Owner: "node-m", Epoch: 1, LeaseUntil: at, Held: true, CacheWindows: 1}
	ended := sluice.GroupLease{Owner: "node-b", Epoch: 2, LeaseUntil: at}
	api := clusterAPI{st: sluice.ClusterStatus{
		Nodes: []sluice.ClusterNode{{ID: "node-a", Consumers: []string{"audit"}, StartedAt: at, HeartbeatAt: at, Alive: true,
			Partitions: []int32{0}}},
		Partitions: []sluice.PartitionStatus{
			{Partition: 0, Owner: a.Owner, Epoch: a.Epoch, LeaseUntil: at, Held: true, CacheWindows: 2, CachedRecords: 96,
				Head: 120, Checkpoint: 24, Lag: 96, Leases: []sluice.GroupLease{a, mail},
				Subscriptions: []sluice.SubscriptionLag{
					{ID: "9f2c41d07b3e8a65", Consumer: "audit", Namespace: "shop", Key: "cart-7", Position: 24, Lag: 96},
					{ID: "ns/shop/mail", Consumer: "mail", Namespace: "shop", Position: 110, Lag: 10},
					{ID: "0badc0de", Position: 3, Lag: 117}}},
			{Partition: 1, Owner: ended.Owner, Epoch: ended.Epoch, LeaseUntil: at, Leases: []sluice.GroupLease{ended}},
		}}}
	for _, c := range []struct {
		json bool
		file string
	}{{false, "cluster_status.txt"}, {true, "cluster_status.json"}} {
		var out bytes.Buffer
		if err := opClusterStatus().run(t.Context(), &env{api: api, json: c.json, stdout: &out}, nil); err != nil {
			t.Fatal(err)
		}
		golden(t, c.file, out.Bytes())
	}
}
