package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestConformanceRaisingFloors runs the conformance suite with every
// queue's ready floor raised after nearly every lease: whatever a lease,
// a settle or a delete does, a raise may run beside it.
func TestConformanceRaisingFloors(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	storetest.Run(t, func(t *testing.T) store.Backend {
		b, err := postgres.OpenWithFloorGap(t.Context(), postgres.Config{DSN: dsn, Schema: schema}, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	})
}

// floorEnv is a backend that raises floors after nearly every lease, a
// tenant's store on it, and a connection to its schema to read the
// floors.
type floorEnv struct {
	t    *testing.T
	st   store.Store
	tn   store.Tenant
	conn *pgx.Conn
}

// newFloorEnv opens a backend whose leases raise a floor that lags by
// more than gap (1: after nearly every lease), and which never vacuums:
// the dead index entries stay.
func newFloorEnv(t *testing.T, gap int64) *floorEnv {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	b, err := postgres.OpenWithFloorGap(t.Context(), postgres.Config{DSN: dsn, Schema: schema, VacuumInterval: -1}, gap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	conn, err := pgx.Connect(t.Context(), withParam(dsn, "search_path", schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tn := store.Tenant{Service: "floors", Provider: "test"}
	return &floorEnv{t: t, st: tenantStore(t, b, tn), tn: tn, conn: conn}
}

// floor is the queue's ready floor as the database has it.
func (e *floorEnv) floor(queue string) int64 {
	e.t.Helper()
	var f int64
	err := e.conn.QueryRow(e.t.Context(), `SELECT coalesce(min(seq), 0) FROM sluice_ready_floors
		WHERE service = $1 AND provider = $2 AND queue = $3`, e.tn.Service, e.tn.Provider, queue).Scan(&f)
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

// waitFloor waits for the engine's raise to lift the queue's floor to at
// least want.
func (e *floorEnv) waitFloor(queue string, want int64) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for e.floor(queue) < want {
		if time.Now().After(deadline) {
			e.t.Fatalf("queue %s: floor %d after 30s, want at least %d", queue, e.floor(queue), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stranded lists, in one snapshot, the queue's ready messages below its
// floor: messages no lease would ever find.
func (e *floorEnv) stranded(ctx context.Context, queue string) ([]int64, error) {
	rows, err := e.conn.Query(ctx, `SELECT seq FROM sluice_messages
		WHERE service = $1 AND provider = $2 AND queue = $3 AND state = 0
		  AND seq < (SELECT coalesce(min(seq), 0) FROM sluice_ready_floors
		             WHERE service = $1 AND provider = $2 AND queue = $3)
		ORDER BY seq`, e.tn.Service, e.tn.Provider, queue)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

func (e *floorEnv) create(queue string, maxDelivery int) {
	e.t.Helper()
	if err := e.st.CreateQueue(e.t.Context(), &store.QueueSettings{Name: queue, MaxDeliveryCount: maxDelivery}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *floorEnv) enqueue(queue string, n int) {
	e.t.Helper()
	for sent := 0; sent < n; {
		msgs := make([]store.NewMessage, min(500, n-sent))
		for i := range msgs {
			msgs[i].Payload = []byte(fmt.Sprint(sent + i))
		}
		if _, err := e.st.Enqueue(e.t.Context(), &store.EnqueueParams{Queue: queue, Messages: msgs}); err != nil {
			e.t.Fatal(err)
		}
		sent += len(msgs)
	}
}

func (e *floorEnv) lease(queue string, n int, visibility time.Duration) []sluicetype.Leased {
	e.t.Helper()
	got, err := e.st.Lease(e.t.Context(), &store.LeaseParams{Queue: queue, Max: n, Visibility: visibility})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func (e *floorEnv) settle(queue string, action store.SettleAction, ls ...sluicetype.Leased) {
	e.t.Helper()
	receipts := make([]sluicetype.Receipt, len(ls))
	for i, l := range ls {
		receipts[i] = l.Receipt
	}
	res, err := e.st.Settle(e.t.Context(), &store.SettleParams{Queue: queue, Action: action, Receipts: receipts})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			e.t.Fatalf("%s: %v", action, r.Err)
		}
	}
}

// seqs are the numbers of leased messages.
func seqs(ls []sluicetype.Leased) []int64 {
	out := make([]int64, len(ls))
	for i, l := range ls {
		out[i] = l.Message.Seq
	}
	return out
}

// raised leases 60 of 100 messages for an hour, then one more, which
// finds the floor at 0, 61 behind: the engine raises it past them.
func (e *floorEnv) raised(queue string) []sluicetype.Leased {
	e.t.Helper()
	e.create(queue, 0)
	e.enqueue(queue, 100)
	held := e.lease(queue, 60, time.Hour)
	held = append(held, e.lease(queue, 1, time.Hour)...)
	if len(held) != 61 || held[60].Message.Seq != 61 {
		e.t.Fatalf("leased %v, want 1..61", seqs(held))
	}
	e.waitFloor(queue, 62)
	return held
}

// TestReadyFloor: a floor raised past the leased messages comes down for
// every way a message becomes ready again, at once, and a deleted queue
// takes its floor with it.
func TestReadyFloor(t *testing.T) {
	e := newFloorEnv(t, 1)

	t.Run("abandon and release", func(t *testing.T) {
		held := e.raised("abandon")
		e.settle("abandon", store.Abandon, held[4])
		if f := e.floor("abandon"); f > 5 {
			t.Fatalf("floor %d after the abandon of 5", f)
		}
		if got := seqs(e.lease("abandon", 1, time.Hour)); len(got) != 1 || got[0] != 5 {
			t.Fatalf("after the abandon of 5, leased %v, want [5]", got)
		}
		e.settle("abandon", store.Release, held[6])
		if got := seqs(e.lease("abandon", 2, time.Hour)); len(got) != 2 || got[0] != 7 || got[1] != 62 {
			t.Fatalf("after the release of 7, leased %v, want [7 62]", got)
		}
	})

	t.Run("a lease that ends", func(t *testing.T) {
		e.create("ended", 0)
		e.enqueue("ended", 100)
		e.lease("ended", 50, time.Hour)
		short := e.lease("ended", 10, 200*time.Millisecond)
		e.waitFloor("ended", 61)
		for time.Now().Before(short[9].LockedUntil.Add(10 * time.Millisecond)) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := seqs(e.lease("ended", 3, time.Hour)); len(got) != 3 || got[0] != 51 || got[2] != 53 {
			t.Fatalf("after leases of 51..60 ended, leased %v, want [51 52 53]", got)
		}
	})

	t.Run("delete while a transaction makes a message ready", func(t *testing.T) {
		held := e.raised("racing")
		conn := tenantConn(t, e)
		var pid int
		if err := conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		tx, err := conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		// The abandon holds message 5 and has inserted floor 5, uncommitted.
		err = e.st.(store.TxSettler).SettleTx(t.Context(), postgres.WrapTx(tx), &store.SettleTxParams{SettleParams: store.SettleParams{
			Queue: "racing", Action: store.Abandon, Receipts: []sluicetype.Receipt{held[4].Receipt}}})
		if err != nil {
			t.Fatal(err)
		}
		deleted := make(chan error, 1)
		go func() { deleted <- e.st.DeleteQueue(context.Background(), "racing") }()
		deadline := time.Now().Add(30 * time.Second)
		for blocked := false; !blocked; {
			if err := e.conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
				WHERE $1::int = ANY (pg_blocking_pids(pid)))`, pid).Scan(&blocked); err != nil {
				t.Fatal(err)
			}
			if !blocked && time.Now().After(deadline) {
				t.Fatal("DeleteQueue never waited for the abandon's transaction")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-deleted; err != nil {
			t.Fatal(err)
		}
		var n int
		if err := e.conn.QueryRow(t.Context(), `SELECT count(*) FROM sluice_ready_floors
			WHERE service = $1 AND provider = $2 AND queue = 'racing'`, e.tn.Service, e.tn.Provider).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("the deleted queue left %d floor rows", n)
		}
	})

	t.Run("delete and create again", func(t *testing.T) {
		e.raised("again")
		if err := e.st.DeleteQueue(t.Context(), "again"); err != nil {
			t.Fatal(err)
		}
		if f := e.floor("again"); f != 0 {
			t.Fatalf("the deleted queue left floor %d", f)
		}
		e.create("again", 0)
		e.enqueue("again", 3)
		if got := seqs(e.lease("again", 10, time.Hour)); len(got) != 3 || got[0] != 1 {
			t.Fatalf("the new queue leased %v, want [1 2 3]", got)
		}
	})
}

// TestReadyFloorRaces: consumers abandon, release and complete at random
// while the engine raises the floor after nearly every lease and another
// connection raises it in a loop. No snapshot ever shows a ready message
// below the floor, and every message is completed.
func TestReadyFloorRaces(t *testing.T) {
	e := newFloorEnv(t, 1)
	const (
		queue     = "races"
		total     = 1500
		consumers = 4
	)
	e.create(queue, 1000)
	e.enqueue(queue, total)

	raise, err := postgres.RaiseReadyFloorSQL()
	if err != nil || raise == "" {
		t.Fatalf("RaiseReadyFloor: %q, %v", raise, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		completed atomic.Int64
		raises    atomic.Int64
		watchers  sync.WaitGroup
		mu        sync.Mutex
		bad       []string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(bad) < 10 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	raiser := tenantConn(t, e)
	checker := tenantConn(t, e)
	watchers.Add(2)
	go func() {
		defer watchers.Done()
		for ctx.Err() == nil {
			if _, err := raiser.Exec(ctx, raise, e.tn.Service, e.tn.Provider, queue); err != nil && ctx.Err() == nil {
				report("raise: %v", err)
				return
			}
			raises.Add(1)
		}
	}()
	go func() {
		defer watchers.Done()
		check := &floorEnv{t: t, tn: e.tn, conn: checker}
		for ctx.Err() == nil {
			s, err := check.stranded(ctx, queue)
			if err != nil && ctx.Err() == nil {
				report("check: %v", err)
				return
			}
			if len(s) > 0 {
				report("ready below the floor: %v", s)
			}
		}
	}()

	var wg sync.WaitGroup
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 19))
			idle := time.Now()
			for completed.Load() < total && ctx.Err() == nil {
				got, err := e.st.Lease(ctx, &store.LeaseParams{Queue: queue, Max: 8, Visibility: time.Minute})
				if err != nil {
					report("lease: %v", err)
					return
				}
				if len(got) == 0 {
					// Others hold what is left, or a message is stranded:
					// nothing completes for long only in the second case.
					if time.Since(idle) > 20*time.Second {
						report("no message completed for 20s at %d of %d", completed.Load(), total)
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				var done, again, back []sluicetype.Receipt
				for _, l := range got {
					switch r := rng.IntN(10); {
					case r < 2:
						again = append(again, l.Receipt)
					case r < 3:
						back = append(back, l.Receipt)
					default:
						done = append(done, l.Receipt)
					}
				}
				for _, s := range []struct {
					action   store.SettleAction
					receipts []sluicetype.Receipt
				}{{store.Abandon, again}, {store.Release, back}, {store.Complete, done}} {
					if len(s.receipts) == 0 {
						continue
					}
					res, err := e.st.Settle(ctx, &store.SettleParams{Queue: queue, Action: s.action, Receipts: s.receipts})
					if err != nil {
						report("%s: %v", s.action, err)
						return
					}
					for _, r := range res {
						if r.Err != nil {
							report("%s: %v", s.action, r.Err)
							return
						}
					}
				}
				if len(done) > 0 {
					completed.Add(int64(len(done)))
					idle = time.Now()
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	watchers.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	if n := completed.Load(); n != total {
		t.Fatalf("completed %d of %d", n, total)
	}
	if raises.Load() == 0 {
		t.Fatal("the raiser never raised the floor")
	}
	t.Logf("%d messages completed beside %d raises of the floor", total, raises.Load())
}

// tenantConn is another connection to e's schema.
func tenantConn(t *testing.T, e *floorEnv) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(t.Context(), e.conn.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestReadyFloorCost: after a burst of 20,000 leases, a lease of 32 reads
// a few pages of the ready index, not the 138 or so that hold the dead
// entries of the leased rows until vacuum (which this backend never runs).
// Pages are counted by EXPLAIN (ANALYZE, BUFFERS) of LeaseAlone, rolled
// back.
func TestReadyFloorCost(t *testing.T) {
	e := newFloorEnv(t, 1)
	const total, burst = 20000, 19968
	e.create("burst", 0)
	e.enqueue("burst", total)
	for held := 0; held < burst; {
		got := e.lease("burst", min(1000, burst-held), time.Hour)
		if len(got) == 0 {
			t.Fatalf("leased %d of %d", held, burst)
		}
		held += len(got)
	}
	e.waitFloor("burst", burst+1)

	q, err := engine.ParseQueries(os.DirFS("queries"))
	if err != nil {
		t.Fatal(err)
	}
	pages := func(query string, args ...any) int {
		t.Helper()
		tx, err := e.conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		var out string
		if err := tx.QueryRow(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+query, args...).Scan(&out); err != nil {
			t.Fatal(err)
		}
		var doc []struct{ Plan map[string]any }
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc) == 0 {
			t.Fatalf("EXPLAIN output: %v", err)
		}
		return indexPages(doc[0].Plan, "sluice_messages_ready")
	}
	lease := pages(q["LeaseAlone"], e.tn.Service, e.tn.Provider, "burst", `[{"i":0,"n":32,"t":7,"v":60000}]`, 32)
	from0 := pages(`SELECT seq FROM sluice_messages WHERE service = $1 AND provider = $2 AND queue = $3 AND state = 0
		ORDER BY seq LIMIT 32 FOR UPDATE SKIP LOCKED`, e.tn.Service, e.tn.Provider, "burst")
	t.Logf("a lease of 32 read %d pages of the ready index from the floor; the same scan from 0 reads %d", lease, from0)
	if lease > 24 {
		t.Errorf("a lease of 32 after %d leases read %d pages of the ready index, want at most 24", burst, lease)
	}
}

// indexPages sums the buffers (hit and read) of the plan's scans of the
// index named.
func indexPages(node map[string]any, index string) int {
	n := 0
	if node["Index Name"] == index {
		hit, _ := node["Shared Hit Blocks"].(float64)
		read, _ := node["Shared Read Blocks"].(float64)
		n += int(hit + read)
	}
	for _, c := range children(node) {
		n += indexPages(c, index)
	}
	return n
}

// The rows that keep a floor stay few when leases never find it far
// behind: a message abandoned 300 times at the floor of a queue whose
// leases would raise it only past a billion leaves at most a raise's
// worth (64) of rows; a queue that requires sessions keeps none.
func TestReadyFloorRowsStayFew(t *testing.T) {
	e := newFloorEnv(t, 1<<30)
	rows := func(queue string) int {
		var n int
		if err := e.conn.QueryRow(t.Context(), `SELECT count(*) FROM sluice_ready_floors
			WHERE service = $1 AND provider = $2 AND queue = $3`, e.tn.Service, e.tn.Provider, queue).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	e.create("again", 1000)
	e.enqueue("again", 3)
	for range 300 {
		got := e.lease("again", 1, time.Hour)
		if len(got) != 1 || got[0].Message.Seq != 1 {
			t.Fatalf("leased %v, want [1]", seqs(got))
		}
		e.settle("again", store.Abandon, got...)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n := rows("again"); n > 64; n = rows("again") {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows keep the floor after 300 abandons, want at most 64", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if f := e.floor("again"); f > 1 {
		t.Fatalf("floor %d above the ready message 1", f)
	}

	if err := e.st.CreateQueue(t.Context(), &store.QueueSettings{Name: "sessions", RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Enqueue(t.Context(), &store.EnqueueParams{Queue: "sessions", Messages: []store.NewMessage{{SessionID: "s", Payload: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		lock, err := e.st.AcceptSession(t.Context(), &store.AcceptSessionParams{Queue: "sessions", SessionID: "s", Duration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		sp := store.SessionParams{Queue: "sessions", SessionID: "s", Token: lock.Token}
		got, err := e.st.LeaseSession(t.Context(), &store.LeaseSessionParams{SessionParams: sp, Max: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("lease of the session: %d messages, %v", len(got), err)
		}
		e.settle("sessions", store.Abandon, got...) // MakeReady
		if _, err := e.st.LeaseSession(t.Context(), &store.LeaseSessionParams{SessionParams: sp, Max: 1}); err != nil {
			t.Fatal(err)
		}
		if err := e.st.ReleaseSession(t.Context(), &sp); err != nil { // ReleaseSessionMessages
			t.Fatal(err)
		}
	}
	if n := rows("sessions"); n != 0 {
		t.Fatalf("a queue that requires sessions keeps %d floor rows", n)
	}
}
