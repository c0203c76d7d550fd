package sluice_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store/storetest"
)

// bouncerSetup is a database of the test's own behind PgBouncer's
// transaction pooling (testdb.PgBouncerEnv), migrated over a direct
// connection, with two clients of one tenant on it through PgBouncer,
// each on a backend of its own, as two processes would be.
type bouncerSetup struct {
	db       testdb.BouncerDB
	dsn      string // through PgBouncer, with sluice_pgbouncer=transaction
	producer *sluice.Client
	consumer *sluice.Client
	watch    *testdb.SessionWatch
}

// newBouncerSetup makes a bouncerSetup; the clients close when the test
// ends, before the database is dropped.
func newBouncerSetup(t *testing.T) *bouncerSetup {
	t.Helper()
	db, drop, err := testdb.PgBouncer(t.Context(), testdb.PgBouncerEnv)
	testdb.Check(t, err)
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop database %s: %v", db.Name, err)
		}
	})
	service := "t-" + randHex(6)
	// Migrations hold a session lock: over a direct connection.
	m, err := sluice.Open(t.Context(), db.Direct, &sluice.Options{Service: service, Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	s := &bouncerSetup{db: db, dsn: withQuery(t, db.Bouncer, "sluice_pgbouncer", "transaction")}
	if s.watch, err = testdb.WatchSessions(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	s.producer = s.open(t, service)
	s.consumer = s.open(t, service)
	return s
}

// open opens a client of service through PgBouncer, closed when the test
// ends; its backend must not rely on LISTEN.
func (s *bouncerSetup) open(t *testing.T, service string) *sluice.Client {
	t.Helper()
	opts := &sluice.Options{Service: service, SkipMigrations: true, Logger: storetest.Logger(t)}
	b, err := sluice.OpenBackend(t.Context(), s.dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if b.Features().CrossProcessWake {
		t.Fatal("CrossProcessWake through transaction pooling: the backend listens")
	}
	c, err := sluice.NewClient(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// appDB opens a database/sql pool of the application's through PgBouncer,
// closed when the test ends. Behind transaction pooling it must prepare
// nothing: pgx's exec mode "exec" sends each query with its text.
func (s *bouncerSetup) appDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", withQuery(t, s.db.Bouncer, "default_query_exec_mode", "exec"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// check closes the clients' backends and fails the test if anything
// issued a LISTEN, a PREPARE or a session advisory lock through PgBouncer,
// or left a named prepared statement on its server connections.
func (s *bouncerSetup) check(t *testing.T, closers ...interface{ Close() error }) {
	t.Helper()
	for _, c := range append([]interface{ Close() error }{s.producer, s.consumer}, closers...) {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	seen, err := s.watch.Stop()
	if err != nil {
		t.Errorf("watching pg_stat_activity: %v", err)
	}
	if len(seen) > 0 {
		t.Errorf("statements that need a session ran through transaction pooling: %q", seen)
	}
	prepared, err := testdb.PreparedStatements(t.Context(), s.db)
	if err != nil {
		t.Fatalf("pg_prepared_statements: %v", err)
	}
	if len(prepared) > 0 {
		t.Errorf("named statements left on PgBouncer's server connections: %q", prepared)
	}
}

// withQuery returns the URL dsn with the query parameter k set to v.
func withQuery(t *testing.T, dsn, k, v string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

// Through PgBouncer's transaction pooling, with sluice_pgbouncer=transaction
// in the DSN, the library works end to end between two processes (two
// backends): a waiting receiver wakes on the other's send within its poll
// interval, without LISTEN; sessions, a stream processor, SendTx and
// CompleteTx in the application's transaction through PgBouncer, and
// concurrent producers and consumers all work; and nothing that needs a
// server session (LISTEN, session locks, named statements) reaches the
// server.
func TestThroughPgBouncer(t *testing.T) {
	s := newBouncerSetup(t)
	app := s.appDB(t)
	t.Run("Receive", func(t *testing.T) { bouncerReceive(t, s) })
	t.Run("Sessions", func(t *testing.T) { bouncerSessions(t, s) })
	t.Run("Streams", func(t *testing.T) { bouncerStreams(t, s) })
	t.Run("Tx", func(t *testing.T) { bouncerTx(t, s, app) })
	t.Run("Concurrent", func(t *testing.T) { bouncerConcurrent(t, s) })
	s.check(t, app)
}

// bouncerReceive: a receiver waiting in one process gets a message sent in
// the other within its poll interval (at most 500 ms between polls; the
// bound allows for a loaded machine) and completes it.
func bouncerReceive(t *testing.T, s *bouncerSetup) {
	ctx := t.Context()
	q := createQueue(t, s.producer, nil)
	r := newReceiver(t, s.consumer, q, sluice.PeekLock)
	type result struct {
		msgs []*sluice.ReceivedMessage
		err  error
		at   time.Time
	}
	got := make(chan result, 1)
	waiting := make(chan struct{})
	go func() {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		close(waiting)
		msgs, err := r.Receive(rctx, 1)
		got <- result{msgs, err, time.Now()}
	}()
	<-waiting
	// Not a wait for a condition: time for the receiver to back off to
	// its longest poll interval, so that the send finds it waiting.
	time.Sleep(time.Second)
	sent := time.Now()
	send(t, newSender(t, s.producer, q), "through the pooler")
	res := <-got
	if res.err != nil || len(res.msgs) != 1 || string(res.msgs[0].Body) != "through the pooler" {
		t.Fatalf("Receive: %v, %v", res.msgs, res.err)
	}
	d := res.at.Sub(sent)
	if d > 5*time.Second {
		t.Errorf("the receiver woke %v after the send: it does not poll", d)
	}
	t.Logf("the receiver woke %v after the send", d)
	if err := r.Complete(ctx, res.msgs[0]); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	wantEmptyQueue(t, s.consumer, q)
}

// bouncerSessions: a session's messages go to the one receiver that
// accepted it, in order, with its state.
func bouncerSessions(t *testing.T, s *bouncerSetup) {
	ctx := t.Context()
	q := createQueue(t, s.producer, &sluice.QueueProperties{RequiresSession: true})
	snd := newSender(t, s.producer, q)
	for i := range 3 {
		if _, err := snd.Send(ctx, &sluice.Message{SessionID: "order-7", Body: fmt.Appendf(nil, "step %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sr, err := s.consumer.AcceptNextSession(actx, q, nil)
	if err != nil {
		t.Fatalf("AcceptNextSession: %v", err)
	}
	defer sr.Close(context.Background())
	if sr.SessionID() != "order-7" {
		t.Fatalf("accepted session %q", sr.SessionID())
	}
	for i := range 3 {
		msgs, err := sr.Receive(actx, 1)
		if err != nil || len(msgs) != 1 || string(msgs[0].Body) != fmt.Sprintf("step %d", i) {
			t.Fatalf("session Receive %d: %v, %v", i, msgs, err)
		}
		if err := sr.Complete(ctx, msgs[0]); err != nil {
			t.Fatalf("session Complete: %v", err)
		}
	}
	if err := sr.SetSessionState(ctx, []byte("shipped")); err != nil {
		t.Fatal(err)
	}
	if st, err := sr.SessionState(ctx); err != nil || string(st) != "shipped" {
		t.Fatalf("SessionState: %q, %v", st, err)
	}
}

// bouncerStreams: a stream processor in one process handles every event
// published in the other, each stream in order.
func bouncerStreams(t *testing.T, s *bouncerSetup) {
	ctx := t.Context()
	const streams, events = 4, 5
	var mu sync.Mutex
	seen := map[string][]string{}
	done := make(chan struct{})
	p := s.consumer.NewStreamProcessor(&sluice.StreamProcessorOptions{HeartbeatInterval: 100 * time.Millisecond})
	err := p.Handle("audit", func(_ context.Context, ev *sluice.StreamEvent) error {
		mu.Lock()
		defer mu.Unlock()
		seen[ev.Key] = append(seen[ev.Key], string(ev.Body))
		n := 0
		for _, v := range seen {
			n += len(v)
		}
		if n == streams*events {
			close(done)
		}
		return nil
	}, &sluice.ConsumerOptions{Namespace: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	for i := range streams {
		id := sluice.StreamID{Namespace: "orders", Key: fmt.Sprintf("order-%d", i)}
		for j := range events {
			if _, err := s.producer.Publish(ctx, id, sluice.Event{Body: fmt.Appendf(nil, "%d", j)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the processor handled %v", seen)
	}
	mu.Lock()
	defer mu.Unlock()
	for key, bodies := range seen {
		for j, b := range bodies {
			if b != fmt.Sprint(j) {
				t.Fatalf("stream %s: events %v, want 0..%d in order", key, bodies, events-1)
			}
		}
	}
}

// bouncerTx: SendTx and CompleteTx in a transaction of the application's
// own pool through PgBouncer commit with the application's write, or not
// at all.
func bouncerTx(t *testing.T, s *bouncerSetup, app *sql.DB) {
	ctx := t.Context()
	table := appTable(t, app)
	q := createQueue(t, s.producer, nil)
	snd := newSender(t, s.producer, q)

	tx := begin(t, app)
	if _, err := snd.SendTx(ctx, tx, &sluice.Message{Body: []byte("rolled back")}); err != nil {
		t.Fatalf("SendTx: %v", err)
	}
	insertApp(t, "postgres", tx, table, "rolled back")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx = begin(t, app)
	if _, err := snd.SendTx(ctx, tx, &sluice.Message{Body: []byte("order-1")}); err != nil {
		t.Fatalf("SendTx: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	r := newReceiver(t, s.consumer, q, sluice.PeekLock)
	m := receive(t, r, 1)[0]
	if string(m.Body) != "order-1" {
		t.Fatalf("received %q: the rolled back send was delivered", m.Body)
	}
	tx = begin(t, app)
	insertApp(t, "postgres", tx, table, "order-1")
	if err := r.CompleteTx(ctx, tx, m); err != nil {
		t.Fatalf("CompleteTx: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := appRows(t, app, table); n != 1 {
		t.Fatalf("%d application rows, want 1", n)
	}
	if err := r.Complete(ctx, m); !errors.Is(err, sluice.ErrLockLost) {
		t.Fatalf("Complete after a committed CompleteTx: %v, want ErrLockLost", err)
	}
	wantEmptyQueue(t, s.consumer, q)
}

// bouncerConcurrent: producers in one process and consumers in the other,
// all at once, deliver every message exactly once.
func bouncerConcurrent(t *testing.T, s *bouncerSetup) {
	ctx := t.Context()
	const producers, consumers, each = 4, 4, 50
	q := createQueue(t, s.producer, nil)
	var wg sync.WaitGroup
	errs := make(chan error, producers+consumers)
	for p := range producers {
		wg.Go(func() {
			snd, err := s.producer.NewSender(q)
			if err != nil {
				errs <- err
				return
			}
			for i := range each {
				if _, err := snd.Send(ctx, &sluice.Message{Body: fmt.Appendf(nil, "%d-%d", p, i)}); err != nil {
					errs <- fmt.Errorf("Send: %w", err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	got := map[string]int{}
	total := 0
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for range consumers {
		wg.Go(func() {
			r, err := s.consumer.NewReceiver(q, nil)
			if err != nil {
				errs <- err
				return
			}
			for {
				mu.Lock()
				finished := total == producers*each
				mu.Unlock()
				if finished {
					return
				}
				// A short wait, so that every consumer sees the end.
				wctx, wcancel := context.WithTimeout(rctx, time.Second)
				msgs, err := r.Receive(wctx, 10)
				wcancel()
				if errors.Is(err, context.DeadlineExceeded) && rctx.Err() == nil {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("Receive: %w", err)
					return
				}
				for _, m := range msgs {
					if err := r.Complete(ctx, m); err != nil {
						errs <- fmt.Errorf("Complete: %w", err)
						return
					}
					mu.Lock()
					got[string(m.Body)]++
					total++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(got) != producers*each {
		t.Fatalf("%d distinct messages received, want %d", len(got), producers*each)
	}
	for body, n := range got {
		if n != 1 {
			t.Errorf("message %s received %d times", body, n)
		}
	}
	wantEmptyQueue(t, s.consumer, q)
}
