package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverArgs is a job carrying a message body (River stores args as
// JSON: the body goes base64-encoded).
type riverArgs struct {
	Body []byte `json:"body"`
}

// Kind names the job kind.
func (riverArgs) Kind() string { return "peers" }

// riverWorker hands each job's body to handle.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	handle func([]byte)
}

// Work handles one job; returning nil completes it.
func (w *riverWorker) Work(_ context.Context, j *river.Job[riverArgs]) error {
	w.handle(j.Args.Body)
	return nil
}

// riverQueue is River (riverpgxv5) in a fresh schema: Insert, InsertMany,
// and for consumers, clients of MaxWorkers 32 each (as many in flight
// as one sluice consumer receiving 32), FetchCooldown at River's minimum
// (1 ms) so that fetching is not held to River's default of 10 fetches a
// second.
type riverQueue struct {
	pool   *pgxpool.Pool
	schema string
	client *river.Client[pgx.Tx]
	drop   func(context.Context) error
}

func openRiver(ctx context.Context, e *env) (queuePeer, error) {
	schema, _, drop, err := pgSchema(ctx, e.pg)
	if err != nil {
		return nil, err
	}
	q := &riverQueue{schema: schema, drop: drop}
	if err := q.open(ctx, e.pg); err != nil {
		return nil, errors.Join(err, q.close(ctx))
	}
	return q, nil
}

func (q *riverQueue) open(ctx context.Context, dsn string) error {
	var err error
	if q.pool, err = pgxpool.New(ctx, dsn); err != nil {
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(q.pool), &rivermigrate.Config{Schema: q.schema})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	q.client, err = q.newClient(nil)
	return err
}

// newClient returns an insert-only client, or with handle a client
// whose worker runs it.
func (q *riverQueue) newClient(handle func([]byte)) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{handle: handle})
	cfg := &river.Config{Schema: q.schema, Workers: workers, FetchCooldown: river.FetchCooldownMin}
	if handle != nil {
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 32}}
	}
	return river.NewClient(riverpgxv5.New(q.pool), cfg)
}

func (q *riverQueue) send(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		_, err := q.client.Insert(ctx, riverArgs{Body: bodies[0]}, nil)
		return err
	}
	params := make([]river.InsertManyParams, len(bodies))
	for i, b := range bodies {
		params[i] = river.InsertManyParams{Args: riverArgs{Body: b}}
	}
	_, err := q.client.InsertMany(ctx, params)
	return err
}

// consume runs consumers River clients, as many processes would.
func (q *riverQueue) consume(ctx context.Context, consumers int, handle func([]byte)) error {
	var clients []*river.Client[pgx.Tx]
	stop := func() error {
		var wg sync.WaitGroup
		errs := make([]error, len(clients))
		for i, c := range clients {
			wg.Go(func() { errs[i] = c.Stop(context.WithoutCancel(ctx)) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	for range consumers {
		c, err := q.newClient(handle)
		if err == nil {
			err = c.Start(ctx)
		}
		if err != nil {
			return errors.Join(err, stop())
		}
		clients = append(clients, c)
	}
	<-ctx.Done()
	return stop()
}

// lock moves n jobs to running by the query River's own fetch runs
// (JobGetAvailable), 1,000 a call, and leaves them running: River's
// counterpart of messages received and not settled.
func (q *riverQueue) lock(ctx context.Context, n int) error {
	for n > 0 {
		got, err := q.fetch(ctx, min(n, 1000))
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return errors.New("river: no job available to lock")
		}
		n -= len(got)
	}
	return nil
}

func (q *riverQueue) fetch(ctx context.Context, n int) ([]int64, error) {
	res, err := riverpgxv5.New(q.pool).GetExecutor().JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
		ClientID: "benchpeers", MaxAttemptedBy: 100, MaxToLock: n, Queue: river.QueueDefault, Schema: q.schema,
	})
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(res.Jobs))
	for i, j := range res.Jobs {
		ids[i] = j.ID
	}
	return ids, nil
}

// receive32 times River's fetch of 32 and then marks them completed.
func (q *riverQueue) receive32(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	ids, err := q.fetch(ctx, 32)
	took := time.Since(t0)
	if err != nil {
		return 0, err
	}
	_, err = q.pool.Exec(ctx, "UPDATE "+q.schema+".river_job SET state = 'completed', finalized_at = now() WHERE id = ANY($1)", ids)
	return took, err
}

func (q *riverQueue) close(ctx context.Context) error {
	if q.pool != nil {
		q.pool.Close()
	}
	return q.drop(ctx)
}
