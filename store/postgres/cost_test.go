package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	return rowsReadOf(t, conn, "sluice_messages", query, args)
}

// rowsReadOf is rowsRead for the rows of table.
func rowsReadOf(t *testing.T, conn *pgx.Conn, table, query string, args []any) int {
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
	return scanned(doc[0].Plan, table)
}

// scanned sums, over the plan's nodes that scan table, the rows they
// returned (per loop, times the loops) and the rows their filters
// removed.
func scanned(node map[string]any, table string) int {
	n := 0
	if node["Relation Name"] == table && strings.Contains(fmt.Sprint(node["Node Type"]), "Scan") {
		num := func(k string) float64 { f, _ := node[k].(float64); return f }
		n += int(num("Actual Rows")*num("Actual Loops") + num("Rows Removed by Filter") + num("Rows Removed by Index Recheck"))
	}
	children, _ := node["Plans"].([]any)
	for _, c := range children {
		if m, ok := c.(map[string]any); ok {
			n += scanned(m, table)
		}
	}
	return n
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

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
