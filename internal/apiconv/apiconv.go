// Package apiconv converts between the library's types (package sluice)
// and the network API's messages (package sluicev1), both ways, so that
// the server and the Go client agree on every field. A zero duration or
// time is an unset field on the wire, and an unset field is zero.
package apiconv

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

func dur(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// Duration is d as a time.Duration, 0 when unset. A duration beyond
// time.Duration's range (protobuf's go to 10,000 years) saturates: to
// sluice.Forever, which means never where never has a meaning, or to the
// most negative duration, which is refused as every negative one is (see
// sluice.Forever).
func Duration(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tm(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// QueueProperties converts a queue's settings to the wire.
func QueueProperties(p sluice.QueueProperties) *sluicev1.QueueProperties {
	return &sluicev1.QueueProperties{
		LockDuration: dur(p.LockDuration), MaxDeliveryCount: int32(p.MaxDeliveryCount), DefaultTtl: dur(p.DefaultTTL),
		DeadLetterOnExpiry: p.DeadLetterOnExpiry, DeadLetterRetention: dur(p.DeadLetterRetention),
		MaxMessageSize: int32(p.MaxMessageSize), RequiresDuplicateDetection: p.RequiresDuplicateDetection,
		DuplicateDetectionWindow: dur(p.DuplicateDetectionWindow), RequiresSession: p.RequiresSession,
		PartitionCount: int32(p.PartitionCount), UserMetadata: p.UserMetadata,
	}
}

// FromQueueProperties converts a queue's settings from the wire.
func FromQueueProperties(p *sluicev1.QueueProperties) sluice.QueueProperties {
	return sluice.QueueProperties{
		LockDuration: Duration(p.GetLockDuration()), MaxDeliveryCount: int(p.GetMaxDeliveryCount()),
		DefaultTTL: Duration(p.GetDefaultTtl()), DeadLetterOnExpiry: p.GetDeadLetterOnExpiry(),
		DeadLetterRetention: Duration(p.GetDeadLetterRetention()), MaxMessageSize: int(p.GetMaxMessageSize()),
		RequiresDuplicateDetection: p.GetRequiresDuplicateDetection(),
		DuplicateDetectionWindow:   Duration(p.GetDuplicateDetectionWindow()), RequiresSession: p.GetRequiresSession(),
		PartitionCount: int(p.GetPartitionCount()), UserMetadata: p.GetUserMetadata(),
	}
}

// Queue converts a queue to the wire.
func Queue(q sluice.QueueInfo) *sluicev1.Queue {
	return &sluicev1.Queue{Name: q.Name, Properties: QueueProperties(q.QueueProperties), ForwardTo: q.ForwardTo}
}

// FromQueue converts a queue from the wire.
func FromQueue(q *sluicev1.Queue) sluice.QueueInfo {
	return sluice.QueueInfo{Name: q.GetName(), QueueProperties: FromQueueProperties(q.GetProperties()), ForwardTo: q.GetForwardTo()}
}

// TopicProperties converts a topic's settings to the wire.
func TopicProperties(p sluice.TopicProperties) *sluicev1.TopicProperties {
	return &sluicev1.TopicProperties{DefaultTtl: dur(p.DefaultTTL), MaxMessageSize: int32(p.MaxMessageSize),
		RequiresDuplicateDetection: p.RequiresDuplicateDetection, DuplicateDetectionWindow: dur(p.DuplicateDetectionWindow),
		PartitionCount: int32(p.PartitionCount)}
}

// FromTopicProperties converts a topic's settings from the wire.
func FromTopicProperties(p *sluicev1.TopicProperties) sluice.TopicProperties {
	return sluice.TopicProperties{DefaultTTL: Duration(p.GetDefaultTtl()), MaxMessageSize: int(p.GetMaxMessageSize()),
		RequiresDuplicateDetection: p.GetRequiresDuplicateDetection(), DuplicateDetectionWindow: Duration(p.GetDuplicateDetectionWindow()),
		PartitionCount: int(p.GetPartitionCount())}
}

// Topic converts a topic to the wire.
func Topic(t sluice.TopicInfo) *sluicev1.Topic {
	return &sluicev1.Topic{Name: t.Name, Properties: TopicProperties(t.TopicProperties)}
}

// FromTopic converts a topic from the wire.
func FromTopic(t *sluicev1.Topic) sluice.TopicInfo {
	return sluice.TopicInfo{Name: t.GetName(), TopicProperties: FromTopicProperties(t.GetProperties())}
}

// SubscriptionProperties converts a subscription's settings to the wire.
func SubscriptionProperties(p sluice.SubscriptionProperties) *sluicev1.SubscriptionProperties {
	return &sluicev1.SubscriptionProperties{
		LockDuration: dur(p.LockDuration), MaxDeliveryCount: int32(p.MaxDeliveryCount), DefaultTtl: dur(p.DefaultTTL),
		DeadLetterOnExpiry: p.DeadLetterOnExpiry, DeadLetterRetention: dur(p.DeadLetterRetention),
		RequiresSession: p.RequiresSession, ForwardTo: p.ForwardTo, IgnoreFilterErrors: p.IgnoreFilterErrors,
	}
}

// FromSubscriptionProperties converts a subscription's settings from the
// wire.
func FromSubscriptionProperties(p *sluicev1.SubscriptionProperties) sluice.SubscriptionProperties {
	return sluice.SubscriptionProperties{
		LockDuration: Duration(p.GetLockDuration()), MaxDeliveryCount: int(p.GetMaxDeliveryCount()),
		DefaultTTL: Duration(p.GetDefaultTtl()), DeadLetterOnExpiry: p.GetDeadLetterOnExpiry(),
		DeadLetterRetention: Duration(p.GetDeadLetterRetention()), RequiresSession: p.GetRequiresSession(),
		ForwardTo: p.GetForwardTo(), IgnoreFilterErrors: p.GetIgnoreFilterErrors(),
	}
}

// Rule converts a rule to the wire.
func Rule(r sluice.Rule) (*sluicev1.Rule, error) {
	out := &sluicev1.Rule{Name: r.Name}
	switch f := r.Filter.(type) {
	case sluice.TrueFilter:
		out.Filter = &sluicev1.Rule_TrueFilter{TrueFilter: &sluicev1.TrueFilter{}}
	case sluice.FalseFilter:
		out.Filter = &sluicev1.Rule_FalseFilter{FalseFilter: &sluicev1.FalseFilter{}}
	case sluice.CorrelationFilter:
		out.Filter = &sluicev1.Rule_CorrelationFilter{CorrelationFilter: &sluicev1.CorrelationFilter{
			CorrelationId: f.CorrelationID, MessageId: f.MessageID, To: f.To, ReplyTo: f.ReplyTo, Subject: f.Subject,
			SessionId: f.SessionID, ReplyToSessionId: f.ReplyToSessionID, ContentType: f.ContentType, Properties: f.Properties,
		}}
	case sluice.SQLFilter:
		out.Filter = &sluicev1.Rule_SqlFilter{SqlFilter: &sluicev1.SqlFilter{Expression: f.Expression}}
	case nil:
	default:
		return nil, fmt.Errorf("rule %q: unknown filter %T: %w", r.Name, r.Filter, sluice.ErrInvalidFilter)
	}
	return out, nil
}

// FromRule converts a rule from the wire; a rule without a filter has a
// nil one, which the library refuses with ErrInvalidFilter.
func FromRule(r *sluicev1.Rule) sluice.Rule {
	out := sluice.Rule{Name: r.GetName()}
	switch f := r.GetFilter().(type) {
	case *sluicev1.Rule_TrueFilter:
		out.Filter = sluice.TrueFilter{}
	case *sluicev1.Rule_FalseFilter:
		out.Filter = sluice.FalseFilter{}
	case *sluicev1.Rule_CorrelationFilter:
		c := f.CorrelationFilter
		out.Filter = sluice.CorrelationFilter{CorrelationID: c.GetCorrelationId(), MessageID: c.GetMessageId(), To: c.GetTo(),
			ReplyTo: c.GetReplyTo(), Subject: c.GetSubject(), SessionID: c.GetSessionId(),
			ReplyToSessionID: c.GetReplyToSessionId(), ContentType: c.GetContentType(), Properties: c.GetProperties()}
	case *sluicev1.Rule_SqlFilter:
		out.Filter = sluice.SQLFilter{Expression: f.SqlFilter.GetExpression()}
	}
	return out
}

// FromRules converts rules from the wire.
func FromRules(rs []*sluicev1.Rule) []sluice.Rule {
	out := make([]sluice.Rule, len(rs))
	for i, r := range rs {
		out[i] = FromRule(r)
	}
	return out
}

// Subscription converts a subscription to the wire.
func Subscription(s sluice.SubscriptionInfo) (*sluicev1.Subscription, error) {
	out := &sluicev1.Subscription{Topic: s.Topic, Name: s.Name, Properties: SubscriptionProperties(s.SubscriptionProperties)}
	for _, r := range s.Rules {
		pr, err := Rule(r)
		if err != nil {
			return nil, err
		}
		out.Rules = append(out.Rules, pr)
	}
	return out, nil
}

// FromSubscription converts a subscription from the wire.
func FromSubscription(s *sluicev1.Subscription) sluice.SubscriptionInfo {
	return sluice.SubscriptionInfo{Topic: s.GetTopic(), Name: s.GetName(),
		SubscriptionProperties: FromSubscriptionProperties(s.GetProperties()), Rules: FromRules(s.GetRules())}
}

// Stats converts an entity's counts to the wire.
func Stats(s sluice.QueueStats) *sluicev1.EntityStats {
	return &sluicev1.EntityStats{Active: s.Active, Scheduled: s.Scheduled, InFlight: s.InFlight, Deferred: s.Deferred,
		DeadLettered: s.DeadLettered, OldestAge: dur(s.OldestAge), Expired: s.Expired, OldestDeferredAge: dur(s.OldestDeferredAge)}
}

// FromStats converts an entity's counts from the wire.
func FromStats(s *sluicev1.EntityStats) sluice.QueueStats {
	return sluice.QueueStats{Active: s.GetActive(), Scheduled: s.GetScheduled(), InFlight: s.GetInFlight(),
		Deferred: s.GetDeferred(), DeadLettered: s.GetDeadLettered(), OldestAge: Duration(s.GetOldestAge()),
		Expired: s.GetExpired(), OldestDeferredAge: Duration(s.GetOldestDeferredAge())}
}

// Message converts a message to send to the wire.
func Message(m *sluice.Message) *sluicev1.Message {
	return &sluicev1.Message{
		Body: m.Body, MessageId: m.MessageID, SessionId: m.SessionID, PartitionKey: m.PartitionKey,
		CorrelationId: m.CorrelationID, Subject: m.Subject, ContentType: m.ContentType, ReplyTo: m.ReplyTo,
		ReplyToSessionId: m.ReplyToSessionID, To: m.To, ApplicationProperties: m.ApplicationProperties,
		TimeToLive: dur(m.TimeToLive), ScheduledEnqueueTime: ts(m.ScheduledEnqueueTime),
	}
}

// FromMessage converts a message to send from the wire.
func FromMessage(m *sluicev1.Message) *sluice.Message {
	return &sluice.Message{
		Body: m.GetBody(), MessageID: m.GetMessageId(), SessionID: m.GetSessionId(), PartitionKey: m.GetPartitionKey(),
		CorrelationID: m.GetCorrelationId(), Subject: m.GetSubject(), ContentType: m.GetContentType(),
		ReplyTo: m.GetReplyTo(), ReplyToSessionID: m.GetReplyToSessionId(), To: m.GetTo(),
		ApplicationProperties: m.GetApplicationProperties(), TimeToLive: Duration(m.GetTimeToLive()),
		ScheduledEnqueueTime: tm(m.GetScheduledEnqueueTime()),
	}
}

var states = map[sluice.MessageState]sluicev1.MessageState{
	sluice.StateActive:    sluicev1.MessageState_MESSAGE_STATE_ACTIVE,
	sluice.StateLocked:    sluicev1.MessageState_MESSAGE_STATE_LOCKED,
	sluice.StateScheduled: sluicev1.MessageState_MESSAGE_STATE_SCHEDULED,
	sluice.StateDeferred:  sluicev1.MessageState_MESSAGE_STATE_DEFERRED,
	sluice.StateExpired:   sluicev1.MessageState_MESSAGE_STATE_EXPIRED,
}

// Filter converts a message filter from the wire (nil: the zero
// filter); ErrInvalidArgument for a state that is not one.
func Filter(f *sluicev1.MessageFilter) (sluice.MessageFilter, error) {
	out := sluice.MessageFilter{MessageID: f.GetMessageId(), CorrelationID: f.GetCorrelationId(), Subject: f.GetSubject(),
		SessionID: f.GetSessionId(), Properties: f.GetApplicationProperties(), DeadLetterReason: f.DeadLetterReason}
	for _, s := range f.GetStates() {
		st, ok := fromStates[s]
		if !ok {
			return out, fmt.Errorf("unknown message state %d: %w", s, sluice.ErrInvalidArgument)
		}
		out.States = append(out.States, st)
	}
	return out, nil
}

// WireFilter converts a message filter to the wire.
func WireFilter(f sluice.MessageFilter) *sluicev1.MessageFilter {
	out := &sluicev1.MessageFilter{MessageId: f.MessageID, CorrelationId: f.CorrelationID, Subject: f.Subject,
		SessionId: f.SessionID, ApplicationProperties: f.Properties, DeadLetterReason: f.DeadLetterReason}
	for _, s := range f.States {
		w, ok := states[s]
		if !ok {
			w = sluicev1.MessageState(-1) // not a state: the server refuses it
		}
		out.States = append(out.States, w)
	}
	return out
}

var fromStates = func() map[sluicev1.MessageState]sluice.MessageState {
	m := make(map[sluicev1.MessageState]sluice.MessageState, len(states))
	for k, v := range states {
		m[v] = k
	}
	return m
}()

// ReasonCounts converts dead-letter counts by reason to the wire, the
// most first (ties by reason).
func ReasonCounts(byReason map[string]int64) []*sluicev1.DeadLetterReasonCount {
	out := make([]*sluicev1.DeadLetterReasonCount, 0, len(byReason))
	for r, n := range byReason {
		out = append(out, &sluicev1.DeadLetterReasonCount{Reason: r, Count: n})
	}
	slices.SortFunc(out, func(a, b *sluicev1.DeadLetterReasonCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	return out
}

// Received converts a received message to the wire.
func Received(m *sluice.ReceivedMessage) *sluicev1.ReceivedMessage {
	return &sluicev1.ReceivedMessage{
		Message: Message(&m.Message), SequenceNumber: m.SequenceNumber, DeliveryCount: int32(m.DeliveryCount),
		EnqueuedTime: ts(m.EnqueuedTime), ExpiresAt: ts(m.ExpiresAt), LockToken: m.LockToken,
		LockedUntil: ts(m.LockedUntil), State: states[m.State], DeadLetterReason: m.DeadLetterReason,
		DeadLetterDescription: m.DeadLetterDescription, DeadLetterSource: m.DeadLetterSource,
		DelayedUntil: ts(m.DelayedUntil),
	}
}

// ReceivedList converts received messages to the wire.
func ReceivedList(ms []*sluice.ReceivedMessage) []*sluicev1.ReceivedMessage {
	out := make([]*sluicev1.ReceivedMessage, len(ms))
	for i, m := range ms {
		out[i] = Received(m)
	}
	return out
}

// FromReceived converts a received message from the wire: one that the
// library settles by its LockToken.
func FromReceived(m *sluicev1.ReceivedMessage) *sluice.ReceivedMessage {
	out := &sluice.ReceivedMessage{
		Message: *FromMessage(m.GetMessage()), SequenceNumber: m.GetSequenceNumber(), DeliveryCount: int(m.GetDeliveryCount()),
		EnqueuedTime: tm(m.GetEnqueuedTime()), ExpiresAt: tm(m.GetExpiresAt()), LockToken: m.GetLockToken(),
		LockedUntil: tm(m.GetLockedUntil()), DeadLetterReason: m.GetDeadLetterReason(),
		DeadLetterDescription: m.GetDeadLetterDescription(), DeadLetterSource: m.GetDeadLetterSource(),
		DelayedUntil: tm(m.GetDelayedUntil()),
	}
	for s, w := range states {
		if w == m.GetState() {
			out.State = s
		}
	}
	return out
}

// Mode converts a receive mode from the wire.
func Mode(m sluicev1.ReceiveMode) (sluice.ReceiveMode, error) {
	switch m {
	case sluicev1.ReceiveMode_RECEIVE_MODE_UNSPECIFIED, sluicev1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK:
		return sluice.PeekLock, nil
	case sluicev1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE:
		return sluice.ReceiveAndDelete, nil
	}
	return 0, fmt.Errorf("unknown receive mode %d: %w", m, sluice.ErrInvalidArgument)
}

// WireMode converts a receive mode to the wire.
func WireMode(m sluice.ReceiveMode) sluicev1.ReceiveMode {
	if m == sluice.ReceiveAndDelete {
		return sluicev1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE
	}
	return sluicev1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK
}

// SubQueue converts a sub-queue from the wire.
func SubQueue(q sluicev1.SubQueue) (sluice.SubQueue, error) {
	switch q {
	case sluicev1.SubQueue_SUB_QUEUE_UNSPECIFIED:
		return sluice.SubQueueNone, nil
	case sluicev1.SubQueue_SUB_QUEUE_DEAD_LETTER:
		return sluice.SubQueueDeadLetter, nil
	}
	return 0, fmt.Errorf("unknown sub-queue %d: %w", q, sluice.ErrInvalidArgument)
}

// WireSubQueue converts a sub-queue to the wire.
func WireSubQueue(q sluice.SubQueue) sluicev1.SubQueue {
	if q == sluice.SubQueueDeadLetter {
		return sluicev1.SubQueue_SUB_QUEUE_DEAD_LETTER
	}
	return sluicev1.SubQueue_SUB_QUEUE_UNSPECIFIED
}

// SessionLock converts a held session to the wire.
func SessionLock(s *sluice.SessionReceiver) *sluicev1.SessionLock {
	return &sluicev1.SessionLock{SessionId: s.SessionID(), LockToken: s.LockToken(), LockedUntil: ts(s.LockedUntil())}
}

// Time converts a time from the wire.
func Time(t *timestamppb.Timestamp) time.Time { return tm(t) }

// Timestamp converts a time to the wire.
func Timestamp(t time.Time) *timestamppb.Timestamp { return ts(t) }

// DurationPB converts a duration to the wire.
func DurationPB(d time.Duration) *durationpb.Duration { return dur(d) }

// ClusterStatus converts a cluster's status to the wire.
func ClusterStatus(s sluice.ClusterStatus) *sluicev1.GetClusterStatusResponse {
	out := &sluicev1.GetClusterStatusResponse{}
	for _, n := range s.Nodes {
		out.Nodes = append(out.Nodes, &sluicev1.ClusterNode{Id: n.ID, Group: n.Group, Consumers: n.Consumers, Address: n.Address,
			StartedAt: ts(n.StartedAt), HeartbeatAt: ts(n.HeartbeatAt), Alive: n.Alive, Partitions: n.Partitions})
	}
	for _, p := range s.Partitions {
		ps := &sluicev1.PartitionStatus{Partition: p.Partition, Owner: p.Owner, Epoch: p.Epoch, LeaseUntil: ts(p.LeaseUntil),
			Held: p.Held, Head: p.Head, Checkpoint: p.Checkpoint, Lag: p.Lag, CacheWindows: int32(p.CacheWindows), CachedRecords: p.CachedRecords}
		for _, l := range p.Subscriptions {
			ps.Subscriptions = append(ps.Subscriptions, &sluicev1.SubscriptionLag{Id: l.ID, Position: l.Position, Lag: l.Lag,
				Consumer: l.Consumer, Namespace: l.Namespace, Key: l.Key, Fault: l.Fault})
		}
		for _, l := range p.Leases {
			ps.Leases = append(ps.Leases, &sluicev1.GroupLease{Group: l.Group, Owner: l.Owner, Epoch: l.Epoch,
				LeaseUntil: ts(l.LeaseUntil), Held: l.Held, CacheWindows: int32(l.CacheWindows), CachedRecords: l.CachedRecords})
		}
		out.Partitions = append(out.Partitions, ps)
	}
	return out
}

// FromClusterStatus converts a cluster's status from the wire.
func FromClusterStatus(s *sluicev1.GetClusterStatusResponse) sluice.ClusterStatus {
	var out sluice.ClusterStatus
	for _, n := range s.GetNodes() {
		out.Nodes = append(out.Nodes, sluice.ClusterNode{ID: n.GetId(), Group: n.GetGroup(), Consumers: n.GetConsumers(),
			Address: n.GetAddress(), StartedAt: tm(n.GetStartedAt()), HeartbeatAt: tm(n.GetHeartbeatAt()), Alive: n.GetAlive(),
			Partitions: n.GetPartitions()})
	}
	for _, p := range s.GetPartitions() {
		ps := sluice.PartitionStatus{Partition: p.GetPartition(), Owner: p.GetOwner(), Epoch: p.GetEpoch(),
			LeaseUntil: tm(p.GetLeaseUntil()), Held: p.GetHeld(), Head: p.GetHead(), Checkpoint: p.GetCheckpoint(), Lag: p.GetLag(),
			CacheWindows: int(p.GetCacheWindows()), CachedRecords: p.GetCachedRecords()}
		for _, l := range p.GetSubscriptions() {
			ps.Subscriptions = append(ps.Subscriptions, sluice.SubscriptionLag{ID: l.GetId(), Position: l.GetPosition(), Lag: l.GetLag(),
				Consumer: l.GetConsumer(), Namespace: l.GetNamespace(), Key: l.GetKey(), Fault: l.GetFault()})
		}
		for _, l := range p.GetLeases() {
			ps.Leases = append(ps.Leases, sluice.GroupLease{Group: l.GetGroup(), Owner: l.GetOwner(), Epoch: l.GetEpoch(),
				LeaseUntil: tm(l.GetLeaseUntil()), Held: l.GetHeld(), CacheWindows: int(l.GetCacheWindows()), CachedRecords: l.GetCachedRecords()})
		}
		out.Partitions = append(out.Partitions, ps)
	}
	return out
}
