package main

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	_ "github.com/sluicehq/sluice/store/postgres"
	_ "github.com/sluicehq/sluice/store/sqlite"
)

// The sluice adapters use the public API only: a queue with a Sender,
// Receivers that Receive(32) and CompleteBatch; streams with Publish and
// StreamProcessors that share the partitions of a namespace
// subscription.

// sluiceQueue is a sluice queue on a fresh database.
type sluiceQueue struct {
	c    *sluice.Client
	s    *sluice.Sender
	r    *sluice.Receiver // for lock and receive32
	drop func(context.Context) error
}

const sluiceQueueName = "peers"

func openSluiceQueuePG(ctx context.Context, e *env) (queuePeer, error) {
	q, drop, err := inSchema(ctx, e.pg, openSluiceQueue)
	if err != nil {
		return nil, err
	}
	q.drop = drop
	return q, nil
}

func openSluiceQueueSQLite(ctx context.Context, e *env) (queuePeer, error) {
	return openSluiceQueue(ctx, sluiceSQLiteDSN(e))
}

// sluiceSQLiteDSN is a fresh SQLite file with e's synchronous setting.
func sluiceSQLiteDSN(e *env) string {
	return "sqlite://" + filepath.Join(e.dir, "sluice.db") + "?synchronous=" + e.sqliteSync
}

func openSluiceQueue(ctx context.Context, dsn string) (*sluiceQueue, error) {
	c, err := sluice.Open(ctx, dsn, nil)
	if err != nil {
		return nil, err
	}
	q := &sluiceQueue{c: c}
	// The longest lock, so that the receive-locked case's locks outlast it.
	if _, err := c.CreateQueue(ctx, sluiceQueueName, &sluice.QueueProperties{LockDuration: sluice.MaxLockDuration}); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if q.s, err = c.NewSender(sluiceQueueName); err == nil {
		q.r, err = c.NewReceiver(sluiceQueueName, nil)
	}
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return q, nil
}

func (q *sluiceQueue) send(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		_, err := q.s.Send(ctx, &sluice.Message{Body: bodies[0]})
		return err
	}
	msgs := make([]*sluice.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = &sluice.Message{Body: b}
	}
	_, err := q.s.SendBatch(ctx, msgs)
	return err
}

func (q *sluiceQueue) consume(ctx context.Context, consumers int, handle func([]byte)) error {
	var wg sync.WaitGroup
	errs := make([]error, consumers)
	for i := range consumers {
		r, err := q.c.NewReceiver(sluiceQueueName, nil)
		if err != nil {
			return err
		}
		wg.Go(func() {
			for {
				msgs, err := r.Receive(ctx, 32)
				if err == nil {
					for _, m := range msgs {
						handle(m.Body)
					}
					err = r.CompleteBatch(ctx, msgs)
				}
				if err != nil {
					if ctx.Err() == nil {
						errs[i] = err
					}
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// process runs processors Processors of 32 handlers each (a handler's
// nil return completes its message).
func (q *sluiceQueue) process(ctx context.Context, processors int, handle func([]byte)) error {
	var started []*sluice.Processor
	stop := func() error {
		var errs []error
		for _, p := range started {
			errs = append(errs, p.Stop(context.WithoutCancel(ctx)))
		}
		return errors.Join(errs...)
	}
	var (
		mu     sync.Mutex
		failed error // the first handler or settle error, beside a live ctx
	)
	for range processors {
		p, err := q.c.NewProcessor(sluiceQueueName, func(_ context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
			handle(m.Body)
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 32, OnError: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if failed == nil && ctx.Err() == nil {
				failed = err
			}
		}})
		if err == nil {
			err = p.Start(ctx)
		}
		if err != nil {
			return errors.Join(err, stop())
		}
		started = append(started, p)
	}
	<-ctx.Done()
	err := stop()
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(failed, err)
}

func (q *sluiceQueue) lock(ctx context.Context, n int) error {
	for n > 0 {
		msgs, err := q.r.Receive(ctx, min(n, 1000))
		if err != nil {
			return err
		}
		n -= len(msgs)
	}
	return nil
}

func (q *sluiceQueue) receive32(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	msgs, err := q.r.Receive(ctx, 32)
	took := time.Since(t0)
	if err != nil {
		return 0, err
	}
	return took, q.r.CompleteBatch(ctx, msgs)
}

func (q *sluiceQueue) close(ctx context.Context) error {
	err := q.c.Close()
	if q.drop != nil {
		err = errors.Join(err, q.drop(ctx))
	}
	return err
}

// sluiceStream is sluice's streams on a fresh database: Publish to
// keyed streams of one namespace, and a consumer subscribed to the
// namespace.
type sluiceStream struct {
	c      *sluice.Client
	sqlite bool
	drop   func(context.Context) error
}

const sluiceNamespace = "peers"

func openSluiceStreamPG(ctx context.Context, e *env) (streamPeer, error) {
	s, drop, err := inSchema(ctx, e.pg, openSluiceStream)
	if err != nil {
		return nil, err
	}
	s.drop = drop
	return s, nil
}

func openSluiceStreamSQLite(ctx context.Context, e *env) (streamPeer, error) {
	s, err := openSluiceStream(ctx, sluiceSQLiteDSN(e))
	if err != nil {
		return nil, err
	}
	s.sqlite = true
	return s, nil
}

// openSluiceStream opens a client and stores the consumer's namespace
// subscription (a processor started and stopped), so that it has every
// event published from then on, a preloaded backlog included.
func openSluiceStream(ctx context.Context, dsn string) (*sluiceStream, error) {
	c, err := sluice.Open(ctx, dsn, nil)
	if err != nil {
		return nil, err
	}
	s := &sluiceStream{c: c}
	p, err := s.processor(func([]byte) {})
	if err == nil {
		if err = p.Start(ctx); err == nil {
			err = p.Stop(ctx)
		}
	}
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return s, nil
}

// processor returns a processor of the peers group that hands every
// event of the namespace to handle.
func (s *sluiceStream) processor(handle func([]byte)) (*sluice.StreamProcessor, error) {
	p := s.c.NewStreamProcessor(&sluice.StreamProcessorOptions{Group: "peers"})
	err := p.Handle("peers", func(_ context.Context, ev *sluice.StreamEvent) error {
		handle(ev.Body)
		return nil
	}, &sluice.ConsumerOptions{Namespace: sluiceNamespace})
	return p, err
}

func (s *sluiceStream) publish(ctx context.Context, key string, bodies [][]byte) error {
	evs := make([]sluice.Event, len(bodies))
	for i, b := range bodies {
		evs[i] = sluice.Event{Body: b}
	}
	_, err := s.c.Publish(ctx, sluice.StreamID{Namespace: sluiceNamespace, Key: key}, evs...)
	return err
}

// consume runs consumers processors of one group, sharing the
// partitions; SQLite runs one processor at a time.
func (s *sluiceStream) consume(ctx context.Context, consumers int, handle func([]byte)) error {
	if s.sqlite && consumers > 1 {
		return errSkip
	}
	var started []*sluice.StreamProcessor
	stop := func() error {
		var errs []error
		for _, p := range started {
			errs = append(errs, p.Stop(context.WithoutCancel(ctx)))
		}
		return errors.Join(errs...)
	}
	for range consumers {
		p, err := s.processor(handle)
		if err == nil {
			err = p.Start(ctx)
		}
		if err != nil {
			return errors.Join(err, stop())
		}
		started = append(started, p)
	}
	<-ctx.Done()
	return stop()
}

func (s *sluiceStream) close(ctx context.Context) error {
	err := s.c.Close()
	if s.drop != nil {
		err = errors.Join(err, s.drop(ctx))
	}
	return err
}
