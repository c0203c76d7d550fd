package sluice_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store/storetest"
)

// Names and identifiers have Service Bus's limits, and refused ones
// write nothing.
func TestNameAndIDLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		if _, err := c.CreateQueue(ctx, strings.Repeat("q", 260), nil); err != nil {
			t.Fatalf("a queue name of 260 characters: %v", err)
		}
		_, err := c.CreateQueue(ctx, strings.Repeat("q", 261), nil)
		wantErr(t, "a queue name of 261 characters", err, sluice.ErrInvalidName)
		_, err = c.CreateTopic(ctx, strings.Repeat("t", 261), nil)
		wantErr(t, "a topic name of 261 characters", err, sluice.ErrInvalidName)
		if _, err := c.CreateTopic(ctx, "t", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateSubscription(ctx, "t", strings.Repeat("s", 50), nil); err != nil {
			t.Fatalf("a subscription name of 50 characters: %v", err)
		}
		_, err = c.CreateSubscription(ctx, "t", strings.Repeat("s", 51), nil)
		wantErr(t, "a subscription name of 51 characters", err, sluice.ErrInvalidName)
		_, err = c.CreateSubscription(ctx, "t", "r", nil, sluice.Rule{Name: strings.Repeat("r", 51), Filter: sluice.TrueFilter{}})
		wantErr(t, "a rule name of 51 characters", err, sluice.ErrInvalidName)
		wantErr(t, "CreateRule of 51 characters", c.CreateRule(ctx, "t", strings.Repeat("s", 50),
			sluice.Rule{Name: strings.Repeat("r", 51), Filter: sluice.TrueFilter{}}), sluice.ErrInvalidName)
		if err := c.CreateRule(ctx, "t", strings.Repeat("s", 50), sluice.Rule{Name: strings.Repeat("r", 50), Filter: sluice.TrueFilter{}}); err != nil {
			t.Fatalf("a rule name of 50 characters: %v", err)
		}

		q := createQueue(t, c, nil)
		long := strings.Repeat("i", 129)
		for _, m := range []*sluice.Message{
			{MessageID: long}, {SessionID: long}, {PartitionKey: long}, {ReplyToSessionID: long},
			{SessionID: "a", PartitionKey: "b"},
		} {
			for _, to := range []string{q, "t"} {
				_, err := newSender(t, c, to).SendBatch(ctx, []*sluice.Message{{Body: []byte("ok")}, m})
				wantErr(t, fmt.Sprintf("Send(%+v) to %s", *m, to), err, sluice.ErrInvalidArgument)
			}
		}
		if st, _ := c.GetQueueStats(ctx, q); st.Active != 0 {
			t.Fatalf("refused sends stored %d messages", st.Active)
		}
		ok := strings.Repeat("i", 128)
		if _, err := newSender(t, c, q).Send(ctx, &sluice.Message{MessageID: ok, SessionID: ok, PartitionKey: ok}); err != nil {
			t.Fatalf("identifiers of 128 characters: %v", err)
		}
		_, err = c.AcceptSession(ctx, q, long, nil)
		wantErr(t, "AcceptSession of a 129-character id", err, sluice.ErrInvalidArgument)
	})
}

// Entity names are case-insensitive: one entity whatever the case it is
// named in, shown in lower case.
func TestNamesCaseInsensitive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		info, err := c.CreateQueue(ctx, "Orders.EU", nil)
		if err != nil || info.Name != "orders.eu" {
			t.Fatalf("CreateQueue(Orders.EU) = %+v, %v; want the name shown as orders.eu", info, err)
		}
		for _, n := range []string{"orders.eu", "ORDERS.EU"} {
			_, err = c.CreateQueue(ctx, n, nil)
			wantErr(t, "CreateQueue("+n+")", err, sluice.ErrEntityExists)
			_, err = c.CreateTopic(ctx, n, nil)
			wantErr(t, "CreateTopic("+n+")", err, sluice.ErrEntityExists)
			if got, err := c.GetQueue(ctx, n); err != nil || got.Name != "orders.eu" {
				t.Fatalf("GetQueue(%s) = %+v, %v", n, got, err)
			}
		}
		if _, err := newSender(t, c, "ORDERS.eu").Send(ctx, &sluice.Message{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, c, "orders.EU"); len(got) != 1 {
			t.Fatalf("received %v through another case", got)
		}

		if _, err := c.CreateTopic(ctx, "Events", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateSubscription(ctx, "EVENTS", "Audit", nil); err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateSubscription(ctx, "events", "AUDIT", nil)
		wantErr(t, "CreateSubscription(events, AUDIT)", err, sluice.ErrEntityExists)
		sub, err := c.GetSubscription(ctx, "eVents", "audiT")
		if err != nil || sub.Topic != "events" || sub.Name != "audit" {
			t.Fatalf("GetSubscription = %+v, %v", sub, err)
		}
		if subs, err := c.ListSubscriptions(ctx, "EVENTS"); err != nil || len(subs) != 1 || subs[0].Name != "audit" {
			t.Fatalf("ListSubscriptions = %+v, %v", subs, err)
		}
		if q, err := c.CreateQueueForwarding(ctx, "inbox", nil, "EVENTS"); err != nil || q.ForwardTo != "events" {
			t.Fatalf("CreateQueueForwarding to EVENTS = %+v, %v", q, err)
		}
		if _, err := newSender(t, c, "InBox").Send(ctx, &sluice.Message{Body: []byte("y")}); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, c, sluice.SubscriptionPath("Events", "AUDIT")); len(got) != 1 {
			t.Fatalf("subscription received %v", got)
		}
		if err := c.DeleteQueue(ctx, "INBOX"); err != nil {
			t.Fatal(err)
		}
		_, err = c.GetQueue(ctx, "inbox")
		wantErr(t, "GetQueue after DeleteQueue in another case", err, sluice.ErrEntityNotFound)
	})
}

// Migration 12 renames stored entities to their lower-case names (but
// for two that would become one), and moves the ids the subscriptions of
// a topic recorded to the topic.
func TestMigrationNamesAndTopicDedup(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			var dsn string
			switch kind {
			case "sqlite":
				dsn = "sqlite://" + filepath.Join(t.TempDir(), "m.db")
			case "postgres":
				d, drop, err := testdb.Postgres(ctx)
				testdb.Check(t, err)
				t.Cleanup(func() { drop() })
				dsn = d
			case "mysql":
				d, drop, err := testdb.MySQL(ctx)
				testdb.Check(t, err)
				t.Cleanup(func() { drop() })
				dsn = d
			}
			open := func() *sluice.Client {
				c, err := sluice.Open(ctx, dsn, &sluice.Options{Service: "m", Logger: storetest.Logger(t)})
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				return c
			}
			c := open()
			for _, q := range []string{"orders", "abc", "xyz"} {
				if _, err := c.CreateQueue(ctx, q, nil); err != nil {
					t.Fatal(err)
				}
			}
			send(t, newSender(t, c, "orders"), "one", "two")
			c.CreateTopic(ctx, "t", &sluice.TopicProperties{RequiresDuplicateDetection: true})
			c.CreateSubscription(ctx, "t", "s", nil)
			c.Close()

			// Data as an older release left it: names in mixed case, and
			// a subscription that kept the ids its topic was sent.
			db := rawDBFor(t, kind, dsn)
			for _, stmt := range []string{
				"UPDATE sluice_queues SET name = 'Orders' WHERE name = 'orders'",
				"UPDATE sluice_messages SET queue = 'Orders' WHERE queue = 'orders'",
				"UPDATE sluice_queues SET name = 'ABC' WHERE name = 'xyz'",
				"UPDATE sluice_queues SET dedup_window_ms = 600000 WHERE name = 't/Subscriptions/s'",
				"INSERT INTO sluice_dedup (service, provider, queue, dedup_key, seq, expires_at) VALUES ('m', 'default', 't/Subscriptions/s', '0:X', 1, 99999999999999)",
				"DELETE FROM sluice_migrations WHERE version = 12",
			} {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			c = open()
			defer c.Close()
			if st, err := c.GetQueueStats(ctx, "ORDERS"); err != nil || st.Active != 2 {
				t.Fatalf("stats of the renamed queue = %+v, %v; want its 2 messages", st, err)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice_queues WHERE name IN ('abc', 'ABC')").Scan(&n); err != nil || n != 2 {
				t.Fatalf("%d of abc and ABC after the migration, %v; want both, untouched", n, err)
			}
			if _, err := newSender(t, c, "t").Send(ctx, &sluice.Message{Body: []byte("dup"), MessageID: "X"}); err != nil {
				t.Fatal(err)
			}
			if st, _ := c.GetQueueStats(ctx, sluice.SubscriptionPath("t", "s")); st.Active != 0 {
				t.Fatalf("the subscription received a duplicate its ids held before the migration")
			}
			if err := db.QueryRowContext(ctx, "SELECT dedup_window_ms FROM sluice_queues WHERE name = 't/Subscriptions/s'").Scan(&n); err != nil || n != 0 {
				t.Fatalf("the subscription's window after the migration = %d, %v; want 0", n, err)
			}
		})
	}
}

// Names are ASCII, and so is their case: a rune that Unicode lowers to
// an ASCII letter (the Kelvin sign to "k") is not folded into a valid
// name, so that such a name is refused, not taken as another's.
func TestCanonicalNameFoldsASCIIOnly(t *testing.T) {
	for in, want := range map[string]string{"ORDERS/SUBSCRIPTIONS/EU": "orders/Subscriptions/eu", "\u212a": "\u212a", "ſ": "ſ"} {
		if got := sluice.CanonicalName(in); got != want {
			t.Errorf("CanonicalName(%q) = %q, want %q", in, got, want)
		}
	}
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		_, err := c.CreateQueue(t.Context(), "\u212a", nil)
		wantErr(t, "CreateQueue of the Kelvin sign", err, sluice.ErrInvalidName)
	})
}
