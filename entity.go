package sluice

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Queue defaults and bounds, as Azure Service Bus has them.
const (
	DefaultLockDuration     = 60 * time.Second
	MaxLockDuration         = 5 * time.Minute
	DefaultMaxDeliveryCount = 10
	DefaultMaxMessageSize   = 1 << 20
	// MinMaxMessageSize is the smallest maximum message size a queue may
	// set.
	MinMaxMessageSize = 1 << 10
	// DefaultDuplicateDetectionWindow applies when duplicate detection is
	// on and sets no window; windows go from 20 s to 7 days.
	DefaultDuplicateDetectionWindow = 10 * time.Minute
	MinDuplicateDetectionWindow     = store.MinDuplicateDetectionWindow
	MaxDuplicateDetectionWindow     = store.MaxDuplicateDetectionWindow
)

// QueueProperties are a queue's settings. Zero values take the defaults.
type QueueProperties struct {
	// LockDuration is how long a peek-lock receive holds a message before
	// it is delivered again (default 60 s, at most 5 min).
	LockDuration time.Duration
	// MaxDeliveryCount is how many deliveries a message gets; a lock that
	// ends after the last one dead-letters it with reason
	// MaxDeliveryCountExceeded (default 10).
	MaxDeliveryCount int
	// DefaultTTL is the time-to-live of messages that set none, and caps
	// those that set a longer one (0: unlimited).
	DefaultTTL time.Duration
	// DeadLetterOnExpiry moves expired messages to the dead-letter queue
	// with reason TTLExpiredException; otherwise they are dropped.
	DeadLetterOnExpiry bool
	// DeadLetterRetention is how long dead letters are kept (0: until
	// purged or received).
	DeadLetterRetention time.Duration
	// MaxMessageSize bounds a message's body, properties and identifiers,
	// in bytes (default 1 MiB, at least 1 KiB, at most the backend's
	// limit).
	MaxMessageSize int
	// RequiresDuplicateDetection turns duplicate detection on: a message
	// whose MessageID (with its PartitionKey, when set) was sent within
	// DuplicateDetectionWindow is accepted without being stored again, on
	// any node and across restarts; Send returns the first one's sequence
	// number. Messages without a MessageID are never duplicates.
	RequiresDuplicateDetection bool
	// DuplicateDetectionWindow is how long a message id is remembered
	// (default 10 min, 20 s to 7 days; 0 when detection is off).
	DuplicateDetectionWindow time.Duration
	// RequiresSession makes the queue session-aware: every message needs
	// a SessionID, and messages are received only through a
	// SessionReceiver (AcceptSession, AcceptNextSession), in order within
	// their session. Fixed when the queue is created.
	RequiresSession bool
}

// QueueInfo is a queue's name with its settings, defaults filled in.
type QueueInfo struct {
	Name string
	QueueProperties
}

// attributes are the settings the queue layer stores beside storage's own.
type attributes struct {
	LockDurationMS int64 `json:"lockDurationMs"`
	MaxMessageSize int   `json:"maxMessageSize"`
}

func (p QueueProperties) withDefaults() QueueProperties {
	if p.LockDuration == 0 {
		p.LockDuration = DefaultLockDuration
	}
	if p.MaxDeliveryCount == 0 {
		p.MaxDeliveryCount = DefaultMaxDeliveryCount
	}
	if p.MaxMessageSize == 0 {
		p.MaxMessageSize = DefaultMaxMessageSize
	}
	switch {
	case !p.RequiresDuplicateDetection:
		p.DuplicateDetectionWindow = 0
	case p.DuplicateDetectionWindow == 0:
		p.DuplicateDetectionWindow = DefaultDuplicateDetectionWindow
	}
	return p
}

func (p QueueProperties) validate(l store.Limits) error {
	switch {
	case p.LockDuration < time.Second || p.LockDuration > MaxLockDuration:
		return fmt.Errorf("lock duration %v: must be between 1s and %v: %w", p.LockDuration, MaxLockDuration, ErrInvalidArgument)
	case p.MaxMessageSize < MinMaxMessageSize || p.MaxMessageSize > l.MaxMessageBytes:
		return fmt.Errorf("max message size %d: must be between %d and the backend's limit %d: %w",
			p.MaxMessageSize, MinMaxMessageSize, l.MaxMessageBytes, ErrInvalidArgument)
	}
	return nil
}

// settings turns properties into storage's settings of queue name.
func (p QueueProperties) settings(name string, l store.Limits) (store.QueueSettings, error) {
	p = p.withDefaults()
	if err := p.validate(l); err != nil {
		return store.QueueSettings{}, err
	}
	attrs, err := json.Marshal(attributes{LockDurationMS: p.LockDuration.Milliseconds(), MaxMessageSize: p.MaxMessageSize})
	if err != nil {
		return store.QueueSettings{}, err
	}
	return store.QueueSettings{
		Name: name, MaxDeliveryCount: p.MaxDeliveryCount, DefaultTTL: p.DefaultTTL,
		DeadLetterOnExpiry: p.DeadLetterOnExpiry, DeadLetterRetention: p.DeadLetterRetention,
		DuplicateDetectionWindow: p.DuplicateDetectionWindow, RequiresSession: p.RequiresSession,
		Attributes: attrs,
	}, nil
}

// queueInfo reads storage's settings back.
func queueInfo(s store.QueueSettings) (QueueInfo, error) {
	var a attributes
	if len(s.Attributes) > 0 {
		if err := json.Unmarshal(s.Attributes, &a); err != nil {
			return QueueInfo{}, fmt.Errorf("queue %q: stored attributes: %w", s.Name, err)
		}
	}
	p := QueueProperties{
		LockDuration:        time.Duration(a.LockDurationMS) * time.Millisecond,
		MaxDeliveryCount:    s.MaxDeliveryCount,
		DefaultTTL:          s.DefaultTTL,
		DeadLetterOnExpiry:  s.DeadLetterOnExpiry,
		DeadLetterRetention: s.DeadLetterRetention,
		MaxMessageSize:      a.MaxMessageSize,

		RequiresDuplicateDetection: s.DuplicateDetectionWindow > 0,
		DuplicateDetectionWindow:   s.DuplicateDetectionWindow,
		RequiresSession:            s.RequiresSession,
	}
	return QueueInfo{Name: s.Name, QueueProperties: p.withDefaults()}, nil
}

// CreateQueue creates a queue; nil props take every default.
// ErrEntityExists if the name is taken.
func (c *Client) CreateQueue(ctx context.Context, name string, props *QueueProperties) (QueueInfo, error) {
	if props == nil {
		props = &QueueProperties{}
	}
	s, err := props.settings(name, c.limits)
	if err != nil {
		return QueueInfo{}, fmt.Errorf("sluice: create queue %q: %w", name, err)
	}
	if err := c.st.CreateQueue(ctx, &s); err != nil {
		return QueueInfo{}, err
	}
	c.forget(name)
	return queueInfo(s)
}

// UpdateQueue replaces a queue's settings (zero fields take defaults);
// messages already sent keep their expiry. Other clients see the change
// within a few seconds.
func (c *Client) UpdateQueue(ctx context.Context, name string, props QueueProperties) (QueueInfo, error) {
	s, err := props.settings(name, c.limits)
	if err != nil {
		return QueueInfo{}, fmt.Errorf("sluice: update queue %q: %w", name, err)
	}
	cur, err := c.st.GetQueue(ctx, name)
	if err != nil {
		return QueueInfo{}, err
	}
	if cur.RequiresSession != s.RequiresSession {
		return QueueInfo{}, errInvalid("update queue", "queue %q: RequiresSession is fixed when the queue is created", name)
	}
	if err := c.st.UpdateQueue(ctx, &s); err != nil {
		return QueueInfo{}, err
	}
	c.forget(name)
	return queueInfo(s)
}

// GetQueue returns a queue's settings. ErrEntityNotFound if absent.
func (c *Client) GetQueue(ctx context.Context, name string) (QueueInfo, error) {
	s, err := c.st.GetQueue(ctx, name)
	if err != nil {
		return QueueInfo{}, err
	}
	info, err := queueInfo(s)
	if err != nil {
		return QueueInfo{}, fmt.Errorf("sluice: get queue: %w", err)
	}
	return info, nil
}

// ListQueues returns up to max queues in name order, starting after the
// name after ("" for the first page).
func (c *Client) ListQueues(ctx context.Context, after string, max int) ([]QueueInfo, error) {
	ss, err := c.st.ListQueues(ctx, &store.ListParams{After: after, Max: max})
	if err != nil {
		return nil, err
	}
	out := make([]QueueInfo, len(ss))
	for i, s := range ss {
		if out[i], err = queueInfo(s); err != nil {
			return nil, fmt.Errorf("sluice: list queues: %w", err)
		}
	}
	return out, nil
}

// DeleteQueue deletes a queue with its messages and dead letters.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	c.forget(name)
	return c.st.DeleteQueue(ctx, name)
}

// QueueStats counts a queue's messages by state.
type QueueStats = store.QueueStats

// GetQueueStats counts a queue's messages: active, scheduled, in flight,
// deferred and dead-lettered, and the oldest one's age.
func (c *Client) GetQueueStats(ctx context.Context, name string) (QueueStats, error) {
	return c.st.QueueStats(ctx, name)
}
