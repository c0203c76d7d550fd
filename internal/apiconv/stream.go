package apiconv

import (
	"fmt"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/sluicetype"
)

// StreamID converts a stream's id to the wire.
func StreamID(id sluice.StreamID) *sluicev1.StreamId {
	return &sluicev1.StreamId{Namespace: id.Namespace, Key: id.Key}
}

// FromStreamID converts a stream's id from the wire.
func FromStreamID(id *sluicev1.StreamId) sluice.StreamID {
	return sluice.StreamID{Namespace: id.GetNamespace(), Key: id.GetKey()}
}

// Events converts events to publish to the wire.
func Events(evs []sluice.Event) []*sluicev1.Event {
	out := make([]*sluicev1.Event, len(evs))
	for i, e := range evs {
		out[i] = &sluicev1.Event{Body: e.Body, Properties: e.Properties}
	}
	return out
}

// FromEvents converts events to publish from the wire.
func FromEvents(evs []*sluicev1.Event) []sluice.Event {
	out := make([]sluice.Event, len(evs))
	for i, e := range evs {
		out[i] = sluice.Event{Body: e.GetBody(), Properties: e.GetProperties()}
	}
	return out
}

// StartPosition converts a start position from the wire.
func StartPosition(s sluicev1.StartPosition, position int64) (sluice.StartPosition, error) {
	switch s {
	case sluicev1.StartPosition_START_POSITION_UNSPECIFIED, sluicev1.StartPosition_START_POSITION_NOW:
		return sluice.FromNow(), nil
	case sluicev1.StartPosition_START_POSITION_BEGINNING:
		return sluice.FromBeginning(), nil
	case sluicev1.StartPosition_START_POSITION_AT:
		return sluice.FromPosition(position), nil
	}
	return sluice.StartPosition{}, fmt.Errorf("start position %d: %w", s, sluicetype.ErrInvalidArgument)
}

// StreamSubscription converts a stream subscription to the wire.
func StreamSubscription(s sluice.StreamSubscription) *sluicev1.StreamSubscription {
	return &sluicev1.StreamSubscription{Id: s.ID, Consumer: s.Consumer, Stream: StreamID(s.Stream), Partition: s.Partition,
		Fault: s.Fault, FaultedAt: ts(s.FaultedAt), CreatedAt: ts(s.CreatedAt),
		Repositions: s.Repositions, LastReposition: StreamReposition(s.LastReposition)}
}

// FromStreamSubscription converts a stream subscription from the wire.
func FromStreamSubscription(s *sluicev1.StreamSubscription) sluice.StreamSubscription {
	return sluice.StreamSubscription{ID: s.GetId(), Consumer: s.GetConsumer(), Stream: FromStreamID(s.GetStream()),
		Partition: s.GetPartition(), Fault: s.GetFault(), FaultedAt: tm(s.GetFaultedAt()), CreatedAt: tm(s.GetCreatedAt()),
		Repositions: s.GetRepositions(), LastReposition: FromStreamReposition(s.GetLastReposition())}
}

// StreamEvent converts a delivered or parked event to the wire.
func StreamEvent(e *sluice.StreamEvent) *sluicev1.StreamEvent {
	return &sluicev1.StreamEvent{Stream: &sluicev1.StreamId{Namespace: e.Namespace, Key: e.Key}, Partition: e.Partition,
		Position: e.Position, Subscription: e.Subscription, Attempt: int32(e.Attempt), Body: e.Body, Properties: e.Properties,
		AppendedAt: ts(e.AppendedAt)}
}

// FromStreamEvent converts a delivered or parked event from the wire.
func FromStreamEvent(e *sluicev1.StreamEvent) *sluice.StreamEvent {
	return &sluice.StreamEvent{Namespace: e.GetStream().GetNamespace(), Key: e.GetStream().GetKey(), Partition: e.GetPartition(),
		Position: e.GetPosition(), Subscription: e.GetSubscription(), Attempt: int(e.GetAttempt()), Body: e.GetBody(),
		Properties: e.GetProperties(), AppendedAt: tm(e.GetAppendedAt())}
}

// ParkedEvent converts a parked event to the wire.
func ParkedEvent(p sluice.ParkedEvent) *sluicev1.ParkedEvent {
	return &sluicev1.ParkedEvent{Event: StreamEvent(&p.StreamEvent), Error: p.Error, Attempts: int32(p.Attempts), ParkedAt: ts(p.ParkedAt)}
}

// FromParkedEvent converts a parked event from the wire.
func FromParkedEvent(p *sluicev1.ParkedEvent) sluice.ParkedEvent {
	return sluice.ParkedEvent{StreamEvent: *FromStreamEvent(p.GetEvent()), Error: p.GetError(), Attempts: int(p.GetAttempts()),
		ParkedAt: tm(p.GetParkedAt())}
}

// ConsumerOptions converts a consume's options from the wire.
func ConsumerOptions(r *sluicev1.ConsumeRequest) (sluice.ConsumerOptions, error) {
	o := sluice.ConsumerOptions{Namespace: r.GetNamespace(), MaxConcurrency: int(r.GetMaxConcurrency()),
		DeliveryTimeout: Duration(r.GetAckTimeout()), MaxAttempts: int(r.GetMaxAttempts()),
		RetryBackoff: Duration(r.GetRetryBackoff()), MaxRetryBackoff: Duration(r.GetMaxRetryBackoff())}
	switch r.GetOnFailure() {
	case sluicev1.FailurePolicy_FAILURE_POLICY_UNSPECIFIED, sluicev1.FailurePolicy_FAILURE_POLICY_PARK:
		o.OnFailure = sluice.ParkOnFailure
	case sluicev1.FailurePolicy_FAILURE_POLICY_FAULT:
		o.OnFailure = sluice.FaultOnFailure
	default:
		return o, fmt.Errorf("failure policy %d: %w", r.GetOnFailure(), sluicetype.ErrInvalidArgument)
	}
	return o, nil
}

// ConsumeRequest converts a consumer's options to the wire.
func ConsumeRequest(consumer, group string, o sluice.ConsumerOptions) *sluicev1.ConsumeRequest {
	r := &sluicev1.ConsumeRequest{Consumer: consumer, Group: group, Namespace: o.Namespace,
		MaxConcurrency: int32(o.MaxConcurrency), AckTimeout: dur(o.DeliveryTimeout), MaxAttempts: int32(o.MaxAttempts),
		RetryBackoff: dur(o.RetryBackoff), MaxRetryBackoff: dur(o.MaxRetryBackoff)}
	if o.OnFailure == sluice.FaultOnFailure {
		r.OnFailure = sluicev1.FailurePolicy_FAILURE_POLICY_FAULT
	}
	return r
}
