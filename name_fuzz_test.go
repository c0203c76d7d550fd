package sluice_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store"
)

// maxSubscriptionNameLen is Service Bus's bound on subscription and rule
// names.
const maxSubscriptionNameLen = 50

// FuzzEntityName creates queues, topics, subscriptions and rules named by
// arbitrary text on a SQLite-backed client, as the API does with the
// names clients send. A refused name fails with ErrInvalidName, and only
// a name that storage's rule refuses is refused (or a queue or topic
// name holding a subscription path, or a subscription or rule name over
// 50 characters). An accepted name round trips: the entity reads back
// under it, is listed, is the same entity in any case (a create in
// another case fails with ErrEntityExists), and is deleted by it.
func FuzzEntityName(f *testing.F) {
	for _, s := range []string{
		"", "a", "orders", "orders/eu", "Orders.EU-1_x", "-a", "a-", "a b", "é", "a/Subscriptions/b", "A/SUBSCRIPTIONS/B",
		strings.Repeat("q", store.MaxNameLen), strings.Repeat("q", store.MaxNameLen+1), strings.Repeat("s", 51), "\xff",
	} {
		for kind := range uint8(3) {
			f.Add(kind, s)
		}
	}
	ctx := f.Context()
	c, err := sluice.Open(ctx, "sqlite://"+f.TempDir()+"/fuzz.db", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	if _, err := c.CreateTopic(ctx, "topic", nil); err != nil {
		f.Fatal(err)
	}
	if _, err := c.CreateSubscription(ctx, "topic", "sub", nil); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, kind uint8, name string) {
		ctx := t.Context()
		if strings.EqualFold(name, "topic") || strings.EqualFold(name, "sub") {
			return // taken by the entities every case shares
		}
		switch kind % 3 {
		case 0:
			checkEntityName(t, name, queueOps(ctx, c))
		case 1:
			checkEntityName(t, name, topicOps(ctx, c))
		case 2:
			checkEntityName(t, name, subscriptionOps(ctx, c))
			checkRuleName(t, ctx, c, name)
		}
	})
}

// entityOps are the calls FuzzEntityName makes on one kind of entity;
// get and list return the names stored.
type entityOps struct {
	kind   string
	valid  func(name string) bool
	create func(name string) error
	get    func(name string) (string, error)
	list   func() ([]string, error)
	delete func(name string) error
}

// validEntityName is the rule of queue and topic names.
func validEntityName(name string) bool {
	return store.ValidateName("queue", name) == nil && !strings.Contains(strings.ToLower(name), "/subscriptions/")
}

func queueOps(ctx context.Context, c *sluice.Client) entityOps {
	return entityOps{kind: "queue", valid: validEntityName,
		create: func(name string) error { _, err := c.CreateQueue(ctx, name, nil); return err },
		get:    func(name string) (string, error) { q, err := c.GetQueue(ctx, name); return q.Name, err },
		list: func() ([]string, error) {
			qs, err := c.ListQueues(ctx, "", 10)
			var names []string
			for _, q := range qs {
				names = append(names, q.Name)
			}
			return names, err
		},
		delete: func(name string) error { return c.DeleteQueue(ctx, name) },
	}
}

func topicOps(ctx context.Context, c *sluice.Client) entityOps {
	return entityOps{kind: "topic", valid: validEntityName,
		create: func(name string) error { _, err := c.CreateTopic(ctx, name, nil); return err },
		get:    func(name string) (string, error) { q, err := c.GetTopic(ctx, name); return q.Name, err },
		list: func() ([]string, error) {
			ts, err := c.ListTopics(ctx, "", 10)
			var names []string
			for _, q := range ts {
				names = append(names, q.Name)
			}
			return names, err
		},
		delete: func(name string) error { return c.DeleteTopic(ctx, name) },
	}
}

func subscriptionOps(ctx context.Context, c *sluice.Client) entityOps {
	return entityOps{kind: "subscription",
		valid: func(name string) bool {
			return store.ValidateName("subscription", name) == nil && !strings.Contains(name, "/") &&
				len(name) <= maxSubscriptionNameLen
		},
		create: func(name string) error { _, err := c.CreateSubscription(ctx, "topic", name, nil); return err },
		get: func(name string) (string, error) {
			s, err := c.GetSubscription(ctx, "topic", name)
			return s.Name, err
		},
		list: func() ([]string, error) {
			ss, err := c.ListSubscriptions(ctx, "topic")
			var names []string
			for _, s := range ss {
				names = append(names, s.Name)
			}
			return names, err
		},
		delete: func(name string) error { return c.DeleteSubscription(ctx, "topic", name) },
	}
}

func checkEntityName(t *testing.T, name string, ops entityOps) {
	t.Helper()
	valid := ops.valid(name)
	err := ops.create(name)
	switch {
	case err != nil && !errors.Is(err, sluice.ErrInvalidName):
		t.Fatalf("create %s %q: %v, want ErrInvalidName", ops.kind, name, err)
	case err != nil && valid:
		t.Fatalf("create %s %q: %v", ops.kind, name, err)
	case err == nil && !valid:
		t.Fatalf("create %s %q: accepted", ops.kind, name)
	case err != nil:
		return
	}
	defer func() {
		if err := ops.delete(name); err != nil {
			t.Fatalf("delete %s %q: %v", ops.kind, name, err)
		}
		if _, err := ops.get(name); !errors.Is(err, sluice.ErrEntityNotFound) {
			t.Fatalf("get %s %q once deleted: %v, want ErrEntityNotFound", ops.kind, name, err)
		}
	}()
	// Names are stored and shown in their canonical form.
	stored := sluice.CanonicalName(name)
	if got, err := ops.get(name); err != nil || got != stored {
		t.Fatalf("get %s %q: %q, %v; want %q", ops.kind, name, got, err, stored)
	}
	if listed, err := ops.list(); err != nil || !slices.Contains(listed, stored) {
		t.Fatalf("list %ss: %q, %v; want %q among them", ops.kind, listed, err, stored)
	}
	for _, other := range []string{strings.ToUpper(name), strings.ToLower(name)} {
		if other == name {
			continue
		}
		if got, err := ops.get(other); err != nil || got != stored {
			t.Fatalf("get %s %q, created as %q: %q, %v", ops.kind, other, name, got, err)
		}
		if err := ops.create(other); !errors.Is(err, sluice.ErrEntityExists) {
			t.Fatalf("create %s %q beside %q: %v, want ErrEntityExists", ops.kind, other, name, err)
		}
	}
}

// checkRuleName adds and deletes a rule of the name ("$" may start a
// name): refused with ErrInvalidName unless storage's rule accepts it
// and it is at most 50 characters.
func checkRuleName(t *testing.T, ctx context.Context, c *sluice.Client, name string) {
	t.Helper()
	bare := strings.TrimPrefix(name, "$")
	valid := store.ValidateName("rule", bare) == nil && len(bare) <= maxSubscriptionNameLen
	err := c.CreateRule(ctx, "topic", "sub", sluice.Rule{Name: name, Filter: sluice.TrueFilter{}})
	switch {
	case name == sluice.DefaultRuleName && errors.Is(err, sluice.ErrEntityExists):
	case err != nil && !errors.Is(err, sluice.ErrInvalidName):
		t.Fatalf("create rule %q: %v, want ErrInvalidName", name, err)
	case err != nil && valid && len(name) <= maxSubscriptionNameLen && !strings.HasPrefix(name, "$"):
		t.Fatalf("create rule %q: %v", name, err)
	case err == nil && !valid:
		t.Fatalf("create rule %q: accepted", name)
	case err == nil:
		if err := c.DeleteRule(ctx, "topic", "sub", name); err != nil {
			t.Fatalf("delete rule %q: %v", name, err)
		}
	}
}
