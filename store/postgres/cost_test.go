package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestLeaseCost checks that leasing B messages costs
// O(log K + B) (docs/architecture.md, "Leases cost") whatever the number of in-flight and scheduled rows: with
// 4,000 messages leased and 2,000 scheduled ahead of 32 ready ones, each
// query a lease or a settle runs reads a few rows of sluice_messages per message it
// takes, not the rows it must pass over. Rows read are counted from
// EXPLAIN ANALYZE (rows returned by each scan of the table, times its
// loops, plus the rows its filters removed), in a transaction that is
// rolled back.
func TestLeaseCost(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	b := openSchema(t, dsn, schema)
	ctx := t.Context()
	tenant := store.Tenant{Service: "svc", Provider: "cost"}
	st, err := b.Store(tenant)
	if err != nil {
		t.Fatal(err)
	}
	storetest.LoadBacklog(t, st, "q")
	const inflight, scheduled, ready = storetest.BacklogInFlight, storetest.BacklogScheduled, storetest.BacklogReady

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET search_path = "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	// Fresh statistics, so that plans are the ones a running system gets.
	if _, err := conn.Exec(ctx, "ANALYZE sluice_messages"); err != nil {
		t.Fatal(err)
	}
	q, err := engine.ParseQueries(os.DirFS("queries"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	requests := `[{"i":0,"n":32,"t":7,"v":60000}]`
	for _, c := range []struct {
		name string
		args []any
	}{
		{"GetQueue", []any{tenant.Service, tenant.Provider, "q"}},
		{"SelectDue", []any{tenant.Service, tenant.Provider, "q", now, 256}},
		{"SelectReady", []any{tenant.Service, tenant.Provider, "q", now, 32}},
		{"LeaseAlone", []any{tenant.Service, tenant.Provider, "q", requests, 32}},
		{"SelectHeld", []any{tenant.Service, tenant.Provider, "q", now, []int64{1, 2}}},
		{"DeleteMessages", []any{tenant.Service, tenant.Provider, "q", []int64{1, 2}}},
		{"CompleteMessages", []any{tenant.Service, tenant.Provider, "q", `[{"s":1,"t":7},{"s":2,"t":7}]`}},
		{"LeaseMessages", []any{tenant.Service, tenant.Provider, "q", `[{"s":6001,"t":7,"u":1},{"s":6002,"t":7,"u":1}]`}},
		{"ActivateScheduled", []any{tenant.Service, tenant.Provider, "q", `[{"o":1,"n":90001},{"o":2,"n":90002}]`, now}},
		{"ReleaseMessages", []any{tenant.Service, tenant.Provider, "q", []int64{1, 2}}},
	} {
		read := rowsRead(t, conn, q[c.name], c.args)
		t.Logf("%s read %d rows", c.name, read)
		if read > 4*ready+16 {
			t.Errorf("%s read %d rows of sluice_messages with %d in flight and %d scheduled; want at most %d",
				c.name, read, inflight, scheduled, 4*ready+16)
		}
	}
}

// rowsRead runs query under EXPLAIN ANALYZE in a transaction it rolls back
// and returns how many rows of sluice_messages its scans read.
func rowsRead(t *testing.T, conn *pgx.Conn, query string, args []any) int {
	t.Helper()
	return scanned(explain(t, conn, query, args), "sluice_messages")
}

// explain runs query under EXPLAIN ANALYZE in a transaction it rolls back
// and returns the top node of its plan.
func explain(t *testing.T, conn *pgx.Conn, query string, args []any) map[string]any {
	t.Helper()
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var plan string
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&plan); err != nil {
		t.Fatalf("EXPLAIN %s: %v", firstLine(query), err)
	}
	var doc []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) == 0 {
		t.Fatalf("EXPLAIN output: %v", err)
	}
	return doc[0].Plan
}

// scanned sums, over the plan's nodes that scan the table named, the rows
// they returned (per loop, times the loops) and the rows their filters
// removed.
func scanned(node map[string]any, table string) int {
	n := 0
	if node["Relation Name"] == table && strings.Contains(fmt.Sprint(node["Node Type"]), "Scan") {
		num := func(k string) float64 { f, _ := node[k].(float64); return f }
		n += int(num("Actual Rows")*num("Actual Loops") + num("Rows Removed by Filter") + num("Rows Removed by Index Recheck"))
	}
	for _, c := range children(node) {
		n += scanned(c, table)
	}
	return n
}

// children returns a plan node's child nodes.
func children(node map[string]any) []map[string]any {
	var out []map[string]any
	plans, _ := node["Plans"].([]any)
	for _, c := range plans {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// nodes lists each node of a plan, depth first, as its type and the index
// it scans, if any.
func nodes(node map[string]any) []string {
	n := fmt.Sprint(node["Node Type"])
	if ix, ok := node["Index Name"].(string); ok {
		n += " " + ix
	}
	out := []string{n}
	for _, c := range children(node) {
		out = append(out, nodes(c)...)
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestReadStreamCost checks that reading one stream's records costs
// O(log n + records returned) whatever the partition's other streams hold
// (issue 16): on records loaded by storetest.LoadInterleavedStreams, where
// one record in 50 is the stream's, ReadStreamRecords reads about as many
// rows of sluice_records as it returns, through sluice_records_stream. The
// planner takes an index scan in position order that stops at the limit,
// or, when it expects fewer of the stream's rows than the limit, a bitmap
// scan of the stream's range and a sort of what it found; either way it
// reads none of the other streams' rows.
func TestReadStreamCost(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	b := openSchema(t, dsn, schema)
	ctx := t.Context()
	tenant := store.Tenant{Service: "svc", Provider: "cost"}
	st, err := b.Store(tenant)
	if err != nil {
		t.Fatal(err)
	}
	storetest.LoadInterleavedStreams(t, st)
	storetest.CheckInterleavedReads(t, st)

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET search_path = "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE sluice_records"); err != nil {
		t.Fatal(err)
	}
	q, err := engine.ParseQueries(os.DirFS("queries"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after int64
		max   int
	}{{0, 1000}, {0, 10}, {1000, 10}, {4000, 1000}} {
		plan := explain(t, conn, q["ReadStreamRecords"], []any{tenant.Service, tenant.Provider, 0,
			storetest.InterleavedNamespace, storetest.InterleavedKey, c.after, int64(math.MaxInt64), c.max})
		returned := int(plan["Actual Rows"].(float64))
		read := scanned(plan, "sluice_records")
		shape := nodes(plan)
		t.Logf("after %d, max %d: read %d rows of sluice_records for %d; plan %v", c.after, c.max, read, returned, shape)
		if read > returned+1 {
			t.Errorf("after %d, max %d: read %d rows of sluice_records for %d returned, among %d records of the partition",
				c.after, c.max, read, returned, storetest.InterleavedRecords)
		}
		if !slices.Contains(shape, "Index Scan sluice_records_stream") && !slices.Contains(shape, "Bitmap Index Scan sluice_records_stream") {
			t.Errorf("after %d, max %d: plan %v, want a scan of sluice_records_stream", c.after, c.max, shape)
		}
	}
}

// rowsReadOf is rowsRead for the rows of table.
func rowsReadOf(t *testing.T, conn *pgx.Conn, table, query string, args []any) int {
	t.Helper()
	return scanned(explain(t, conn, query, args), table)
}

// TestSubscriptionListingCost checks that listing a stream's
// subscriptions by consumer reads the page, whatever the other
// consumers' subscriptions (storetest.LoadSubscriptions): each listing
// reads at most its page and a row past it, by EXPLAIN ANALYZE.
func TestSubscriptionListingCost(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	b := openSchema(t, dsn, schema)
	ctx := t.Context()
	tenant := store.Tenant{Service: "svc", Provider: "cost"}
	st, err := b.Store(tenant)
	if err != nil {
		t.Fatal(err)
	}
	storetest.LoadSubscriptions(t, st, "ns", "k")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET search_path = "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE sluice_stream_subscriptions"); err != nil {
		t.Fatal(err)
	}
	q, err := engine.ParseQueries(os.DirFS("queries"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    store.ListSubscriptionsParams
		page int
	}{
		{store.ListSubscriptionsParams{Namespace: "ns", Key: "k", Consumer: "mine", Max: 100}, storetest.SubscriptionsMine},
		{store.ListSubscriptionsParams{Namespace: "ns", Key: "k", Consumer: "mi", Prefix: true, Max: 100}, storetest.SubscriptionsMine},
		{store.ListSubscriptionsParams{Namespace: "ns", Key: "", Consumer: "mine", Max: 100}, 0},
		{store.ListSubscriptionsParams{Namespace: "ns", Key: "k", Prefix: true, AfterConsumer: "a-0500", AfterID: "s00500", Max: 10}, 10},
	} {
		from, to := c.p.ConsumerRange()
		read := rowsReadOf(t, conn, "sluice_stream_subscriptions", q["ListSubscriptions"],
			[]any{tenant.Service, tenant.Provider, c.p.Namespace, c.p.Key, len(c.p.Key), from, to, c.p.AfterConsumer, c.p.AfterID, c.p.Max})
		t.Logf("%+v read %d rows", c.p, read)
		if read > c.page+1 {
			t.Errorf("ListSubscriptions(%+v) read %d rows of sluice_stream_subscriptions with %d of other consumers; want at most %d",
				c.p, read, 2*storetest.SubscriptionsHidden, c.page+1)
		}
	}
}
