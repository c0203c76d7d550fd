package server_test

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// A listing's prefix narrows what the key's grants show, never widens
// it: a key granted names starting "a" sees, under any prefix, only
// those; a prefix outside its grants lists nothing (not a refusal).
func TestListPrefixWithinGrants(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		const token = "list-prefix-token-0123456789"
		key := server.Key{Name: "a-only", Token: token, Grants: []server.Grant{{Actions: server.Receive, Entities: []string{"a*"}}}}
		e := start(t, kind, server.Config{Keys: []server.Key{key}})
		ctx := t.Context()
		for _, q := range []string{"a-1", "a-2", "ab", "b-1"} {
			if _, err := e.Lib.CreateQueue(ctx, q, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, tp := range []string{"a-t", "b-t"} {
			if _, err := e.Lib.CreateTopic(ctx, tp, nil); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"s-1", "s-2", "s-3", "x"} {
				if _, err := e.Lib.CreateSubscription(ctx, tp, s, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, c := range []struct {
			procedure, body, field string
			want                   []string
		}{
			{"EntityService/ListQueues", `{"prefix":"A-"}`, "name", []string{"a-1", "a-2"}},
			{"EntityService/ListQueues", `{"prefix":"a"}`, "name", []string{"a-1", "a-2", "ab"}},
			{"EntityService/ListQueues", `{"prefix":"b"}`, "name", nil},
			{"EntityService/ListQueues", `{"prefix":"a-","after":"a-1"}`, "name", []string{"a-2"}},
			{"EntityService/ListTopics", `{"prefix":"a"}`, "name", []string{"a-t"}},
			{"EntityService/ListTopics", `{"prefix":"b"}`, "name", nil},
			{"EntityService/ListSubscriptions", `{"topic":"a-t","prefix":"s-","after":"s-1","max":1}`, "name", []string{"s-2"}},
			{"EntityService/ListSubscriptions", `{"topic":"a-t","prefix":"S-"}`, "name", []string{"s-1", "s-2", "s-3"}},
			{"EntityService/ListEntityStats", `{"prefix":"a-t/"}`, "entity",
				[]string{sluice.SubscriptionPath("a-t", "s-1"), sluice.SubscriptionPath("a-t", "s-2"),
					sluice.SubscriptionPath("a-t", "s-3"), sluice.SubscriptionPath("a-t", "x")}},
			{"EntityService/ListEntityStats", `{"prefix":"b"}`, "entity", nil},
		} {
			if got := rpcListed(t, e, c.procedure, token, c.body, c.field); !slices.Equal(got, c.want) {
				t.Errorf("%s %s = %v, want %v", c.procedure, c.body, got, c.want)
			}
		}
		// A max out of bounds is refused, as ListQueues refuses it.
		if status, raw := postRaw(t, e, "EntityService/ListSubscriptions", token, `{"topic":"a-t","max":1001}`); status == 200 {
			t.Errorf("ListSubscriptions max 1001: status %d %s, want a refusal", status, raw)
		}
	})
}
