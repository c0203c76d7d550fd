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
	CompleteBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error
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
// --lease-batch until the queue is empty, completing each message with a
// call of its own (as a handler a message does), and in a second round
// each receive's messages with one CompleteBatch call. The server runs in
// this process on the same database, unless --server names one to drive
// (then only its transports run).
func benchAPI(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	url := e.cfg.server
	if url == "" {
		local, stop, err := e.localServer(ctx)
		if err != nil {
			return nil, err
		}
		defer stop()
		url = local
	}
	var transports []apiTransport
	if e.cfg.server == "" {
		lib := e.client
		transports = append(transports, apiTransport{name: "library", queues: lib, drop: lib.DeleteQueue,
			sender:   func(q string) (apiSender, error) { return lib.NewSender(q) },
			receiver: func(q string) (apiReceiver, error) { return lib.NewReceiver(q, nil) }})
	}
	clients, err := e.apiClients(url)
	if err != nil {
		return nil, err
	}
	for _, bc := range clients {
		c := bc.c
		transports = append(transports, apiTransport{name: bc.name, queues: c, drop: c.DeleteQueue, transport: bc.transport,
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

// apiClient is a client of the server under test over one transport.
type apiClient struct {
	name      string // connect-proto, connect-json or grpc
	c         *client.Client
	transport *http.Transport
}

// apiClients returns a client of the server at url for each transport,
// each with connections of its own.
func (e *benchEnv) apiClients(url string) ([]apiClient, error) {
	var out []apiClient
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
		out = append(out, apiClient{name: p.name, c: c, transport: t})
	}
	return out, nil
}

// localServer starts a server in this process on the bench's client, on
// a free loopback port, and returns its URL and what stops it.
func (e *benchEnv) localServer(ctx context.Context) (string, func(), error) {
	srv, err := server.New(server.Config{Client: e.client, Addr: "127.0.0.1:0"})
	if err != nil {
		return "", nil, err
	}
	if err := srv.Start(ctx); err != nil {
		return "", nil, err
	}
	return "http://" + srv.Addr().String(), func() { srv.Shutdown(context.WithoutCancel(ctx)) }, nil
}

// apiSendReceive measures one transport in two rounds: each sends for
// the duration, then receives what was sent; the first completes each
// message with a call of its own, the second a whole receive with one
// CompleteBatch call. It reports the sends of both rounds as one line,
// and each round's receiving.
func (e *benchEnv) apiSendReceive(ctx context.Context, t apiTransport) ([]benchResult, error) {
	var (
		sendLat  latencies
		sent     int64
		sendTime time.Duration
		out      = make([]benchResult, 1, 3)
	)
	for _, batch := range []bool{false, true} {
		n, d, rcv, err := e.apiRound(ctx, t, &sendLat, batch)
		if err != nil {
			return nil, err
		}
		sent, sendTime = sent+n, sendTime+d
		out = append(out, rcv)
	}
	out[0] = result(sent, sendTime, &sendLat)
	out[0].Producers, out[0].Batch, out[0].Transport = e.cfg.producers, e.cfg.batch, t.name
	out[0].Note = "send: messages/s; p50/p99: one SendBatch call"
	return out, nil
}

// apiRound sends for the duration through one transport, adding each
// call's latency to sendLat, then receives and completes what was sent,
// one call a message or (batch) one call a receive. It returns how many
// it sent, in how long, and the receiving's result.
func (e *benchEnv) apiRound(ctx context.Context, t apiTransport, sendLat *latencies, batch bool) (int64, time.Duration, benchResult, error) {
	q := "bench-api-" + t.name + "-" + randomHex(3)
	if _, err := t.queues.CreateQueue(ctx, q, nil); err != nil {
		return 0, 0, benchResult{}, err
	}
	defer t.drop(context.WithoutCancel(ctx), q)
	body := payload(e.cfg.size)
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
		return 0, 0, benchResult{}, err
	}
	var (
		recvLat  latencies
		received atomic.Int64
		failed   firstError
		wg       sync.WaitGroup
	)
	rctx, cancel := context.WithTimeout(ctx, 10*e.cfg.duration+30*time.Second)
	defer cancel()
	// complete settles what one receive returned; the queue is empty once
	// all that was sent is completed, which ends the others' waits.
	complete := func(r apiReceiver, got []*sluice.ReceivedMessage) error {
		sctx := context.WithoutCancel(rctx)
		if batch {
			if err := r.CompleteBatch(sctx, got); err != nil {
				return err
			}
			if received.Add(int64(len(got))) == sent {
				cancel()
			}
			return nil
		}
		for _, m := range got {
			if err := r.Complete(sctx, m); err != nil {
				return err
			}
			if received.Add(1) == sent {
				cancel()
			}
		}
		return nil
	}
	start := time.Now()
	for range e.cfg.consumers {
		r, err := t.receiver(q)
		if err != nil {
			return 0, 0, benchResult{}, err
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
				if err := complete(r, got); err != nil {
					failed.set(err)
					return
				}
			}
		})
	}
	wg.Wait()
	recvTime := time.Since(start)
	if err := failed.get(); err != nil {
		return 0, 0, benchResult{}, err
	}
	if received.Load() < sent {
		return 0, 0, benchResult{}, fmt.Errorf("consumers completed %d of the %d messages sent", received.Load(), sent)
	}
	rcv := result(received.Load(), recvTime, &recvLat)
	rcv.Consumers, rcv.Batch, rcv.Transport = e.cfg.consumers, e.cfg.leaseBatch, t.name
	rcv.Note = "receive: messages/s received and completed, one Complete call a message; p50/p99: one Receive call"
	if batch {
		rcv.Note = "receive: messages/s received and completed, one CompleteBatch call a receive; p50/p99: one Receive call"
	}
	return sent, sendTime, rcv, nil
}
