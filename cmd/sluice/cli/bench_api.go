package cli

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// apiSender and apiReceiver are what the api scenario needs of a queue's
// sender and receiver: the library's and the client's alike.
type apiSender interface {
	SendBatch(ctx context.Context, msgs []*sluice.Message) ([]int64, error)
}

type apiReceiver interface {
	Receive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error)
	Complete(ctx context.Context, m *sluice.ReceivedMessage) error
}

// apiTransport is one way of reaching the queues.
type apiTransport struct {
	name   string
	queues interface {
		CreateQueue(context.Context, string, *sluice.QueueProperties) (sluice.QueueInfo, error)
	}
	drop      func(ctx context.Context, name string) error
	sender    func(queue string) (apiSender, error)
	receiver  func(queue string) (apiReceiver, error)
	transport *http.Transport
}

// benchAPI sends and receives through the library directly and through a
// server over the Connect protocol in protobuf and in JSON and over gRPC,
// one after the other on queues of their own: --producers send batches of
// --batch, --consumers receive up to --lease-batch and complete each
// message with a call of its own, as an application does. The server runs
// in this process on the same database, unless --server names one to
// drive (then only its transports run).
func benchAPI(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	url := e.cfg.server
	if url == "" {
		srv, err := server.New(server.Config{Client: e.client, Addr: "127.0.0.1:0"})
		if err != nil {
			return nil, err
		}
		if err := srv.Start(ctx); err != nil {
			return nil, err
		}
		defer srv.Shutdown(context.WithoutCancel(ctx))
		url = "http://" + srv.Addr().String()
	}
	var transports []apiTransport
	if e.cfg.server == "" {
		lib := e.client
		transports = append(transports, apiTransport{name: "library", queues: lib, drop: lib.DeleteQueue,
			sender:   func(q string) (apiSender, error) { return lib.NewSender(q) },
			receiver: func(q string) (apiReceiver, error) { return lib.NewReceiver(q, nil) }})
	}
	for _, p := range []struct {
		name string
		opts client.Options
	}{{"connect-proto", client.Options{}}, {"connect-json", client.Options{JSON: true}}, {"grpc", client.Options{GRPC: true}}} {
		t := &http.Transport{MaxIdleConnsPerHost: 64}
		if p.opts.GRPC {
			t.Protocols = new(http.Protocols)
			t.Protocols.SetUnencryptedHTTP2(true)
		}
		p.opts.HTTPClient, p.opts.Token = &http.Client{Transport: t}, e.cfg.token
		c, err := client.New(url, &p.opts)
		if err != nil {
			return nil, err
		}
		transports = append(transports, apiTransport{name: p.name, queues: c, drop: c.DeleteQueue, transport: t,
			sender:   func(q string) (apiSender, error) { return c.NewSender(q) },
			receiver: func(q string) (apiReceiver, error) { return c.NewReceiver(q, nil) }})
	}
	var out []benchResult
	for _, t := range transports {
		r, err := e.apiE2E(ctx, t)
		if t.transport != nil {
			t.transport.CloseIdleConnections()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// apiE2E produces and consumes at once through one transport.
func (e *benchEnv) apiE2E(ctx context.Context, t apiTransport) (benchResult, error) {
	q := "bench-api-" + t.name + "-" + randomHex(3)
	if _, err := t.queues.CreateQueue(ctx, q, nil); err != nil {
		return benchResult{}, err
	}
	defer t.drop(context.WithoutCancel(ctx), q)
	body := payload(e.cfg.size)
	epoch := time.Now()
	var (
		lat      latencies
		sent     atomic.Int64
		received atomic.Int64
		failed   firstError
	)
	consumeCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var cwg sync.WaitGroup
	for range e.cfg.consumers {
		r, err := t.receiver(q)
		if err != nil {
			return benchResult{}, err
		}
		cwg.Go(func() {
			for consumeCtx.Err() == nil {
				got, err := r.Receive(consumeCtx, e.cfg.leaseBatch)
				if err != nil {
					if consumeCtx.Err() == nil {
						failed.set(err)
					}
					return
				}
				now := time.Since(epoch)
				for _, m := range got {
					lat.add(now - time.Duration(binary.BigEndian.Uint64(m.Body)))
					if err := r.Complete(consumeCtx, m); err != nil {
						if consumeCtx.Err() == nil {
							failed.set(err)
						}
						return
					}
					received.Add(1)
				}
			}
		})
	}
	start := time.Now()
	_, _, err := timed(ctx, e.cfg.producers, e.cfg.duration, func(ctx context.Context, worker int) (int, error) {
		s, err := t.sender(q)
		if err != nil {
			return 0, err
		}
		msgs := make([]*sluice.Message, e.cfg.batch)
		for i := range msgs {
			p := slices.Clone(body)
			binary.BigEndian.PutUint64(p, uint64(time.Since(epoch)))
			msgs[i] = &sluice.Message{Body: p}
		}
		if _, err := s.SendBatch(ctx, msgs); err != nil {
			return 0, err
		}
		sent.Add(int64(len(msgs)))
		return len(msgs), nil
	})
	if err != nil {
		return benchResult{}, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for received.Load() < sent.Load() && time.Now().Before(deadline) && failed.get() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	stopConsumers()
	cwg.Wait()
	if err := failed.get(); err != nil {
		return benchResult{}, err
	}
	if received.Load() < sent.Load() {
		return benchResult{}, fmt.Errorf("consumers completed %d of %d messages sent within 30 s of the end", received.Load(), sent.Load())
	}
	r := result(received.Load(), elapsed, &lat)
	r.Producers, r.Consumers, r.Batch, r.Transport = e.cfg.producers, e.cfg.consumers, e.cfg.batch, t.name
	r.Note = "messages/s sent, received and completed (a call each); p50/p99: send to receive"
	return r, nil
}
