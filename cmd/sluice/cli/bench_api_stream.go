package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// benchAPIStream runs the stream-e2e measurement through the library's
// stream processor, then through a server's Consume over the Connect
// protocol in protobuf and in JSON and over gRPC, each on a namespace of
// its own: --producers publish --batch events a call to 1,000 streams
// through the library for --duration while --subscriptions consumers
// handle them. It reports events delivered to every consumer per second
// and publish-to-handler latency, for each transport. The server runs in
// this process on the same database.
func benchAPIStream(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	url, stop, err := e.localServer(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()

	r, err := benchStreamE2E(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("library: %w", err)
	}
	r[0].Transport = "library"
	out := r
	clients, err := e.apiClients(url)
	if err != nil {
		return nil, err
	}
	for _, p := range clients {
		c := p.c
		ns := "bench-" + p.name + "-" + randomHex(3)
		r, err := e.streamE2E(ctx, ns, func(ns string, h sluice.StreamHandler) (func(), error) {
			proc := c.NewStreamProcessor(nil)
			var names []string
			for i := range e.cfg.subs {
				name := ns + "-consumer-" + strconv.Itoa(i)
				names = append(names, name)
				if err := proc.Handle(name, h, &sluice.ConsumerOptions{Namespace: ns}); err != nil {
					return nil, err
				}
			}
			if err := proc.Start(ctx); err != nil {
				return nil, err
			}
			stop := func() { proc.Stop(context.WithoutCancel(ctx)) }
			if err := e.waitGroupsPulling(ctx, names); err != nil {
				stop()
				return nil, err
			}
			return stop, nil
		})
		p.transport.CloseIdleConnections()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		r.Transport = p.name
		out = append(out, r)
	}
	return out, nil
}

// waitGroupsPulling waits until the server's node of each consumer
// holds every partition.
func (e *benchEnv) waitGroupsPulling(ctx context.Context, groups []string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := e.client.ClusterStatus(ctx)
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range st.Nodes {
			if n.Alive && slices.Contains(groups, n.Group) && len(n.Partitions) == benchPartitions {
				ready++
			}
		}
		if ready == len(groups) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d consumers pull every partition after 30 s", ready, len(groups))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
