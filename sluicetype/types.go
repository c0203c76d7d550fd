package sluicetype

import "time"

// Dead-letter reasons that sluice itself assigns. They use the names Azure
// Service Bus uses, so operators who know it recognise them. Applications
// may dead-letter with reasons of their own.
const (
	// ReasonMaxDeliveryCountExceeded marks a message whose lease ended after
	// its last allowed delivery.
	ReasonMaxDeliveryCountExceeded = "MaxDeliveryCountExceeded"
	// ReasonTTLExpired marks a message whose time-to-live ran out before it
	// was completed, on a queue that dead-letters expired messages.
	ReasonTTLExpired = "TTLExpiredException"
)

// Message is a queued message as storage returns it from a lease or a peek.
type Message struct {
	// Seq is the message's sequence number: unique in its queue, gap-free
	// and assigned in commit order.
	Seq int64
	// MessageID is the application's identifier, empty when none was given.
	MessageID string
	// SessionID and PartitionKey are stored for the queue layer's sessions
	// and duplicate detection; storage does not interpret them.
	SessionID    string
	PartitionKey string
	// ContentType describes Payload, such as "application/json".
	ContentType string
	// Properties are the application properties.
	Properties map[string]string
	// Headers are the queue layer's system properties (correlation id,
	// subject, reply-to and the like); storage does not interpret them.
	Headers map[string]string
	// Payload is the message body.
	Payload []byte
	// DeliveryCount is how many times the message has been leased,
	// including the lease that returned it.
	DeliveryCount int
	// EnqueuedAt is when the message was enqueued, by the database clock.
	EnqueuedAt time.Time
	// VisibleAt is when a scheduled or leased message becomes (or became)
	// available; zero for a message that is available now.
	VisibleAt time.Time
	// ExpiresAt is when the message's time-to-live runs out; zero when it
	// never expires.
	ExpiresAt time.Time
	// State tells where the message stands (peek only; a lease returns
	// messages in StateLeased).
	State MessageState
}

// MessageState says where a message stands in its queue.
type MessageState int

// Message states. The numbers are stored in the database; never renumber.
const (
	// StateReady: available to the next lease (unless its TTL ran out).
	StateReady MessageState = 0
	// StateLeased: held by a receipt until its lease ends.
	StateLeased MessageState = 1
	// StateScheduled: becomes ready at VisibleAt (scheduled delivery or an
	// abandon with a delay).
	StateScheduled MessageState = 2
	// StateDeferred: set aside by the application, received only by
	// sequence number (used by the queue layer).
	StateDeferred MessageState = 3
	// StateExpired: an active message whose time-to-live has run out and
	// that the next receive or sweep removes. Peek reports it; it is
	// never stored (the row still says StateReady).
	StateExpired MessageState = 4
)

// String returns the state's name.
func (s MessageState) String() string {
	switch s {
	case StateReady:
		return "ready"
	case StateLeased:
		return "leased"
	case StateScheduled:
		return "scheduled"
	case StateDeferred:
		return "deferred"
	case StateExpired:
		return "expired"
	}
	return "unknown"
}

// Receipt proves a lease on one message. Settling with a receipt whose lease
// has ended, or whose message was leased again, fails with ErrLockLost.
type Receipt struct {
	Seq   int64
	Token int64
}

// Leased is a message together with the receipt of its lease.
type Leased struct {
	Message
	Receipt Receipt
	// LockedUntil is when the lease ends unless it is extended.
	LockedUntil time.Time
}

// DeadLetter is a message that was moved to its queue's dead letters.
type DeadLetter struct {
	Message
	// Reason and Description say why it was dead-lettered.
	Reason      string
	Description string
	// DeadAt is when it was dead-lettered; RemoveAt is when retention will
	// delete it (zero: kept until purged).
	DeadAt   time.Time
	RemoveAt time.Time
	// Receipt and LockedUntil are set when the dead letter was leased
	// (LeaseDeadLetters); zero when peeked.
	Receipt     Receipt
	LockedUntil time.Time
}

// Record is one entry of a partition log.
type Record struct {
	// Position is the record's place in its partition: gap-free and
	// assigned in commit order, starting at 1.
	Position int64
	// Namespace and Key name the stream the record belongs to.
	Namespace string
	Key       string
	// Properties are application properties.
	Properties map[string]string
	// Payload is the record's body.
	Payload []byte
	// AppendedAt is when the record was appended, by the database clock.
	AppendedAt time.Time
}
