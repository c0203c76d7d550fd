package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect/v2"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// Names are case-insensitive, and so are grants: a key granted "Orders*"
// sends to "orders-1" however the caller spells it, lists it, and lists
// the subscriptions of a topic it was granted in another case; a key
// granted elsewhere is refused whatever the spelling.
func TestGrantsIgnoreCase(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		const mixed, other = "grant-case-mixed-0123456789", "grant-case-other-0123456789"
		e := start(t, kind, server.Config{Keys: []server.Key{
			{Name: "mixed", Token: mixed, Grants: []server.Grant{{Actions: server.All,
				Entities: []string{"Orders*", "FEED", "Feed/Subscriptions/*"}}}},
			{Name: "other", Token: other, Grants: []server.Grant{{Actions: server.All, Entities: []string{"payroll"}}}},
		}})
		ctx := t.Context()
		if _, err := e.Lib.CreateQueue(ctx, "orders-1", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Lib.CreateTopic(ctx, "feed", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Lib.CreateSubscription(ctx, "feed", "audit", nil); err != nil {
			t.Fatal(err)
		}
		c := e.Remote(t, &client.Options{Token: mixed})
		for _, name := range []string{"orders-1", "ORDERS-1", "Orders-1"} {
			s, _ := c.NewSender(name)
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte(name)}); err != nil {
				t.Fatalf("send to %q with a grant of Orders*: %v", name, err)
			}
		}
		if st, err := e.Lib.GetQueueStats(ctx, "orders-1"); err != nil || st.Active != 3 {
			t.Fatalf("orders-1 after three sends: %+v, %v", st, err)
		}
		qs, err := c.ListQueues(ctx, "", 10)
		if err != nil || len(qs) != 1 || qs[0].Name != "orders-1" {
			t.Fatalf("ListQueues by a key granted Orders*: %+v, %v", qs, err)
		}
		subs, err := c.ListSubscriptions(ctx, "FEED")
		if err != nil || !slices.ContainsFunc(subs, func(s sluice.SubscriptionInfo) bool { return s.Name == "audit" }) {
			t.Fatalf("ListSubscriptions(FEED) by a key granted Feed/Subscriptions/*: %+v, %v", subs, err)
		}
		o := e.Remote(t, &client.Options{Token: other})
		for _, name := range []string{"orders-1", "ORDERS-1"} {
			s, _ := o.NewSender(name)
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte("no")}); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("send to %q by a key granted payroll: %v, want PERMISSION_DENIED", name, err)
			}
		}
	})
}

// A grant's prefix cut inside a "/Subscriptions/" segment, in any case,
// covers the subscriptions it names (grants compare names in lower case)
// and the queues whose names start so: the listings show exactly those,
// no more, no less.
func TestGrantPrefixCutInSubscriptionsSegment(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		const token = "grant-cut-token-0123456789"
		key := server.Key{Name: "cut", Token: token, Grants: []server.Grant{{Actions: server.Receive,
			Entities: []string{"t/Subscr*", "u/subscriptions/s*", "V/SUBSCRIPTIONS*", "w/s*", "x/*"}}}}
		e := start(t, kind, server.Config{Keys: []server.Key{key}})
		ctx := t.Context()
		subs := map[string][]string{"t": {"a", "b"}, "u": {"sa", "sb", "x"}, "v": {"p"}, "w": {"q", "stuff"}, "x": {"y"},
			"y": {"z"}}
		for topic, names := range subs {
			if _, err := e.Lib.CreateTopic(ctx, topic, nil); err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if _, err := e.Lib.CreateSubscription(ctx, topic, n, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		queues := []string{"t/subscribers", "t/sub", "t/Sz", "u/subs", "v/subscriptions", "v/subscriptionsx", "v/sub",
			"w/stock", "w/q", "x/q"}
		for _, q := range queues {
			if _, err := e.Lib.CreateQueue(ctx, q, nil); err != nil {
				t.Fatal(err)
			}
		}
		seesName := func(name string) bool {
			name = strings.ToLower(name)
			for _, p := range key.Grants[0].Entities {
				if strings.HasPrefix(name, strings.ToLower(strings.TrimSuffix(p, "*"))) {
					return true
				}
			}
			return false
		}
		var wantQueues, wantAll []string
		for _, q := range queues {
			if q = sluice.CanonicalName(q); seesName(q) {
				wantQueues, wantAll = append(wantQueues, q), append(wantAll, q)
			}
		}
		for topic, names := range subs {
			var want []string
			for _, n := range names {
				if path := sluice.SubscriptionPath(topic, n); seesName(path) {
					want, wantAll = append(want, n), append(wantAll, path)
				}
			}
			if len(want) == 0 {
				continue
			}
			got := rpcListed(t, e, "EntityService/ListSubscriptions", token, fmt.Sprintf(`{"topic":%q}`, topic), "name")
			if !slices.Equal(got, want) {
				t.Errorf("ListSubscriptions(%s) = %v, want %v", topic, got, want)
			}
		}
		slices.Sort(wantQueues)
		slices.Sort(wantAll)
		if got := rpcListed(t, e, "EntityService/ListQueues", token, `{}`, "name"); !slices.Equal(got, wantQueues) {
			t.Errorf("ListQueues = %v, want %v", got, wantQueues)
		}
		if got := rpcListed(t, e, "EntityService/ListEntityStats", token, `{}`, "entity"); !slices.Equal(got, wantAll) {
			t.Errorf("ListEntityStats = %v, want %v", got, wantAll)
		}
	})
}
