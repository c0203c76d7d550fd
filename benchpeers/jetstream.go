package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsServer is an embedded NATS server with JetStream on a file store in
// a fresh directory, and a connection to it in process. With fsync every
// write is synced before it is acknowledged (the configuration's
// sync_interval: always); without, the server's default (a sync every
// 2 minutes).
type jsServer struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func startJetStream(e *env, fsync bool) (*jsServer, error) {
	srv, err := server.NewServer(&server.Options{
		JetStream: true, StoreDir: filepath.Join(e.dir, "jetstream"), SyncAlways: fsync,
		DontListen: true, NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("jetstream: the embedded server did not start in 30 s")
	}
	s := &jsServer{srv: srv}
	if s.nc, err = nats.Connect("", nats.InProcessServer(srv)); err == nil {
		s.js, err = jetstream.New(s.nc)
	}
	if err != nil {
		return nil, errors.Join(err, s.close(context.Background()))
	}
	return s, nil
}

func (s *jsServer) close(context.Context) error {
	if s.nc != nil {
		s.nc.Close()
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	return nil
}

// publish publishes one message and waits for its acknowledgement, or a
// batch asynchronously and then waits for all of theirs.
func (s *jsServer) publish(ctx context.Context, subject string, bodies [][]byte) error {
	if len(bodies) == 1 {
		_, err := s.js.Publish(ctx, subject, bodies[0])
		return err
	}
	futures := make([]jetstream.PubAckFuture, len(bodies))
	for i, b := range bodies {
		f, err := s.js.PublishAsync(subject, b)
		if err != nil {
			return err
		}
		futures[i] = f
	}
	select {
	case <-s.js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, f := range futures {
		select {
		case err := <-f.Err():
			return err
		default:
		}
	}
	return nil
}

// fetchLoop runs consumers goroutines that Fetch up to 32 from cons,
// hand each to handle and acknowledge it (every message, or with ackLast
// the last of each fetch, for an AckAll consumer), until ctx ends.
func fetchLoop(ctx context.Context, cons jetstream.Consumer, consumers int, ackLast bool, handle func([]byte)) error {
	var wg sync.WaitGroup
	errs := make([]error, consumers)
	for i := range consumers {
		wg.Go(func() {
			for ctx.Err() == nil {
				b, err := cons.Fetch(32, jetstream.FetchMaxWait(200*time.Millisecond))
				if err != nil {
					errs[i] = err
					return
				}
				var last jetstream.Msg
				for m := range b.Messages() {
					handle(m.Data())
					if !ackLast {
						err = errors.Join(err, m.Ack())
					}
					last = m
				}
				if ackLast && last != nil {
					err = last.Ack()
				}
				if err == nil && b.Error() != nil && !errors.Is(b.Error(), nats.ErrTimeout) {
					err = b.Error()
				}
				if err != nil && ctx.Err() == nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// jsQueue is a work-queue stream with one durable pull consumer, every
// message acknowledged (AckExplicit), no bound on unacknowledged ones so
// that 50,000 may be held.
type jsQueue struct {
	*jsServer
	cons jetstream.Consumer
}

func openJetStreamQueue(fsync bool) func(ctx context.Context, e *env) (queuePeer, error) {
	return func(ctx context.Context, e *env) (queuePeer, error) {
		s, err := startJetStream(e, fsync)
		if err != nil {
			return nil, err
		}
		q := &jsQueue{jsServer: s}
		_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "PEERS", Subjects: []string{"peers"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
		})
		if err == nil {
			q.cons, err = s.js.CreateOrUpdateConsumer(ctx, "PEERS", jetstream.ConsumerConfig{
				Durable: "peers", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Minute, MaxAckPending: -1,
			})
		}
		if err != nil {
			return nil, errors.Join(err, s.close(ctx))
		}
		return q, nil
	}
}

func (q *jsQueue) send(ctx context.Context, bodies [][]byte) error {
	return q.publish(ctx, "peers", bodies)
}

func (q *jsQueue) consume(ctx context.Context, consumers int, handle func([]byte)) error {
	return fetchLoop(ctx, q.cons, consumers, false, handle)
}

// lock fetches n messages, 1,000 a fetch, and leaves them unacknowledged.
func (q *jsQueue) lock(ctx context.Context, n int) error {
	for n > 0 {
		got, err := q.fetch(min(n, 1000))
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return errors.New("jetstream: nothing to fetch")
		}
		n -= len(got)
	}
	return ctx.Err()
}

func (q *jsQueue) fetch(n int) ([]jetstream.Msg, error) {
	b, err := q.cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		return nil, err
	}
	var got []jetstream.Msg
	for m := range b.Messages() {
		got = append(got, m)
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		return got, err
	}
	return got, nil
}

// receive32 times a fetch of 32 and then acknowledges them.
func (q *jsQueue) receive32(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	got, err := q.fetch(32)
	took := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if len(got) < 32 {
		return 0, fmt.Errorf("jetstream: fetched %d of 32", len(got))
	}
	for _, m := range got {
		err = errors.Join(err, m.Ack())
	}
	return took, errors.Join(err, ctx.Err())
}

// jsStream is a stream of subjects ev.KEY (limits retention) read by one
// durable pull consumer from the start, acknowledged per fetch
// (AckAll): a stream consumer's checkpoint.
type jsStream struct {
	*jsServer
	cons jetstream.Consumer
}

func openJetStreamStream(fsync bool) func(ctx context.Context, e *env) (streamPeer, error) {
	return func(ctx context.Context, e *env) (streamPeer, error) {
		s, err := startJetStream(e, fsync)
		if err != nil {
			return nil, err
		}
		st := &jsStream{jsServer: s}
		_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Storage: jetstream.FileStorage})
		if err == nil {
			st.cons, err = s.js.CreateOrUpdateConsumer(ctx, "EV", jetstream.ConsumerConfig{
				Durable: "peers", AckPolicy: jetstream.AckAllPolicy, AckWait: time.Minute, MaxAckPending: -1,
			})
		}
		if err != nil {
			return nil, errors.Join(err, s.close(ctx))
		}
		return st, nil
	}
}

func (s *jsStream) publish(ctx context.Context, key string, bodies [][]byte) error {
	return s.jsServer.publish(ctx, "ev."+key, bodies)
}

func (s *jsStream) consume(ctx context.Context, consumers int, handle func([]byte)) error {
	return fetchLoop(ctx, s.cons, consumers, true, handle)
}
