package sluice_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store"
)

// A topic whose name is too long for any subscription path (the longest
// name allowed, say) works like any other: it takes sends, lists no
// subscriptions, updates and deletes; only a subscription, whose path
// would be too long, is refused.
func TestTopicNameTooLongForSubscriptions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		name := strings.Repeat("t", store.MaxNameLen)
		if _, err := c.CreateTopic(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
		s, err := c.NewSender(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte("x")}); err != nil {
			t.Fatalf("send: %v", err)
		}
		if subs, err := c.ListSubscriptions(ctx, name); err != nil || len(subs) != 0 {
			t.Fatalf("list subscriptions: %v, %v", subs, err)
		}
		if _, err := c.CreateSubscription(ctx, name, "s", nil); !errors.Is(err, sluice.ErrInvalidName) {
			t.Fatalf("create subscription: %v, want ErrInvalidName", err)
		}
		if _, err := c.UpdateTopic(ctx, name, sluice.TopicProperties{MaxMessageSize: 2048}); err != nil {
			t.Fatalf("update: %v", err)
		}
		if err := c.DeleteTopic(ctx, name); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, err := c.GetTopic(ctx, name); !errors.Is(err, sluice.ErrEntityNotFound) {
			t.Fatalf("get once deleted: %v, want ErrEntityNotFound", err)
		}
	})
}
