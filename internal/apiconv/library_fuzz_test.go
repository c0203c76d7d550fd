package apiconv_test

import (
	"bytes"
	"fmt"
	"maps"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
)

// FuzzLibrary decodes arbitrary bytes, as protobuf and as JSON, into the
// requests that write (create a queue, a topic, a subscription with
// rules; send messages), converts them as the server does and makes the
// call on a SQLite-backed library. The call either fails with a typed
// error the API reports as the client's (never an internal one), or
// succeeds and stores what was asked: no duration stored negative,
// wrapped or shortened, no message expiring before it was enqueued.
func FuzzLibrary(f *testing.F) {
	for _, m := range fuzzSeeds() {
		kind := libraryCall(m)
		if kind < 0 {
			continue
		}
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(kind), b)
		j, err := protojson.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(kind), j)
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
	if _, err := c.CreateQueue(ctx, "target", nil); err != nil {
		f.Fatal(err)
	}
	n := 0
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		n++
		name := fmt.Sprintf("e%d", n)
		switch kind % 4 {
		case 0:
			if r := decode[sluicev1.CreateQueueRequest](data); r != nil {
				checkCreateQueue(t, c, name, r)
			}
		case 1:
			if r := decode[sluicev1.CreateTopicRequest](data); r != nil {
				checkCreateTopic(t, c, name, r)
			}
		case 2:
			if r := decode[sluicev1.CreateSubscriptionRequest](data); r != nil {
				checkCreateSubscription(t, c, name, r)
			}
		case 3:
			if r := decode[sluicev1.SendRequest](data); r != nil {
				checkSend(t, c, name, r)
			}
		}
	})
}

// libraryCall is FuzzLibrary's kind for a seed, or -1.
func libraryCall(m proto.Message) int {
	switch m.(type) {
	case *sluicev1.CreateQueueRequest:
		return 0
	case *sluicev1.CreateTopicRequest:
		return 1
	case *sluicev1.CreateSubscriptionRequest:
		return 2
	case *sluicev1.SendRequest:
		return 3
	}
	return -1
}

// decode decodes data as protobuf, else as JSON; nil when neither works.
func decode[M any, P interface {
	*M
	proto.Message
}](data []byte) P {
	m := P(new(M))
	if proto.Unmarshal(data, m) == nil {
		return m
	}
	m = P(new(M))
	if protojson.Unmarshal(data, m) == nil {
		return m
	}
	return nil
}

// refused checks that a call's error is one the API reports as the
// client's: a named condition whose code is not the server's fault.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	cerr, internal := apierr.FromLibrary(err)
	if internal || apierr.Reason(err) == "" {
		t.Fatalf("%s: untyped error %v", what, err)
	}
	switch cerr.Code() {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeAlreadyExists, connect.CodeFailedPrecondition:
	default:
		t.Fatalf("%s: error %v has code %v", what, err, cerr.Code())
	}
}

// checkStored checks one duration setting as stored: never negative;
// zero takes a default; in range, the value asked rounded up to the
// millisecond; beyond it, at least the range (clamped, never wrapped);
// a time-to-live or a retention of 0 or Forever reads back as Forever:
// never (sluice.Forever's rule).
func checkStored(t *testing.T, what string, asked, stored time.Duration) {
	t.Helper()
	never := what == "default TTL" || what == "dead-letter retention"
	switch {
	case never && (asked == 0 || asked >= sluice.Forever):
		if stored != sluice.Forever {
			t.Fatalf("%s %v: reads back as %v, want Forever (never)", what, asked, stored)
		}
	case asked < 0:
		t.Fatalf("%s %v: a negative duration was accepted (stored %v)", what, asked, stored)
	case stored < 0:
		t.Fatalf("%s %v: stored as %v", what, asked, stored)
	case asked == 0:
	case asked <= maxExact && (stored < asked || stored >= asked+time.Millisecond):
		t.Fatalf("%s %v: stored as %v", what, asked, stored)
	case asked > maxExact && stored < maxExact:
		t.Fatalf("%s %v: stored as %v", what, asked, stored)
	}
}

func checkCreateQueue(t *testing.T, c *sluice.Client, name string, r *sluicev1.CreateQueueRequest) {
	ctx := t.Context()
	props := apiconv.FromQueueProperties(r.GetProperties())
	_, err := c.CreateQueue(ctx, name, &props)
	if err != nil {
		refused(t, "create queue", err)
		return
	}
	q, err := c.GetQueue(ctx, name)
	if err != nil {
		t.Fatalf("get the queue created: %v", err)
	}
	checkQueueStored(t, props, q.QueueProperties)
}

func checkQueueStored(t *testing.T, asked, got sluice.QueueProperties) {
	t.Helper()
	checkStored(t, "lock duration", asked.LockDuration, got.LockDuration)
	checkStored(t, "default TTL", asked.DefaultTTL, got.DefaultTTL)
	checkStored(t, "dead-letter retention", asked.DeadLetterRetention, got.DeadLetterRetention)
	if asked.RequiresDuplicateDetection {
		checkStored(t, "duplicate detection window", asked.DuplicateDetectionWindow, got.DuplicateDetectionWindow)
	}
	if asked.MaxDeliveryCount != 0 && got.MaxDeliveryCount != asked.MaxDeliveryCount ||
		asked.MaxMessageSize != 0 && got.MaxMessageSize != asked.MaxMessageSize ||
		got.DeadLetterOnExpiry != asked.DeadLetterOnExpiry || got.RequiresSession != asked.RequiresSession ||
		got.RequiresDuplicateDetection != asked.RequiresDuplicateDetection {
		t.Fatalf("queue created with %+v reads back as %+v", asked, got)
	}
}

func checkCreateTopic(t *testing.T, c *sluice.Client, name string, r *sluicev1.CreateTopicRequest) {
	ctx := t.Context()
	props := apiconv.FromTopicProperties(r.GetProperties())
	_, err := c.CreateTopic(ctx, name, &props)
	if err != nil {
		refused(t, "create topic", err)
		return
	}
	got, err := c.GetTopic(ctx, name)
	if err != nil {
		t.Fatalf("get the topic created: %v", err)
	}
	checkStored(t, "default TTL", props.DefaultTTL, got.DefaultTTL)
	if props.RequiresDuplicateDetection {
		checkStored(t, "duplicate detection window", props.DuplicateDetectionWindow, got.DuplicateDetectionWindow)
	}
	if props.MaxMessageSize != 0 && got.MaxMessageSize != props.MaxMessageSize ||
		got.RequiresDuplicateDetection != props.RequiresDuplicateDetection {
		t.Fatalf("topic created with %+v reads back as %+v", props, got.TopicProperties)
	}
}

func checkCreateSubscription(t *testing.T, c *sluice.Client, name string, r *sluicev1.CreateSubscriptionRequest) {
	ctx := t.Context()
	props := apiconv.FromSubscriptionProperties(r.GetProperties())
	rules := apiconv.FromRules(r.GetRules())
	_, err := c.CreateSubscription(ctx, "topic", name, &props, rules...)
	if err != nil {
		refused(t, "create subscription", err)
		return
	}
	got, err := c.GetSubscription(ctx, "topic", name)
	if err != nil {
		t.Fatalf("get the subscription created: %v", err)
	}
	checkStored(t, "lock duration", props.LockDuration, got.LockDuration)
	checkStored(t, "default TTL", props.DefaultTTL, got.DefaultTTL)
	checkStored(t, "dead-letter retention", props.DeadLetterRetention, got.DeadLetterRetention)
	if props.MaxDeliveryCount != 0 && got.MaxDeliveryCount != props.MaxDeliveryCount ||
		got.RequiresSession != props.RequiresSession || got.IgnoreFilterErrors != props.IgnoreFilterErrors ||
		got.DeadLetterOnExpiry != props.DeadLetterOnExpiry {
		t.Fatalf("subscription created with %+v reads back as %+v", props, got.SubscriptionProperties)
	}
	if len(rules) > 0 && len(got.Rules) != len(rules) {
		t.Fatalf("subscription created with %d rules reads back with %d", len(rules), len(got.Rules))
	}
}

// checkSend sends the request's messages to a new queue and peeks them:
// ids over 128 characters, or a session id and a partition key that
// differ, are refused; each message sent is stored as sent, expires
// after it was enqueued, and is scheduled when it was asked to be, a
// long way ahead.
func checkSend(t *testing.T, c *sluice.Client, name string, r *sluicev1.SendRequest) {
	ctx := t.Context()
	if len(r.GetMessages()) == 0 || len(r.GetMessages()) > 20 {
		return
	}
	if _, err := c.CreateQueue(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSender(name)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]*sluice.Message, len(r.GetMessages()))
	for i, m := range r.GetMessages() {
		msgs[i] = apiconv.FromMessage(m)
	}
	start := time.Now()
	seqs, err := s.SendBatch(ctx, msgs)
	if err != nil {
		refused(t, "send", err)
		return
	}
	for _, m := range msgs {
		if len(m.MessageID) > maxIDLen || len(m.SessionID) > maxIDLen ||
			m.SessionID != "" && m.PartitionKey != "" && m.SessionID != m.PartitionKey {
			t.Fatalf("message id %q, session id %q and partition key %q accepted", m.MessageID, m.SessionID, m.PartitionKey)
		}
	}
	rc, err := c.NewReceiver(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rc.Peek(ctx, len(msgs), &sluice.PeekOptions{FromSequenceNumber: 1})
	if err != nil {
		t.Fatalf("peek: %v", err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("sent %d messages (numbers %v), peeked %d", len(msgs), seqs, len(got))
	}
	for i, m := range got {
		checkSent(t, start, msgs[i], m)
	}
}

// maxIDLen is Service Bus's bound on a message's MessageId and SessionId.
const maxIDLen = 128

// aLongWay is how far ahead a message scheduled for that long must stay
// scheduled for the whole test.
const aLongWay = 24 * time.Hour

func checkSent(t *testing.T, start time.Time, sent *sluice.Message, m *sluice.ReceivedMessage) {
	t.Helper()
	if !bytes.Equal(m.Body, sent.Body) || m.MessageID != sent.MessageID && sent.MessageID != "" ||
		m.SessionID != sent.SessionID || m.Subject != sent.Subject || m.CorrelationID != sent.CorrelationID ||
		!maps.Equal(m.ApplicationProperties, sent.ApplicationProperties) && len(sent.ApplicationProperties) > 0 {
		t.Fatalf("sent %+v, peeked %+v", *sent, m.Message)
	}
	if !m.ExpiresAt.IsZero() && m.ExpiresAt.Before(m.EnqueuedTime) {
		t.Fatalf("message sent with TTL %v at %v expires at %v, before it was enqueued at %v",
			sent.TimeToLive, start, m.ExpiresAt, m.EnqueuedTime)
	}
	if sent.TimeToLive > 0 && !m.ExpiresAt.IsZero() && m.ExpiresAt.Sub(m.EnqueuedTime) < min(sent.TimeToLive, maxExact)-time.Millisecond {
		t.Fatalf("message sent with TTL %v at %v expires at %v", sent.TimeToLive, start, m.ExpiresAt)
	}
	if at := sent.ScheduledEnqueueTime; at.After(start.Add(aLongWay)) && m.State != sluice.StateScheduled {
		t.Fatalf("message scheduled for %v is %v", at, m.State)
	}
}
