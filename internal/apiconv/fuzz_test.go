package apiconv_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
)

// FuzzDecode decodes arbitrary bytes, as protobuf and as JSON, into every
// request and response message of the API, and checks each conversion to
// the library's types that applies to what was decoded, at any depth: it
// does not panic; a conversion that can fail fails with a typed error;
// durations keep their sign and, in range, their value; and converting
// back gives the same message (wire to library to wire) and the same
// value (library to wire to library).
func FuzzDecode(f *testing.F) {
	for _, m := range fuzzSeeds() {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		j, err := protojson.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j)
	}
	types := apiMessageTypes(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mt := range types {
			m := mt.New().Interface()
			if proto.Unmarshal(data, m) == nil {
				checkTree(t, m.ProtoReflect())
			}
			m = mt.New().Interface()
			if protojson.Unmarshal(data, m) == nil {
				checkTree(t, m.ProtoReflect())
			}
		}
	})
}

// apiMessageTypes lists the API's request and response messages.
func apiMessageTypes(f *testing.F) []protoreflect.MessageType {
	var out []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		d := mt.Descriptor()
		name := string(d.Name())
		if d.ParentFile().Package() == "sluice.v1" && (hasSuffix(name, "Request") || hasSuffix(name, "Response")) {
			out = append(out, mt)
		}
		return true
	})
	if len(out) < 100 {
		f.Fatalf("found %d request and response messages of sluice.v1, want all of them", len(out))
	}
	return out
}

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

// fuzzSeeds are messages as clients and servers send them.
func fuzzSeeds() []proto.Message {
	sec := durationpb.New
	at := timestamppb.New(time.Date(2026, 5, 4, 3, 2, 1, 5e8, time.UTC))
	props := &sluicev1.QueueProperties{LockDuration: sec(30 * time.Second), MaxDeliveryCount: 3, DefaultTtl: sec(time.Hour),
		DeadLetterOnExpiry: true, DeadLetterRetention: sec(24 * time.Hour), MaxMessageSize: 1024,
		RequiresDuplicateDetection: true, DuplicateDetectionWindow: sec(time.Minute), RequiresSession: true}
	msg := &sluicev1.Message{Body: []byte("hello"), MessageId: "m1", SessionId: "s1", PartitionKey: "s1", CorrelationId: "c",
		Subject: "sub", ContentType: "text/plain", ReplyTo: "r", ReplyToSessionId: "rs", To: "t",
		ApplicationProperties: map[string]string{"k": "v"}, TimeToLive: sec(time.Minute), ScheduledEnqueueTime: at}
	rules := []*sluicev1.Rule{
		{Name: "all", Filter: &sluicev1.Rule_TrueFilter{TrueFilter: &sluicev1.TrueFilter{}}},
		{Name: "none", Filter: &sluicev1.Rule_FalseFilter{FalseFilter: &sluicev1.FalseFilter{}}},
		{Name: "sql", Filter: &sluicev1.Rule_SqlFilter{SqlFilter: &sluicev1.SqlFilter{Expression: "a = 1"}}},
		{Name: "corr", Filter: &sluicev1.Rule_CorrelationFilter{CorrelationFilter: &sluicev1.CorrelationFilter{
			CorrelationId: "c", Subject: "s", Properties: map[string]string{"k": "v"}}}},
	}
	subProps := &sluicev1.SubscriptionProperties{LockDuration: sec(time.Minute), MaxDeliveryCount: 5, ForwardTo: "q2",
		DefaultTtl: sec(time.Hour), IgnoreFilterErrors: true}
	event := &sluicev1.StreamEvent{Stream: &sluicev1.StreamId{Namespace: "ns", Key: "k"}, Partition: 3, Position: 7,
		Subscription: "sub", Attempt: 2, Body: []byte("e"), Properties: map[string]string{"p": "q"}, AppendedAt: at}
	return []proto.Message{
		&sluicev1.CreateQueueRequest{Name: "orders", Properties: props},
		&sluicev1.UpdateQueueRequest{Name: "orders", Properties: props, ForwardTo: proto.String("other")},
		&sluicev1.CreateQueueRequest{Name: "huge", Properties: &sluicev1.QueueProperties{
			DefaultTtl: &durationpb.Duration{Seconds: 315576000000}, LockDuration: &durationpb.Duration{Seconds: -1}}},
		// protobuf's largest duration, as a queue's default TTL and a
		// message's: stored negative, and expiring in 1734 (issue 15.1).
		&sluicev1.CreateQueueRequest{Name: "forever", Properties: &sluicev1.QueueProperties{
			DefaultTtl: &durationpb.Duration{Seconds: 315576000000}, DeadLetterRetention: &durationpb.Duration{Seconds: 315576000000}}},
		&sluicev1.SendRequest{Entity: "forever", Messages: []*sluicev1.Message{{Body: []byte("x"),
			TimeToLive: &durationpb.Duration{Seconds: 315576000000, Nanos: 999999999}}}},
		// Ids over Service Bus's 128 characters; a session id and a
		// different partition key (issue 15.10).
		&sluicev1.SendRequest{Entity: "ids", Messages: []*sluicev1.Message{{MessageId: strings.Repeat("m", 129)}}},
		&sluicev1.SendRequest{Entity: "ids", Messages: []*sluicev1.Message{{SessionId: strings.Repeat("s", 129)}}},
		&sluicev1.SendRequest{Entity: "ids", Messages: []*sluicev1.Message{{SessionId: "a", PartitionKey: "b"}}},
		&sluicev1.CreateTopicRequest{Name: "t", Properties: &sluicev1.TopicProperties{DefaultTtl: sec(time.Hour), MaxMessageSize: 10}},
		&sluicev1.CreateSubscriptionRequest{Topic: "t", Name: "s", Properties: subProps, Rules: rules},
		&sluicev1.CreateRuleRequest{Topic: "t", Subscription: "s", Rule: rules[3]},
		&sluicev1.SendRequest{Entity: "orders", Messages: []*sluicev1.Message{msg, {Body: []byte{0xff}}}},
		&sluicev1.ReceiveRequest{Entity: "orders", MaxMessages: 10, MaxWait: sec(time.Second),
			Mode: sluicev1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE, SubQueue: sluicev1.SubQueue_SUB_QUEUE_DEAD_LETTER},
		&sluicev1.ReceiveRequest{Mode: 7, SubQueue: 9, MaxWait: &durationpb.Duration{Seconds: -1}},
		&sluicev1.PeekRequest{Entity: "orders", FromSequenceNumber: -1, MaxMessages: 250, SubQueue: sluicev1.SubQueue_SUB_QUEUE_DEAD_LETTER},
		&sluicev1.CompleteRequest{Entity: "orders", LockToken: "00000000000000010000000000000002"},
		&sluicev1.CompleteBatchRequest{Entity: "orders", LockTokens: []string{"0000000000000001000000000000000f", "x"}},
		&sluicev1.PublishRequest{Stream: &sluicev1.StreamId{Namespace: "ns", Key: "k"},
			Events: []*sluicev1.Event{{Body: []byte("e"), Properties: map[string]string{"a": "b"}}}},
		&sluicev1.SubscribeRequest{Consumer: "c", Stream: &sluicev1.StreamId{Namespace: "ns", Key: "k"},
			Start: sluicev1.StartPosition_START_POSITION_AT, Position: 42},
		&sluicev1.SetStreamRetentionRequest{Namespace: "ns", MaxAge: sec(time.Hour), MaxBytes: 1 << 20},
		&sluicev1.ConsumeRequest{Consumer: "c", Group: "g", Namespace: "ns", MaxConcurrency: 4, AckTimeout: sec(time.Minute),
			MaxAttempts: 3, RetryBackoff: sec(time.Second), MaxRetryBackoff: sec(time.Minute),
			OnFailure: sluicev1.FailurePolicy_FAILURE_POLICY_FAULT},
		&sluicev1.ReceiveResponse{Messages: []*sluicev1.ReceivedMessage{{Message: msg, SequenceNumber: 9, DeliveryCount: 2,
			EnqueuedTime: at, ExpiresAt: at, LockToken: "0000000000000009000000000000000a", LockedUntil: at,
			State: sluicev1.MessageState_MESSAGE_STATE_DEFERRED, DeadLetterReason: "r", DeadLetterSource: "q"}}},
		&sluicev1.GetSubscriptionResponse{Subscription: &sluicev1.Subscription{Topic: "t", Name: "s", Properties: subProps, Rules: rules}},
		&sluicev1.ListParkedEventsResponse{Events: []*sluicev1.ParkedEvent{{Event: event, Error: "boom", Attempts: 5, ParkedAt: at}}},
		&sluicev1.GetClusterStatusResponse{
			Nodes: []*sluicev1.ClusterNode{{Id: "n1", Group: "g", Consumers: []string{"c"}, StartedAt: at, Alive: true, Partitions: []int32{1}}},
			Partitions: []*sluicev1.PartitionStatus{{Partition: 1, Owner: "n1", Epoch: 2, LeaseUntil: at, Held: true, Head: 9,
				CacheWindows: 2, CachedRecords: 40,
				Subscriptions: []*sluicev1.SubscriptionLag{{Id: "s", Position: 3, Lag: 6}},
				Leases: []*sluicev1.GroupLease{{Group: "g", Owner: "n1", Epoch: 2, LeaseUntil: at, Held: true,
					CacheWindows: 2, CachedRecords: 40}}}}},
	}
}

// checkTree checks every message in m's tree, m included.
func checkTree(t *testing.T, m protoreflect.Message) {
	t.Helper()
	checkNode(t, m.Interface())
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				checkTree(t, v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				checkTree(t, mv.Message())
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			checkTree(t, v.Message())
		case fd.Kind() == protoreflect.EnumKind && !fd.IsList():
			checkEnum(t, fd.Enum().FullName(), v.Enum())
		}
		return true
	})
}

// checkNode checks the conversions of one message.
func checkNode(t *testing.T, m proto.Message) {
	t.Helper()
	switch w := m.(type) {
	case *durationpb.Duration:
		checkDuration(t, w)
	case *timestamppb.Timestamp:
		checkTime(t, w)
	case *sluicev1.QueueProperties:
		roundTrip(t, w, apiconv.FromQueueProperties, apiconv.QueueProperties)
	case *sluicev1.Queue:
		roundTrip(t, w, apiconv.FromQueue, apiconv.Queue)
	case *sluicev1.TopicProperties:
		roundTrip(t, w, apiconv.FromTopicProperties, apiconv.TopicProperties)
	case *sluicev1.Topic:
		roundTrip(t, w, apiconv.FromTopic, apiconv.Topic)
	case *sluicev1.SubscriptionProperties:
		roundTrip(t, w, apiconv.FromSubscriptionProperties, apiconv.SubscriptionProperties)
	case *sluicev1.Subscription:
		roundTrip(t, w, apiconv.FromSubscription, must(t, apiconv.Subscription))
	case *sluicev1.Rule:
		roundTrip(t, w, apiconv.FromRule, must(t, apiconv.Rule))
	case *sluicev1.Message:
		roundTrip(t, w, apiconv.FromMessage, apiconv.Message)
	case *sluicev1.ReceivedMessage:
		checkReceived(t, w)
	case *sluicev1.EntityStats:
		roundTrip(t, w, apiconv.FromStats, apiconv.Stats)
	case *sluicev1.StreamId:
		roundTrip(t, w, apiconv.FromStreamID, apiconv.StreamID)
	case *sluicev1.PublishRequest:
		roundTrip(t, w, func(r *sluicev1.PublishRequest) []sluice.Event { return apiconv.FromEvents(r.GetEvents()) },
			func(evs []sluice.Event) *sluicev1.PublishRequest {
				return &sluicev1.PublishRequest{Events: apiconv.Events(evs)}
			},
			"stream")
	case *sluicev1.StreamEvent:
		roundTrip(t, w, apiconv.FromStreamEvent, apiconv.StreamEvent)
	case *sluicev1.ParkedEvent:
		roundTrip(t, w, apiconv.FromParkedEvent, apiconv.ParkedEvent)
	case *sluicev1.StreamSubscription:
		roundTrip(t, w, apiconv.FromStreamSubscription, apiconv.StreamSubscription)
	case *sluicev1.GetClusterStatusResponse:
		roundTrip(t, w, apiconv.FromClusterStatus, apiconv.ClusterStatus)
	case *sluicev1.SubscribeRequest:
		checkStartPosition(t, w)
	case *sluicev1.ConsumeRequest:
		checkConsumerOptions(t, w)
	}
}

// must turns a conversion that can fail into one that must not: what
// came from the wire always converts back.
func must[L any, W proto.Message](t *testing.T, to func(L) (W, error)) func(L) W {
	return func(l L) W {
		t.Helper()
		w, err := to(l)
		if err != nil {
			t.Fatalf("converting %+v back to the wire: %v", l, err)
		}
		return w
	}
}

// roundTrip checks that w converts to a library value that converts back
// to the same value, and, when every time in w is representable, to the
// same message (up to the wire's spellings of "unset"). Fields named in
// skip are not expected back.
func roundTrip[W proto.Message, L any](t *testing.T, w W, from func(W) L, to func(L) W, skip ...string) {
	t.Helper()
	lib := from(w)
	again := from(to(lib))
	if !reflect.DeepEqual(lib, again) {
		t.Fatalf("%T: library value %+v converts to the wire and back as %+v", w, lib, again)
	}
	if !representable(w.ProtoReflect()) {
		return
	}
	want := normalized(w, skip...)
	got := normalized(to(lib), skip...)
	if !proto.Equal(want, got) {
		t.Fatalf("%T %v converts to the library and back as %v", w, want, got)
	}
}

// maxExact bounds the durations that must convert exactly: well inside
// time.Duration's range of ±292 years.
const maxExact = 100 * 365 * 24 * time.Hour

// checkDuration checks a duration's conversion: the sign is kept, and a
// valid duration in range converts exactly and back.
func checkDuration(t *testing.T, w *durationpb.Duration) {
	t.Helper()
	d := apiconv.Duration(w)
	s, n := w.GetSeconds(), w.GetNanos()
	switch {
	case s >= 0 && n >= 0 && d < 0, s <= 0 && n <= 0 && d > 0:
		t.Fatalf("duration {%d s, %d ns} converts to %v, of the other sign", s, n, d)
	case w.CheckValid() != nil || s > int64(maxExact/time.Second) || s < -int64(maxExact/time.Second):
		return
	case d != time.Duration(s)*time.Second+time.Duration(n):
		t.Fatalf("duration {%d s, %d ns} converts to %v", s, n, d)
	}
	back := apiconv.DurationPB(d)
	if d == 0 && back != nil || d != 0 && !proto.Equal(back, normalized(w)) {
		t.Fatalf("duration %v converts to the wire as %v, not %v", d, back, w)
	}
}

// checkTime checks a valid timestamp's conversion, both ways.
func checkTime(t *testing.T, w *timestamppb.Timestamp) {
	t.Helper()
	got := apiconv.Time(w)
	if w.CheckValid() != nil {
		return
	}
	if !got.Equal(w.AsTime()) {
		t.Fatalf("timestamp %v converts to %v", w, got)
	}
	if back := apiconv.Timestamp(got); !got.IsZero() && !proto.Equal(back, normalized(w)) {
		t.Fatalf("time %v converts to the wire as %v, not %v", got, back, w)
	}
}

// checkEnum checks the conversions of a receive mode or sub-queue: a
// value the API defines converts and back, any other fails with
// ErrInvalidArgument.
func checkEnum(t *testing.T, name protoreflect.FullName, n protoreflect.EnumNumber) {
	t.Helper()
	switch name {
	case "sluice.v1.ReceiveMode":
		w := sluicev1.ReceiveMode(n)
		m, err := apiconv.Mode(w)
		checkEnumValue(t, w, err, func() bool {
			back := apiconv.WireMode(m)
			return back == w || w == sluicev1.ReceiveMode_RECEIVE_MODE_UNSPECIFIED && m == sluice.PeekLock
		})
	case "sluice.v1.SubQueue":
		w := sluicev1.SubQueue(n)
		q, err := apiconv.SubQueue(w)
		checkEnumValue(t, w, err, func() bool { return apiconv.WireSubQueue(q) == w })
	}
}

func checkEnumValue(t *testing.T, w interface {
	protoreflect.Enum
	String() string
}, err error, roundTrips func() bool) {
	t.Helper()
	known := w.Descriptor().Values().ByNumber(w.Number()) != nil
	switch {
	case known && err != nil:
		t.Fatalf("%s %v: %v", w.Descriptor().FullName(), w, err)
	case !known && !errors.Is(err, sluice.ErrInvalidArgument):
		t.Fatalf("%s %d: error %v, want ErrInvalidArgument", w.Descriptor().FullName(), w.Number(), err)
	case known && !roundTrips():
		t.Fatalf("%s %v does not convert back", w.Descriptor().FullName(), w)
	}
}

// checkReceived checks a received message: the library value round
// trips, and the message too when its state is one the library knows.
func checkReceived(t *testing.T, w *sluicev1.ReceivedMessage) {
	t.Helper()
	lib := apiconv.FromReceived(w)
	if again := apiconv.FromReceived(apiconv.Received(lib)); !reflect.DeepEqual(lib, again) {
		t.Fatalf("received message %+v converts to the wire and back as %+v", lib, again)
	}
	s := w.GetState()
	if s == sluicev1.MessageState_MESSAGE_STATE_UNSPECIFIED || s.Descriptor().Values().ByNumber(s.Number()) == nil {
		return // the library has no "unknown" state to keep
	}
	if representable(w.ProtoReflect()) {
		if want, got := normalized(w), normalized(apiconv.Received(lib)); !proto.Equal(want, got) {
			t.Fatalf("received message %v converts to the library and back as %v", want, got)
		}
	}
}

// checkStartPosition checks a subscribe's start: a start the API defines
// converts, any other fails with ErrInvalidArgument.
func checkStartPosition(t *testing.T, r *sluicev1.SubscribeRequest) {
	t.Helper()
	got, err := apiconv.StartPosition(r.GetStart(), r.GetPosition())
	want, ok := map[sluicev1.StartPosition]sluice.StartPosition{
		sluicev1.StartPosition_START_POSITION_UNSPECIFIED: sluice.FromNow(),
		sluicev1.StartPosition_START_POSITION_NOW:         sluice.FromNow(),
		sluicev1.StartPosition_START_POSITION_BEGINNING:   sluice.FromBeginning(),
		sluicev1.StartPosition_START_POSITION_AT:          sluice.FromPosition(r.GetPosition()),
	}[r.GetStart()]
	switch {
	case !ok && !errors.Is(err, sluice.ErrInvalidArgument):
		t.Fatalf("start %d: error %v, want ErrInvalidArgument", r.GetStart(), err)
	case ok && (err != nil || got != want):
		t.Fatalf("start %v at %d: %v, %v; want %v", r.GetStart(), r.GetPosition(), got, err, want)
	}
}

// checkConsumerOptions checks a consume's options: an unknown failure
// policy fails with ErrInvalidArgument, and accepted options convert to
// the wire and back.
func checkConsumerOptions(t *testing.T, r *sluicev1.ConsumeRequest) {
	t.Helper()
	o, err := apiconv.ConsumerOptions(r)
	p := r.GetOnFailure()
	known := p.Descriptor().Values().ByNumber(p.Number()) != nil
	switch {
	case !known && !errors.Is(err, sluice.ErrInvalidArgument):
		t.Fatalf("failure policy %d: error %v, want ErrInvalidArgument", p, err)
	case known && err != nil:
		t.Fatalf("consume %v: %v", r, err)
	case !known:
		return
	}
	back := apiconv.ConsumeRequest(r.GetConsumer(), r.GetGroup(), o)
	again, err := apiconv.ConsumerOptions(back)
	if err != nil || !reflect.DeepEqual(o, again) {
		t.Fatalf("consumer options %+v convert to the wire and back as %+v, %v", o, again, err)
	}
	if back.GetConsumer() != r.GetConsumer() || back.GetGroup() != r.GetGroup() {
		t.Fatalf("consume of %q in group %q converts back as %q in %q", r.GetConsumer(), r.GetGroup(), back.GetConsumer(), back.GetGroup())
	}
}

// representable reports whether every duration and timestamp in m is
// valid and in the range that converts exactly.
func representable(m protoreflect.Message) bool {
	switch w := m.Interface().(type) {
	case *durationpb.Duration:
		return w.CheckValid() == nil && w.GetSeconds() <= int64(maxExact/time.Second) && w.GetSeconds() >= -int64(maxExact/time.Second)
	case *timestamppb.Timestamp:
		return w.CheckValid() == nil
	}
	ok := true
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				ok = ok && representable(v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			ok = representable(v.Message())
		}
		return ok
	})
	return ok
}

// normalized is a copy of m without unknown fields, named fields and the
// spellings of "unset" that the conversions do not keep: a zero duration,
// the zero time, an empty message outside a oneof.
func normalized(m proto.Message, skip ...string) proto.Message {
	c := proto.Clone(m)
	normalize(c.ProtoReflect(), skip)
	return c
}

func normalize(m protoreflect.Message, skip []string) {
	m.SetUnknown(nil)
	var clear []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		for _, s := range skip {
			if string(fd.Name()) == s {
				clear = append(clear, fd)
				return true
			}
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				normalize(v.List().Get(i).Message(), nil)
			}
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			normalize(v.Message(), nil)
			if unset(v.Message()) && fd.ContainingOneof() == nil {
				clear = append(clear, fd)
			}
		}
		return true
	})
	for _, fd := range clear {
		m.Clear(fd)
	}
}

// unset reports whether a normalized message says nothing.
func unset(m protoreflect.Message) bool {
	switch w := m.Interface().(type) {
	case *durationpb.Duration:
		return w.GetSeconds() == 0 && w.GetNanos() == 0
	case *timestamppb.Timestamp:
		return w.AsTime().IsZero()
	}
	empty := true
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		empty = false
		return false
	})
	return empty
}
