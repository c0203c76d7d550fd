package sluiceotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sluicehq/sluice"
)

// Attributes of sluice's own, beside the conventions' messaging.*.
const (
	// StreamKeyAttribute is the key of the stream a publish or a
	// delivery of a stream event belongs to (its namespace is
	// messaging.destination.name).
	StreamKeyAttribute = attribute.Key("sluice.stream.key")
	// SequenceNumberAttribute is a delivered message's sequence number,
	// or a stream event's position in its partition.
	SequenceNumberAttribute = attribute.Key("sluice.sequence_number")
	// DeliveryCountAttribute is how many times a message or event has
	// been delivered, this time included.
	DeliveryCountAttribute = attribute.Key("sluice.delivery_count")
	// SessionIDAttribute is the session whose lock a renewal of a
	// session lock renews.
	SessionIDAttribute = attribute.Key("sluice.session_id")
)

// errorTypes name the errors a span's error.type reports: few values, as
// the conventions ask, so that spans group by them.
var errorTypes = []struct {
	err  error
	name string
}{
	{sluice.ErrLockLost, "lock_lost"},
	{sluice.ErrSessionLockLost, "session_lock_lost"},
	{sluice.ErrEntityNotFound, "entity_not_found"},
	{sluice.ErrMessageNotFound, "message_not_found"},
	{sluice.ErrMessageTooLarge, "message_too_large"},
	{sluice.ErrBatchTooLarge, "batch_too_large"},
	{sluice.ErrInvalidName, "invalid_name"},
	{sluice.ErrInvalidArgument, "invalid_argument"},
	{sluice.ErrClosed, "closed"},
	{sluice.ErrOutcomeUnknown, "outcome_unknown"},
	{sluice.ErrHandlerTimeout, "handler_timeout"},
	{context.DeadlineExceeded, "deadline_exceeded"},
	{context.Canceled, "canceled"},
}

// errorType is err's error.type: the name of the sluice error it wraps,
// "panic" for a handler's panic, else "_OTHER".
func errorType(err error) string {
	var pe *sluice.PanicError
	if errors.As(err, &pe) {
		return "panic"
	}
	for _, t := range errorTypes {
		if errors.Is(err, t.err) {
			return t.name
		}
	}
	return "_OTHER"
}
