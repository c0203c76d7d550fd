package server_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// startTenant is start for a tenant the test names, to reach its store.
func startTenant(t *testing.T, kind, service string, cfg server.Config) *env {
	t.Helper()
	c, err := sluice.NewClient(shared.Backend(t, kind), &sluice.Options{Service: service, Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, c, cfg)
}

// Through the API: a remote consumer's subscription that lost records to
// retention faults; ClearFault faults it again; the reposition RPC moves
// it past the gap, records the key's name, and refuses what it must with
// the library's errors; GetConsumerStats shows the server node's
// proposed and stored checkpoints.
func TestRepositionStreamSubscriptionAPI(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		const token = "reposition-ops-token-0123456789"
		service := "t-" + randHex(6)
		e := startTenant(t, kind, service, server.Config{StreamNodes: streamNodes, Keys: []server.Key{{Name: "ops", Token: token,
			Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}}}})
		c := e.Remote(t, &client.Options{Token: token})
		ctx := t.Context()
		id := sluice.StreamID{Namespace: "gap", Key: "k"}
		sub, err := c.Subscribe(ctx, id, "reader", sluice.FromNow())
		if err != nil {
			t.Fatal(err)
		}
		pos, err := c.Publish(ctx, id, sluice.Event{Body: []byte("1")}, sluice.Event{Body: []byte("2")}, sluice.Event{Body: []byte("3")},
			sluice.Event{Body: []byte("4")})
		if err != nil {
			t.Fatal(err)
		}
		part := sluice.PartitionOf(id, e.Lib.StreamPartitions())
		st, err := shared.Backend(t, kind).Store(store.Tenant{Service: service, Provider: sluice.DefaultProvider})
		if err != nil {
			t.Fatal(err)
		}
		// The first two records go, as an expiry of a millisecond deletes
		// them; then the namespace keeps its records again.
		if err := st.SetRetention(ctx, "gap", store.Retention{Expiry: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			info, err := st.PartitionInfo(ctx, part)
			if err != nil {
				t.Fatal(err)
			}
			if info.Trimmed >= pos[1] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d trimmed through %d, not %d, within 30s", part, info.Trimmed, pos[1])
			}
			if _, err := st.(store.Trimmer).TrimConsumed(ctx, &store.TrimConsumedParams{Partition: part, Max: int(pos[1] - info.Trimmed)}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := st.SetRetention(ctx, "gap", store.Retention{}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []int64
		startRemote(t, c, "", func(p *client.StreamProcessor) {
			p.Handle("reader", func(ctx context.Context, ev *sluice.StreamEvent) error {
				mu.Lock()
				got = append(got, ev.Position)
				mu.Unlock()
				return nil
			}, &sluice.ConsumerOptions{OnFailure: sluice.FaultOnFailure}) // a gap faults it
		})
		faulted := func() bool {
			s, err := c.GetStreamSubscription(ctx, sub.ID)
			return err == nil && s.Fault != ""
		}
		waitFor(t, "the subscription faults on the gap", 30*time.Second, faulted)
		if err := c.ClearFault(ctx, sub.ID); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the subscription faults again", 30*time.Second, faulted)

		_, err = c.RepositionStreamSubscription(ctx, sub.ID, sluice.FromPosition(pos[0]), nil)
		if !errors.Is(err, sluice.ErrTrimmed) {
			t.Fatalf("Reposition into the gap: %v, want ErrTrimmed", err)
		}
		_, err = c.RepositionStreamSubscription(ctx, sub.ID, sluice.FromPosition(pos[3]+2), nil)
		if !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Fatalf("Reposition past the head: %v, want ErrInvalidArgument", err)
		}
		_, err = c.RepositionStreamSubscription(ctx, "no-such-subscription", sluice.FromBeginning(), nil)
		if !errors.Is(err, sluice.ErrSubscriptionNotFound) {
			t.Fatalf("Reposition of a missing subscription: %v, want ErrSubscriptionNotFound", err)
		}
		for _, body := range []string{`{"subscription":"` + sub.ID + `"}`, `{"subscription":"` + sub.ID + `","target":"REPOSITION_TARGET_HEAD","position":3}`,
			`{"subscription":"` + sub.ID + `","target":"REPOSITION_TARGET_POSITION","position":0}`} {
			status, ce := post(t, e, "StreamService/RepositionStreamSubscription", token, body)
			wantStatus(t, "Reposition "+body, status, ce, 400, "invalid_argument", "INVALID_ARGUMENT", "")
		}
		r, err := c.RepositionStreamSubscription(ctx, sub.ID, sluice.FromBeginning(), nil)
		if err != nil || r.To != "oldest" || r.By != "ops" || r.ToPositions[part] != pos[1] || r.FromPositions[part] != 0 {
			t.Fatalf("Reposition to the oldest = %+v, %v", r, err)
		}
		waitFor(t, "the events after the gap", 30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Equal(got, pos[2:])
		})
		s, err := c.GetStreamSubscription(ctx, sub.ID)
		if err != nil || s.Fault != "" || s.Repositions != 1 || s.LastReposition == nil || s.LastReposition.By != "ops" ||
			s.LastReposition.ToPositions[part] != pos[1] {
			t.Fatalf("after the reposition: %+v (last %+v), %v", s, s.LastReposition, err)
		}
		var stats []sluice.StreamPartitionStats
		waitFor(t, "the consumer's stats show its partition", 30*time.Second, func() bool {
			_, stats, err = c.ConsumerStats(ctx, "reader")
			return err == nil && slices.ContainsFunc(stats, func(ps sluice.StreamPartitionStats) bool {
				return ps.Partition == part && ps.ProposedCheckpoint == pos[3] && ps.StoredCheckpoint == pos[3]
			})
		})
		if _, _, err := c.ConsumerStats(ctx, "nobody"); err == nil {
			t.Fatal("ConsumerStats of a consumer no stream runs here: no error")
		}
	})
}

// A replay through the API goes through the stream's ordered delivery on
// the server's node: it never overlaps a live delivery of the same
// stream to the remote consumer.
func TestReplayThroughAPINeverOverlapsLive(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{StreamNodes: streamNodes})
		c := e.Remote(t, nil)
		ctx := t.Context()
		var healed atomic.Bool
		var mu sync.Mutex
		active, overlaps, handled := 0, 0, 0
		p := startRemote(t, c, "", func(p *client.StreamProcessor) {
			p.Handle("rp", func(ctx context.Context, ev *sluice.StreamEvent) error {
				mu.Lock()
				active++
				if active > 1 {
					overlaps++
				}
				mu.Unlock()
				defer func() {
					mu.Lock()
					active--
					handled++
					mu.Unlock()
				}()
				if string(ev.Body) == "bad" && !healed.Load() {
					return errors.New("bad")
				}
				time.Sleep(20 * time.Millisecond)
				return nil
			}, &sluice.ConsumerOptions{Namespace: "rp", MaxAttempts: 1})
		})
		id := sluice.StreamID{Namespace: "rp", Key: "k"}
		bad := make([]sluice.Event, 5)
		for i := range bad {
			bad[i] = sluice.Event{Body: []byte("bad")}
		}
		if _, err := c.Publish(ctx, id, bad...); err != nil {
			t.Fatal(err)
		}
		const sub = "ns/rp/rp"
		waitFor(t, "the bad events parked", 30*time.Second, func() bool {
			parked, err := c.ParkedEvents(ctx, sub, 10)
			return err == nil && len(parked) == len(bad)
		})
		healed.Store(true)
		live := make([]sluice.Event, 60)
		for i := range live {
			live[i] = sluice.Event{Body: []byte("live")}
		}
		if _, err := c.Publish(ctx, id, live...); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "live deliveries", 30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return handled >= len(bad)+3
		})
		if n, err := p.Replay(ctx, sub, 10); err != nil || n != len(bad) {
			t.Fatalf("Replay = %d, %v; want %d", n, err, len(bad))
		}
		waitFor(t, "every delivery", 60*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return handled >= 2*len(bad)+len(live)
		})
		mu.Lock()
		defer mu.Unlock()
		if overlaps > 0 {
			t.Fatalf("%d deliveries overlapped another of the same stream", overlaps)
		}
	})
}
