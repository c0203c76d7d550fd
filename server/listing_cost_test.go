package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// countingBackend counts the reads of entities and stream subscriptions
// its stores make (the listings, lookups and counts a listing of the API
// costs), and the rows they return.
type countingBackend struct {
	store.Backend
	reads, rows atomic.Int64
}

func (b *countingBackend) Store(t store.Tenant) (store.Store, error) {
	st, err := b.Backend.Store(t)
	if err != nil {
		return nil, err
	}
	return &countingStore{Store: st, reads: &b.reads, rows: &b.rows}, nil
}

type countingStore struct {
	store.Store
	reads, rows *atomic.Int64
}

func (s *countingStore) ListQueues(ctx context.Context, p *store.ListParams) ([]store.QueueSettings, error) {
	s.reads.Add(1)
	qs, err := s.Store.ListQueues(ctx, p)
	s.rows.Add(int64(len(qs)))
	return qs, err
}

func (s *countingStore) GetQueue(ctx context.Context, name string) (store.QueueSettings, error) {
	s.reads.Add(1)
	return s.Store.GetQueue(ctx, name)
}

func (s *countingStore) QueueStats(ctx context.Context, queue string) (store.QueueStats, error) {
	s.reads.Add(1)
	return s.Store.QueueStats(ctx, queue)
}

func (s *countingStore) DeadLetterReasons(ctx context.Context, queue string) (map[string]int64, error) {
	s.reads.Add(1)
	return s.Store.DeadLetterReasons(ctx, queue)
}

func (s *countingStore) Subscriptions(ctx context.Context, p *store.SubscriptionFilter) ([]store.Subscription, error) {
	s.reads.Add(1)
	subs, err := s.Store.Subscriptions(ctx, p)
	s.rows.Add(int64(len(subs)))
	return subs, err
}

func (s *countingStore) ListSubscriptions(ctx context.Context, p *store.ListSubscriptionsParams) ([]store.Subscription, error) {
	s.reads.Add(1)
	subs, err := s.Store.ListSubscriptions(ctx, p)
	s.rows.Add(int64(len(subs)))
	return subs, err
}

// startCounting starts a server as start does, over a backend that
// counts its reads.
func startCounting(t *testing.T, kind string, cfg server.Config) (*env, *countingBackend) {
	t.Helper()
	// The history samples at its longest interval, whose first sample
	// comes after the test: its reads would count.
	cfg.HistoryInterval = 5 * time.Minute
	b := &countingBackend{Backend: shared.Backend(t, kind)}
	c, err := sluice.NewClient(b, &sluice.Options{Service: "t-" + randHex(6), Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, c, cfg), b
}

// Listings cost what the key may see, not what is in the database: the
// reads each listing makes for a key with a few grants, and for one that
// sees nothing, stay the same when more than a page of entities it may
// not see (queues, topics and subscriptions, before and after its names)
// are added.
func TestListingCostIgnoresHiddenEntities(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		keys := []server.Key{
			{Name: "admin", Token: "cost-admin-token-0123456789", Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
			{Name: "mine", Token: "cost-mine-token-0123456789", Grants: []server.Grant{{Actions: server.Receive,
				Entities: []string{"mine-*", "feed/Subscriptions/mine-*", "lone", "feed"}}}},
			{Name: "blind", Token: "cost-blind-token-0123456789", Grants: []server.Grant{{Actions: server.All,
				Entities: []string{"nothing-here-*"}}}},
			{Name: "mixed", Token: "cost-mixed-token-0123456789", Grants: []server.Grant{
				{Actions: server.Send, Entities: []string{"a-00*", "a-0100", "mind-01*", "mind-1*", "lone", "$metrics"}},
				{Actions: server.Manage, Entities: []string{"a-0*", "mine-2", "mi*", "z*"}}}},
		}
		e, b := startCounting(t, kind, server.Config{Keys: keys})
		ctx := t.Context()
		must := func(_ any, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []string{"mine-1", "mine-2", "lone"} {
			must(e.Lib.CreateQueue(ctx, q, nil))
		}
		must(e.Lib.CreateTopic(ctx, "feed", nil))
		must(e.Lib.CreateTopic(ctx, "mine-topic", nil))
		must(e.Lib.CreateSubscription(ctx, "feed", "mine-sub", nil))
		calls := []struct{ procedure, token, body string }{
			{"EntityService/ListQueues", "cost-mine-token-0123456789", `{"max":1}`},
			{"EntityService/ListQueues", "cost-mine-token-0123456789", `{}`},
			{"EntityService/ListQueues", "cost-blind-token-0123456789", `{"max":1}`},
			{"EntityService/ListTopics", "cost-mine-token-0123456789", `{}`},
			{"EntityService/ListTopics", "cost-blind-token-0123456789", `{"max":1}`},
			{"EntityService/ListSubscriptions", "cost-mine-token-0123456789", `{"topic":"feed"}`},
			{"EntityService/ListEntityStats", "cost-mine-token-0123456789", `{}`},
			{"EntityService/ListEntityStats", "cost-blind-token-0123456789", `{"max":1}`},
		}
		type reads struct{ calls, rows int64 }
		cost := func() []reads {
			var out []reads
			for _, c := range calls {
				calls, rows := b.reads.Load(), b.rows.Load()
				if status, body := postRaw(t, e, c.procedure, c.token, c.body); status != http.StatusOK {
					t.Fatalf("%s %s: %d %s", c.procedure, c.body, status, body)
				}
				out = append(out, reads{b.reads.Load() - calls, b.rows.Load() - rows})
			}
			return out
		}
		few := cost()
		// More than a page of what the keys may not see, around their names.
		const hidden = 1100
		for i := range hidden {
			switch i % 4 {
			case 0:
				must(e.Lib.CreateQueue(ctx, fmt.Sprintf("a-%04d", i), nil))
			case 1:
				must(e.Lib.CreateQueue(ctx, fmt.Sprintf("mind-%04d", i), nil))
			case 2:
				must(e.Lib.CreateTopic(ctx, fmt.Sprintf("t-%04d", i), nil))
			case 3:
				must(e.Lib.CreateSubscription(ctx, "feed", fmt.Sprintf("other-%04d", i), nil))
			}
		}
		many := cost()
		for i, c := range calls {
			if many[i] != few[i] {
				t.Errorf("%s %s by %s: %+v reads with few entities, %+v with %d more it may not see",
					c.procedure, c.body, c.token[:10], few[i], many[i], hidden)
			}
		}
		t.Logf("reads per listing: %v", many)
		// Paged, a listing shows what the key may see, all of it, in order.
		for _, token := range []string{"cost-mine-token-0123456789", "cost-mixed-token-0123456789", "cost-admin-token-0123456789"} {
			var key server.Key
			for _, k := range keys {
				if k.Token == token {
					key = k
				}
			}
			all, err := e.Lib.ListQueues(ctx, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			more, err := e.Lib.ListQueues(ctx, all[len(all)-1].Name, 1000)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, q := range append(all, more...) {
				if sees(key, q.Name) {
					want = append(want, q.Name)
				}
			}
			var got []string
			for after := ""; ; {
				page := rpcListed(t, e, "EntityService/ListQueues", token, fmt.Sprintf(`{"max":7,"after":%q}`, after), "name")
				got = append(got, page...)
				if len(page) < 7 {
					break
				}
				after = page[len(page)-1]
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s lists %d queues in pages of 7, want %d: %v", key.Name, len(got), len(want), got)
			}
		}
	})
}

// sees reports whether the key has a permission on entity, as the
// server's grants read.
func sees(k server.Key, entity string) bool {
	for _, g := range k.Grants {
		for _, p := range g.Entities {
			if prefix, ok := strings.CutSuffix(p, "*"); g.Actions != 0 && (ok && strings.HasPrefix(entity, prefix) || p == entity) {
				return true
			}
		}
	}
	return false
}

// Listing a stream's subscriptions costs what the key may see, not what
// other consumers subscribed: the reads and rows a listing makes for a
// key with a few consumer grants, and for one that may receive the
// namespace but no consumer, stay the same when more than a page of
// other consumers' subscriptions (to the stream, named before and after
// the key's consumers, and to another stream) are added. (A grant of the
// namespace names a consumer too: blind sees consumer "ledger"'s.) Paged,
// a listing shows what the key may see (grants compare names in lower
// case), all of it, in order, and a consumer or a prefix asked for
// narrows it.
func TestStreamSubscriptionListingCost(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		keys := []server.Key{
			{Name: "admin", Token: "scost-admin-token-0123456789", Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
			{Name: "mine", Token: "scost-mine-token-0123456789", Grants: []server.Grant{{Actions: server.Receive,
				Entities: []string{"ledger", "mine-*", "lone"}}}},
			{Name: "blind", Token: "scost-blind-token-0123456789", Grants: []server.Grant{{Actions: server.Receive,
				Entities: []string{"ledger"}}}},
			{Name: "mixed", Token: "scost-mixed-token-0123456789", Grants: []server.Grant{
				{Actions: server.Receive, Entities: []string{"LEDGER", "A-00*", "mind-01*", "Zed", "$metrics"}},
				{Actions: server.Send, Entities: []string{"mine-*", "*"}}}},
		}
		e, b := startCounting(t, kind, server.Config{Keys: keys})
		ctx := t.Context()
		sid := sluice.StreamID{Namespace: "ledger", Key: "k1"}
		subscribe := func(id sluice.StreamID, consumer string) {
			t.Helper()
			if _, err := e.Lib.Subscribe(ctx, id, consumer, sluice.FromNow()); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []string{"mine-1", "Mine-2", "mine-1", "lone", "zed", "ledger"} {
			subscribe(sid, c)
		}
		calls := []struct{ token, body string }{
			{"scost-mine-token-0123456789", `{"stream":{"namespace":"ledger","key":"k1"}}`},
			{"scost-mine-token-0123456789", `{"stream":{"namespace":"ledger","key":"k1"},"max":1}`},
			{"scost-mine-token-0123456789", `{"stream":{"namespace":"ledger","key":"k1"},"consumerPrefix":"mine-"}`},
			{"scost-blind-token-0123456789", `{"stream":{"namespace":"ledger","key":"k1"}}`},
		}
		type reads struct{ calls, rows int64 }
		cost := func() []reads {
			var out []reads
			for _, c := range calls {
				calls, rows := b.reads.Load(), b.rows.Load()
				if status, body := postRaw(t, e, "StreamService/ListStreamSubscriptions", c.token, c.body); status != http.StatusOK {
					t.Fatalf("ListStreamSubscriptions %s: %d %s", c.body, status, body)
				}
				out = append(out, reads{b.reads.Load() - calls, b.rows.Load() - rows})
			}
			return out
		}
		few := cost()
		const hidden = 1100
		for i := range hidden {
			switch i % 4 {
			case 0:
				subscribe(sid, fmt.Sprintf("a-%04d", i))
			case 1:
				subscribe(sid, fmt.Sprintf("mind-%04d", i))
			case 2:
				subscribe(sid, fmt.Sprintf("z-%04d", i))
			case 3:
				subscribe(sluice.StreamID{Namespace: "ledger", Key: "k2"}, fmt.Sprintf("mine-%04d", i))
			}
		}
		many := cost()
		for i, c := range calls {
			if many[i] != few[i] {
				t.Errorf("%s by %s: %+v reads with few subscriptions, %+v with %d more it may not see",
					c.body, c.token[:11], few[i], many[i], hidden)
			}
		}
		t.Logf("reads per listing: %v", many)
		all, err := e.Lib.StreamSubscriptions(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			var want []string
			for _, s := range all {
				if receives(k, s.Consumer) {
					want = append(want, s.ID)
				}
			}
			var got []string
			for after := [2]string{}; ; {
				status, raw := postRaw(t, e, "StreamService/ListStreamSubscriptions", k.Token,
					fmt.Sprintf(`{"stream":{"namespace":"ledger","key":"k1"},"max":7,"afterConsumer":%q,"afterId":%q}`, after[0], after[1]))
				if status != http.StatusOK {
					t.Fatalf("%s: %d %s", k.Name, status, raw)
				}
				var res struct {
					Subscriptions []struct{ ID, Consumer string }
				}
				if err := json.Unmarshal([]byte(raw), &res); err != nil {
					t.Fatal(err)
				}
				for _, s := range res.Subscriptions {
					got = append(got, s.ID)
				}
				if len(res.Subscriptions) < 7 {
					break
				}
				last := res.Subscriptions[len(res.Subscriptions)-1]
				after = [2]string{last.Consumer, last.ID}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s lists %d subscriptions in pages of 7, want %d", k.Name, len(got), len(want))
			}
		}
		// A consumer or a prefix asked for narrows what the grants show.
		for _, c := range []struct {
			token, filter string
			want          int
		}{
			{"scost-mine-token-0123456789", `"consumer":"MINE-1"`, 2},
			{"scost-mine-token-0123456789", `"consumerPrefix":"Mine-"`, 3},
			{"scost-mine-token-0123456789", `"consumerPrefix":"a-"`, 0},
			{"scost-mixed-token-0123456789", `"consumer":"mine-1"`, 0},
			{"scost-mixed-token-0123456789", `"consumer":"ZED"`, 1},
			{"scost-mixed-token-0123456789", `"consumerPrefix":"a-000"`, 3},
			{"scost-mixed-token-0123456789", `"consumerPrefix":"mind-01"`, 25},
		} {
			body := `{"stream":{"namespace":"ledger","key":"k1"},"max":1000,` + c.filter + `}`
			if got := rpcListed(t, e, "StreamService/ListStreamSubscriptions", c.token, body, "consumer"); len(got) != c.want {
				t.Errorf("%s by %s lists %v, want %d", body, c.token[:11], got, c.want)
			}
		}
	})
}

// receives reports whether the key may receive for consumer, as the
// server's grants read: in lower case.
func receives(k server.Key, consumer string) bool {
	consumer = strings.ToLower(consumer)
	for _, g := range k.Grants {
		for _, p := range g.Entities {
			p = strings.ToLower(p)
			if prefix, ok := strings.CutSuffix(p, "*"); g.Actions&server.Receive != 0 &&
				(ok && strings.HasPrefix(consumer, prefix) || p == consumer) {
				return true
			}
		}
	}
	return false
}
