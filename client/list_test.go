package client_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
)

// The listings by prefix answer alike on the library and through a
// server, on every backend: the same names, pages and errors.
func TestListWithPrefix(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			lib, remote := libraryAndRemote(t, kind)
			seedListings(t, lib)
			for name, api := range map[string]sluice.API{"library": lib, "remote": remote} {
				t.Run(name, func(t *testing.T) { checkListings(t, api) })
			}
		})
	}
}

// seedListings creates queues a-1, a-2 and b-1, and topics a-t and b-t,
// a-t with subscriptions s-1, s-2 and x-1.
func seedListings(t *testing.T, api sluice.API) {
	ctx := t.Context()
	for _, q := range []string{"a-1", "A-2", "b-1"} {
		if _, err := api.CreateQueue(ctx, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tp := range []string{"a-t", "b-t"} {
		if _, err := api.CreateTopic(ctx, tp, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"s-1", "s-2", "x-1"} {
		if _, err := api.CreateSubscription(ctx, "a-t", s, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func checkListings(t *testing.T, api sluice.API) {
	ctx := t.Context()
	queues, err := api.ListQueuesWithPrefix(ctx, "A-", "", 10)
	if got := names(queues, func(q sluice.QueueInfo) string { return q.Name }); err != nil || !slices.Equal(got, []string{"a-1", "a-2"}) {
		t.Errorf("ListQueuesWithPrefix(A-) = %v, %v; want a-1 a-2", got, err)
	}
	queues, err = api.ListQueuesWithPrefix(ctx, "a-", "a-1", 1)
	if got := names(queues, func(q sluice.QueueInfo) string { return q.Name }); err != nil || !slices.Equal(got, []string{"a-2"}) {
		t.Errorf("ListQueuesWithPrefix(a-, after a-1, 1) = %v, %v; want a-2", got, err)
	}
	topics, err := api.ListTopicsWithPrefix(ctx, "b", "", 10)
	if got := names(topics, func(tp sluice.TopicInfo) string { return tp.Name }); err != nil || !slices.Equal(got, []string{"b-t"}) {
		t.Errorf("ListTopicsWithPrefix(b) = %v, %v; want b-t", got, err)
	}
	subs, err := api.ListSubscriptionsWithPrefix(ctx, "a-t", "s-", "s-1", 10)
	if got := names(subs, func(s sluice.SubscriptionInfo) string { return s.Name }); err != nil || !slices.Equal(got, []string{"s-2"}) {
		t.Errorf("ListSubscriptionsWithPrefix(a-t, s-, after s-1) = %v, %v; want s-2", got, err)
	}
	if subs, err := api.ListSubscriptionsWithPrefix(ctx, "no-such-topic", "", "", 10); err != nil || len(subs) != 0 {
		t.Errorf("ListSubscriptionsWithPrefix of a missing topic = %v, %v; want none, no error", subs, err)
	}
	entities, err := api.ListMessageEntities(ctx, "a", "", 10)
	wantEntities := []sluice.MessageEntity{{Path: "a-1"}, {Path: "a-2"},
		{Path: sluice.SubscriptionPath("a-t", "s-1"), Topic: "a-t"}, {Path: sluice.SubscriptionPath("a-t", "s-2"), Topic: "a-t"},
		{Path: sluice.SubscriptionPath("a-t", "x-1"), Topic: "a-t"}}
	if err != nil || !slices.Equal(entities, wantEntities) {
		t.Errorf("ListMessageEntities(a) = %v, %v; want %v", entities, err, wantEntities)
	}
	if entities, err := api.ListMessageEntities(ctx, "zzz", "", 10); err != nil || len(entities) != 0 {
		t.Errorf("ListMessageEntities(zzz) = %v, %v; want none", entities, err)
	}
	for _, max := range []int{0, -1, 1001} {
		if _, err := api.ListQueuesWithPrefix(ctx, "", "", max); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("ListQueuesWithPrefix max %d: %v, want ErrInvalidArgument", max, err)
		}
		if _, err := api.ListTopicsWithPrefix(ctx, "", "", max); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("ListTopicsWithPrefix max %d: %v, want ErrInvalidArgument", max, err)
		}
		if _, err := api.ListSubscriptionsWithPrefix(ctx, "a-t", "", "", max); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("ListSubscriptionsWithPrefix max %d: %v, want ErrInvalidArgument", max, err)
		}
		if _, err := api.ListMessageEntities(ctx, "", "", max); !errors.Is(err, sluice.ErrInvalidArgument) {
			t.Errorf("ListMessageEntities max %d: %v, want ErrInvalidArgument", max, err)
		}
	}
	if got, err := api.ListQueuesWithPrefix(ctx, "", "", 1000); err != nil || len(got) != 3 {
		t.Errorf("ListQueuesWithPrefix max 1000 = %d queues, %v; want 3", len(got), err)
	}
}

func names[E any](es []E, name func(E) string) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = name(e)
	}
	return out
}
