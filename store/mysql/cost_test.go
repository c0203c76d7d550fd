package mysql

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestLeaseCost checks that leasing B messages costs
// O(log K + B) (docs/architecture.md, "Leases cost") whatever the number of in-flight and scheduled rows: with
// 4,000 messages leased and 2,000 scheduled ahead of 32 ready ones, each
// query a lease or a settle runs reads a few rows of sluice_messages per message it
// takes, not the rows it must pass over. Rows read are counted by
// MariaDB's ANALYZE FORMAT=JSON (rows read by each access to the table,
// times its loops), in a transaction that is rolled back.
func TestLeaseCost(t *testing.T) {
	dsn := freshDatabase(t)
	b := openBackend(t, dsn)
	tenant := store.Tenant{Service: "svc", Provider: "cost"}
	st, err := b.Store(tenant)
	if err != nil {
		t.Fatal(err)
	}
	storetest.LoadBacklog(t, st, "q")
	const inflight, scheduled, ready = storetest.BacklogInFlight, storetest.BacklogScheduled, storetest.BacklogReady

	db := analyzedMariaDB(t, dsn, "sluice_messages")
	q := namedQueries(t)
	now := time.Now().UnixMilli()
	first := int64(inflight + scheduled + 1) // the ready messages' sequence numbers
	var rows []string
	for i := range int64(ready) {
		rows = append(rows, fmt.Sprintf(`{"s":%d,"t":7,"u":%d}`, first+i, now+60000))
	}
	for _, c := range []struct {
		name string
		args []any
	}{
		{"GetQueue", []any{tenant.Service, tenant.Provider, "q"}},
		{"SelectDue", []any{tenant.Service, tenant.Provider, "q", now, 256}},
		{"SelectReady", []any{tenant.Service, tenant.Provider, "q", now, ready}},
		{"LeaseMessages", []any{tenant.Service, tenant.Provider, "q", "[" + strings.Join(rows, ",") + "]"}},
		{"SelectHeld", []any{tenant.Service, tenant.Provider, "q", now, "[1,2]"}},
		{"DeleteMessages", []any{tenant.Service, tenant.Provider, "q", "[1,2]"}},
		{"ActivateScheduled", []any{tenant.Service, tenant.Provider, "q", `[{"o":1,"n":90001},{"o":2,"n":90002}]`, now}},
		{"ReleaseMessages", []any{tenant.Service, tenant.Provider, "q", "[1,2]"}},
	} {
		read := rowsRead(t, db, q[c.name], c.args)
		t.Logf("%s read %d rows", c.name, read)
		if read > 4*ready+16 {
			t.Errorf("%s read %d rows of sluice_messages with %d in flight and %d scheduled; want at most %d",
				c.name, read, inflight, scheduled, 4*ready+16)
		}
	}
}

// rowsRead runs query under ANALYZE FORMAT=JSON in a transaction it rolls
// back and returns how many rows of sluice_messages it read.
func rowsRead(t *testing.T, db *sql.DB, query string, args []any) int {
	t.Helper()
	return rowsReadOf(t, db, query, args, "sluice_messages", "m")
}

// rowsReadOf is rowsRead for the accesses to the tables (or aliases)
// named.
func rowsReadOf(t *testing.T, db *sql.DB, query string, args []any, names ...string) int {
	t.Helper()
	return tableReads(analyze(t, db, query, args), names)
}

// analyze runs query under ANALYZE FORMAT=JSON in a transaction it rolls
// back and returns the decoded plan.
func analyze(t *testing.T, db *sql.DB, query string, args []any) any {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var plan string
	if err := tx.QueryRowContext(ctx, "ANALYZE FORMAT=JSON "+query, args...).Scan(&plan); err != nil {
		t.Fatalf("ANALYZE %s: %v", strings.SplitN(query, "\n", 2)[0], err)
	}
	var doc any
	if err := json.Unmarshal([]byte(plan), &doc); err != nil {
		t.Fatalf("ANALYZE output: %v", err)
	}
	return doc
}

// tableReads sums r_loops × r_rows over the accesses to the tables named
// (sluice_messages, or m, its alias in every query) anywhere in a plan.
func tableReads(v any, names []string) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		if name, ok := v["table_name"].(string); ok && slices.Contains(names, name) {
			loops, _ := v["r_loops"].(float64)
			rows, _ := v["r_rows"].(float64)
			n += int(loops * rows)
		}
		for _, c := range v {
			n += tableReads(c, names)
		}
	case []any:
		for _, c := range v {
			n += tableReads(c, names)
		}
	}
	return n
}

// analyzedMariaDB opens dsn for counting rows read, which needs MariaDB's
// ANALYZE FORMAT=JSON (the test skips on another server), with fresh
// statistics of the given tables.
func analyzedMariaDB(t *testing.T, dsn, tables string) *sql.DB {
	t.Helper()
	db := rawDB(t, dsn)
	var version string
	if err := db.QueryRowContext(t.Context(), "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(version, "MariaDB") {
		t.Skipf("counting rows read uses MariaDB's ANALYZE FORMAT=JSON; the server is %s", version)
	}
	if _, err := db.ExecContext(t.Context(), "ANALYZE TABLE "+tables); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestReadStreamCost checks that reading one stream's records costs
// O(log n + records returned) whatever the partition's other streams hold
// (issue 16): on records loaded by storetest.LoadInterleavedStreams, where
// one record in 50 is the stream's, ReadStreamRecords reads about as many
// rows of sluice_records as it returns, by a range of
// sluice_records_stream (whose key is a prefix of stream_key, see
// migration 0015) read in position order: no filesort, so it stops at the
// limit.
func TestReadStreamCost(t *testing.T) {
	dsn := freshDatabase(t)
	b := openBackend(t, dsn)
	tenant := store.Tenant{Service: "svc", Provider: "cost"}
	st, err := b.Store(tenant)
	if err != nil {
		t.Fatal(err)
	}
	storetest.LoadInterleavedStreams(t, st)
	storetest.CheckInterleavedReads(t, st)

	db := analyzedMariaDB(t, dsn, "sluice_records")
	q := namedQueries(t)
	for _, c := range []struct {
		after int64
		max   int
	}{{0, 1000}, {0, 10}, {1000, 10}, {4000, 1000}} {
		plan := analyze(t, db, q["ReadStreamRecords"], []any{tenant.Service, tenant.Provider, 0,
			storetest.InterleavedNamespace, storetest.InterleavedKey, c.after, int64(math.MaxInt64), c.max})
		read := tableReads(plan, []string{"sluice_records"})
		returned := min(c.max, int(storetest.InterleavedRecords-c.after)/storetest.InterleavedEvery)
		text, _ := json.Marshal(plan)
		t.Logf("after %d, max %d: read %d rows of sluice_records for %d", c.after, c.max, read, returned)
		if read > returned+1 {
			t.Errorf("after %d, max %d: read %d rows of sluice_records for %d returned, among %d records of the partition",
				c.after, c.max, read, returned, storetest.InterleavedRecords)
		}
		if !strings.Contains(string(text), `"key":"sluice_records_stream"`) || strings.Contains(string(text), "filesort") {
			t.Errorf("after %d, max %d: plan %s\nwant a range of sluice_records_stream and no filesort", c.after, c.max, text)
		}
	}
}

// TestSubscriptionListingCost checks that listing a stream's
// subscriptions by consumer reads the page, whatever the other
// consumers' subscriptions (storetest.LoadSubscriptions): each listing
// reads at most its page and a row past it, by ANALYZE FORMAT=JSON.
func TestSubscriptionListingCost(t *testing.T) {
	dsn := freshDatabase(t)
	b := openBackend(t, dsn)
	tenant := store.Tenant{Service: "svc", Provider: "cost"}
	st, err := b.Store(tenant)
	if err != nil {
		t.Fatal(err)
	}
	storetest.LoadSubscriptions(t, st, "ns", "k")
	db := analyzedMariaDB(t, dsn, "sluice_stream_subscriptions")
	q := namedQueries(t)
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
		read := rowsReadOf(t, db, q["ListSubscriptions"],
			[]any{tenant.Service, tenant.Provider, c.p.Namespace, c.p.Key, len(c.p.Key), from, to, c.p.AfterConsumer, c.p.AfterID, c.p.Max},
			"sluice_stream_subscriptions", "s")
		t.Logf("%+v read %d rows", c.p, read)
		if read > c.page+1 {
			t.Errorf("ListSubscriptions(%+v) read %d rows of sluice_stream_subscriptions with %d of other consumers; want at most %d",
				c.p, read, 2*storetest.SubscriptionsHidden, c.page+1)
		}
	}
}
