package sluice

import (
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Message is a message to send. Every field but Body is optional.
type Message struct {
	// Body is the payload; sluice never reads it.
	Body []byte
	// MessageID is the application's identifier (duplicate detection keys
	// on it).
	MessageID string
	// SessionID groups messages for sessions; PartitionKey is stored with
	// the message.
	SessionID    string
	PartitionKey string
	// CorrelationID, Subject, ContentType, ReplyTo, ReplyToSessionID and To
	// are system properties, as in Service Bus: sluice stores them and
	// filters may match them.
	CorrelationID    string
	Subject          string
	ContentType      string
	ReplyTo          string
	ReplyToSessionID string
	To               string
	// ApplicationProperties are the application's own properties.
	ApplicationProperties map[string]string
	// TimeToLive is how long the message lives from its send, or for a
	// scheduled message from its ScheduledEnqueueTime (0: the queue's
	// default, which also caps it). Negative is refused
	// (ErrInvalidArgument); Forever, or longer from the network API, means
	// it never expires.
	TimeToLive time.Duration
	// ScheduledEnqueueTime, when set in the future, keeps the message from
	// being received before then. At that time it is enqueued, as in
	// Service Bus: it gets a new SequenceNumber and EnqueuedTime, and its
	// TimeToLive starts; the number Send returned names it (Peek,
	// CancelScheduled) only until then.
	ScheduledEnqueueTime time.Time
}

// Header keys of the system properties in storage.
const (
	headerCorrelationID    = "correlation-id"
	headerSubject          = "subject"
	headerReplyTo          = "reply-to"
	headerReplyToSessionID = "reply-to-session-id"
	headerTo               = "to"
)

func (m *Message) newMessage() store.NewMessage {
	var h map[string]string
	for _, kv := range [...]struct{ k, v string }{
		{headerCorrelationID, m.CorrelationID}, {headerSubject, m.Subject}, {headerReplyTo, m.ReplyTo},
		{headerReplyToSessionID, m.ReplyToSessionID}, {headerTo, m.To},
	} {
		if kv.v == "" {
			continue
		}
		if h == nil {
			h = make(map[string]string, 5)
		}
		h[kv.k] = kv.v
	}
	return store.NewMessage{
		MessageID: m.MessageID, SessionID: m.SessionID, PartitionKey: m.PartitionKey,
		ContentType: m.ContentType, Properties: m.ApplicationProperties, Headers: h,
		Payload: m.Body, TTL: m.TimeToLive, VisibleAt: m.ScheduledEnqueueTime,
	}
}

// MessageState says where a message stands.
type MessageState = sluicetype.MessageState

// Message states.
const (
	StateActive    = sluicetype.StateReady
	StateLocked    = sluicetype.StateLeased
	StateScheduled = sluicetype.StateScheduled
	StateDeferred  = sluicetype.StateDeferred
	// StateExpired is a peeked message whose time-to-live has run out:
	// the next receive or sweep removes it (or dead-letters it).
	StateExpired = sluicetype.StateExpired
)

// ReceivedMessage is a message as a receive or a peek returns it.
type ReceivedMessage struct {
	Message
	// SequenceNumber is the message's number in its queue: unique, and in
	// the order messages were enqueued (a scheduled message is enqueued at
	// its time, under a new number).
	SequenceNumber int64
	// DeliveryCount is how many times the message was received, this
	// time included.
	DeliveryCount int
	// EnqueuedTime is when it was sent (for a scheduled message, when its
	// time came); ExpiresAt when its time-to-live runs out (zero: never;
	// a deferred message never expires, whatever it says).
	EnqueuedTime time.Time
	ExpiresAt    time.Time
	// LockedUntil is when the lock of a peek-lock receive ends unless it
	// is renewed; for a peeked message that is locked, when its lock
	// ends.
	LockedUntil time.Time
	// LockToken is the lock of a peek-lock receive ("" otherwise): 32 hex
	// digits. A receiver of the same entity settles or renews a message
	// by it alone, as &ReceivedMessage{LockToken: token}, which is how a
	// message received in another process (through the server, say) is
	// settled here.
	LockToken string
	// State is where the message stands (peek).
	State MessageState
	// DelayedUntil, for a peeked message abandoned with a delay
	// (AbandonOptions.Delay, ProcessorOptions.Retry), is when the delay
	// ends and the message is delivered again: it is StateScheduled
	// meanwhile, keeping its SequenceNumber, and its ScheduledEnqueueTime
	// stays zero. Zero otherwise.
	DelayedUntil time.Time
	// DeadLetterReason and DeadLetterDescription say why a message of a
	// dead-letter queue was dead-lettered, and DeadLetterSource names the
	// entity it was dead-lettered from.
	DeadLetterReason      string
	DeadLetterDescription string
	DeadLetterSource      string

	queue   string      // "" when built from a LockToken alone
	dead    bool        // from the dead-letter queue
	settled atomic.Bool // completed, abandoned, dead-lettered or deferred
	// settledTx: settled in a caller's transaction, whose outcome the
	// message cannot know (a Processor then leaves it to that transaction).
	settledTx atomic.Bool
}

// lockToken formats a receipt as a LockToken.
func lockToken(r sluicetype.Receipt) string {
	return fmt.Sprintf("%016x%016x", uint64(r.Seq), uint64(r.Token))
}

// receipt parses m's LockToken.
func (m *ReceivedMessage) receipt() (sluicetype.Receipt, error) {
	t := m.LockToken
	if len(t) != 32 {
		return sluicetype.Receipt{}, fmt.Errorf("lock token %q: want 32 hex digits: %w", t, ErrInvalidArgument)
	}
	seq, err1 := strconv.ParseUint(t[:16], 16, 64)
	tok, err2 := strconv.ParseUint(t[16:], 16, 64)
	if err1 != nil || err2 != nil || seq == 0 || seq > math.MaxInt64 {
		return sluicetype.Receipt{}, fmt.Errorf("lock token %q: want 32 hex digits: %w", t, ErrInvalidArgument)
	}
	return sluicetype.Receipt{Seq: int64(seq), Token: int64(tok)}, nil
}

func received(queue string, m sluicetype.Message) *ReceivedMessage {
	r := &ReceivedMessage{
		Message: Message{
			Body: m.Payload, MessageID: m.MessageID, SessionID: m.SessionID, PartitionKey: m.PartitionKey,
			ContentType: m.ContentType, ApplicationProperties: m.Properties,
			CorrelationID: m.Headers[headerCorrelationID], Subject: m.Headers[headerSubject],
			ReplyTo: m.Headers[headerReplyTo], ReplyToSessionID: m.Headers[headerReplyToSessionID],
			To: m.Headers[headerTo],
		},
		SequenceNumber: m.Seq, DeliveryCount: m.DeliveryCount, EnqueuedTime: m.EnqueuedAt,
		ExpiresAt: m.ExpiresAt, State: m.State, queue: queue,
	}
	if m.State == sluicetype.StateScheduled {
		if m.DeliveryCount == 0 {
			r.ScheduledEnqueueTime = m.VisibleAt
		} else {
			r.DelayedUntil = m.VisibleAt
		}
	}
	if !m.ExpiresAt.IsZero() {
		r.TimeToLive = m.ExpiresAt.Sub(m.EnqueuedAt)
	}
	return r
}

func deadLetterMessage(queue string, d sluicetype.DeadLetter) *ReceivedMessage {
	r := received(queue, d.Message)
	r.dead = true
	r.DeadLetterReason, r.DeadLetterDescription, r.DeadLetterSource = d.Reason, d.Description, queue
	if d.Receipt.Token != 0 {
		r.LockToken, r.LockedUntil = lockToken(d.Receipt), d.LockedUntil
	}
	return r
}

func leasedMessage(queue string, l sluicetype.Leased) *ReceivedMessage {
	r := received(queue, l.Message)
	r.LockToken, r.LockedUntil = lockToken(l.Receipt), l.LockedUntil
	return r
}
