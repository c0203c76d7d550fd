package sqlite

import (
	"database/sql"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestLeaseCost checks that leasing B messages costs
// O(log K + B) (docs/architecture.md, "Leases cost") whatever the number of in-flight and scheduled rows, by the
// plans SQLite makes for the queries a lease (and a settle) runs, on a
// queue loaded by storetest.LoadBacklog: each reaches sluice_messages
// through an index whose range starts at the rows it wants (ready rows,
// due rows, or the rows named by sequence number), and none scans the
// table.
func TestLeaseCost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cost.db")
	b, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	st, err := b.Store(store.Tenant{Service: "svc", Provider: "cost"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.LoadBacklog(t, st, "q")

	db, err := sql.Open(moderncDriver.Name, moderncDriver.DSN(path, ConnOptions{Synchronous: "FULL", ReadOnly: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sub, err := fs.Sub(queries, "queries")
	if err != nil {
		t.Fatal(err)
	}
	q, err := engine.ParseQueries(sub)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for _, c := range []struct {
		name string
		args []any
		want string // the index range sluice_messages is searched by
	}{
		{"SelectDue", []any{"svc", "cost", "q", now, 256}, "sluice_messages_due (service=? AND provider=? AND queue=? AND visible_at"},
		{"SelectReady", []any{"svc", "cost", "q", now, 32}, "sluice_messages_ready (service=? AND provider=? AND queue=? AND state=?)"},
		{"LeaseMessages", []any{7, now + 60000, "svc", "cost", "q", "[6001,6002]"}, "(service=? AND provider=? AND queue=? AND seq=?)"},
		{"SelectHeld", []any{"svc", "cost", "q", now, "[1,2]"}, "(service=? AND provider=? AND queue=? AND seq=?)"},
		{"DeleteMessages", []any{"svc", "cost", "q", "[1,2]"}, "(service=? AND provider=? AND queue=? AND seq=?)"},
		{"MakeReady", []any{"svc", "cost", "q", "[1,2]"}, "(service=? AND provider=? AND queue=? AND seq=?)"},
		{"ExtendLeases", []any{now + 60000, "svc", "cost", "q", "[1,2]"}, "(service=? AND provider=? AND queue=? AND seq=?)"},
		{"MoveToDeadLetters", []any{"r", "d", now, nil, "svc", "cost", "q", "[1,2]"}, "(service=? AND provider=? AND queue=? AND seq=?)"},
		{"ActivateScheduled", []any{"svc", "cost", "q", `[{"o":1,"n":9001},{"o":2,"n":9002}]`, now}, "(service=? AND provider=? AND queue=? AND seq=?)"},
		{"ReleaseMessages", []any{"svc", "cost", "q", "[1,2]"}, "(service=? AND provider=? AND queue=? AND seq=?)"},
	} {
		rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q[c.name], c.args...)
		if err != nil {
			t.Fatalf("EXPLAIN QUERY PLAN %s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		if strings.Contains(text, "SCAN sluice_messages") || !strings.Contains(text, c.want) {
			t.Errorf("%s: plan\n%s\nwant sluice_messages searched by %s, never scanned", c.name, text, c.want)
		}
	}
}

// TestReadStreamCost checks what reading one stream's records costs on
// SQLite, which has no index of streams (migration 0015): on records
// loaded by storetest.LoadInterleavedStreams, the plan for
// ReadStreamRecords walks the partition's primary-key range after the
// position, in order, with no sort, so it stops at the limit; the rows it
// passes over are the other streams' records in that range, read inside
// the database.
func TestReadStreamCost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cost.db")
	b, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	st, err := b.Store(store.Tenant{Service: "svc", Provider: "cost"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.LoadInterleavedStreams(t, st)

	db, err := sql.Open(moderncDriver.Name, moderncDriver.DSN(path, ConnOptions{Synchronous: "FULL", ReadOnly: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sub, err := fs.Sub(queries, "queries")
	if err != nil {
		t.Fatal(err)
	}
	q, err := engine.ParseQueries(sub)
	if err != nil {
		t.Fatal(err)
	}
	args := []any{"svc", "cost", 0, storetest.InterleavedNamespace, storetest.InterleavedKey, 1000, int64(math.MaxInt64), 10}
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q["ReadStreamRecords"], args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN ReadStreamRecords: %v", err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	rows.Close()
	text := strings.Join(plan, "\n")
	// No index of streams on SQLite (migration 0015): the partition's
	// primary-key range after the position (through the bound), in its
	// order, with no sort.
	const want = "SEARCH sluice_records USING INDEX sqlite_autoindex_sluice_records_1 (service=? AND provider=? AND partition=? AND position>? AND position<?)"
	if text != want {
		t.Errorf("ReadStreamRecords: plan\n%s\nwant only\n%s", text, want)
	}

	storetest.CheckInterleavedReads(t, st)
}

// TestSubscriptionListingCost checks that listing a stream's
// subscriptions by consumer reads the page, whatever the other
// consumers' subscriptions (storetest.LoadSubscriptions): the query
// reaches sluice_stream_subscriptions through a range of the index
// sluice_stream_subscriptions_consumer, in its order, and never scans
// the table or sorts.
func TestSubscriptionListingCost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cost.db")
	b, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	st, err := b.Store(store.Tenant{Service: "svc", Provider: "cost"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.LoadSubscriptions(t, st, "ns", "k")
	db, err := sql.Open(moderncDriver.Name, moderncDriver.DSN(path, ConnOptions{Synchronous: "FULL", ReadOnly: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sub, err := fs.Sub(queries, "queries")
	if err != nil {
		t.Fatal(err)
	}
	q, err := engine.ParseQueries(sub)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.ListSubscriptionsParams{
		{Namespace: "ns", Key: "k", Consumer: "mine", Max: 100},
		{Namespace: "ns", Key: "k", Consumer: "mi", Prefix: true, Max: 100},
		{Namespace: "ns", Key: "", Consumer: "mine", Max: 100},
		{Namespace: "ns", Key: "k", Prefix: true, AfterConsumer: "a-0500", AfterID: "s00500", Max: 10},
	} {
		from, to := p.ConsumerRange()
		rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q["ListSubscriptions"],
			"svc", "cost", p.Namespace, p.Key, len(p.Key), from, to, p.AfterConsumer, p.AfterID, p.Max)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		t.Logf("%+v:\n%s", p, text)
		if strings.Contains(text, "SCAN") || strings.Contains(text, "TEMP B-TREE") ||
			!strings.Contains(text, "sluice_stream_subscriptions_consumer (service=? AND provider=? AND namespace=? AND stream_key=? AND") {
			t.Errorf("ListSubscriptions(%+v): plan\n%s\nwant a range of sluice_stream_subscriptions_consumer, in its order", p, text)
		}
	}
}
