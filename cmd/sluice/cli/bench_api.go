package cli

import (
	"context"
	"fmt"
	"net/http"
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

// benchAPI sends and then receives through the library directly, and
// through a server over the Connect protocol in protobuf and in JSON and
// over gRPC, one after the other on queues of their own: --producers send
// batches of --batch for --duration, then --consumers receive up to
// --lease-batch and complete each message with a call of its own, as an
// application does, until the queue is empty. The server runs in this
// process on the same database, unless --server names one to drive (then
// only its transports run).
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
		rs, err := e.apiSendReceive(ctx, t)
		if t.transport != nil {
			t.transport.CloseIdleConnections()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// apiSendReceive sends for the duration, then receives and completes
// what was sent, through one transport, and reports each phase.
func (e *benchEnv) apiSendReceive(ctx context.Context, t apiTransport) ([]benchResult, error) {
	q := "bench-api-" + t.name + "-" + randomHex(3)
	if _, err := t.queues.CreateQueue(ctx, q, nil); err != nil {
		return nil, err
	}
	defer t.drop(context.WithoutCancel(ctx), q)
	body := payload(e.cfg.size)
	var sendLat latencies
	sent, sendTime, err := timed(ctx, e.cfg.producers, e.cfg.duration, func(ctx context.Context, worker int) (int, error) {
		s, err := t.sender(q)
		if err != nil {
			return 0, err
		}
		msgs := make([]*sluice.Message, e.cfg.batch)
		for i := range msgs {
			msgs[i] = &sluice.Message{Body: body}
		}
		began := time.Now()
		if _, err := s.SendBatch(ctx, msgs); err != nil {
			return 0, err
		}
		sendLat.add(time.Since(began))
		return len(msgs), nil
	})
	if err != nil {
		return nil, err
	}
	var (
		recvLat  latencies
		received atomic.Int64
		failed   firstError
		wg       sync.WaitGroup
	)
	rctx, cancel := context.WithTimeout(ctx, 10*e.cfg.duration+30*time.Second)
	defer cancel()
	start := time.Now()
	for range e.cfg.consumers {
		r, err := t.receiver(q)
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			for received.Load() < sent && rctx.Err() == nil {
				began := time.Now()
				got, err := r.Receive(rctx, e.cfg.leaseBatch)
				if err != nil {
					if received.Load() < sent { // else the last one was taken: cancel ended the wait
						failed.set(err)
					}
					return
				}
				recvLat.add(time.Since(began))
				for _, m := range got {
					if err := r.Complete(context.WithoutCancel(rctx), m); err != nil {
						failed.set(err)
						return
					}
					if received.Add(1) == sent {
						cancel() // the queue is empty: end the others' waits
					}
				}
			}
		})
	}
	wg.Wait()
	recvTime := time.Since(start)
	if err := failed.get(); err != nil {
		return nil, err
	}
	if received.Load() < sent {
		return nil, fmt.Errorf("consumers completed %d of the %d messages sent", received.Load(), sent)
	}
	snd := result(sent, sendTime, &sendLat)
	snd.Producers, snd.Batch, snd.Transport = e.cfg.producers, e.cfg.batch, t.name
	snd.Note = "send: messages/s; p50/p99: one SendBatch call"
	rcv := result(received.Load(), recvTime, &recvLat)
	rcv.Consumers, rcv.Batch, rcv.Transport = e.cfg.consumers, e.cfg.leaseBatch, t.name
	rcv.Note = "receive: messages/s received and completed (a call each); p50/p99: one Receive call"
	return []benchResult{snd, rcv}, nil
}
