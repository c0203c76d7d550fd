package sluice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

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
	// it is delivered again (default 60 s, 1 s to 5 min: anything else is
	// refused with ErrInvalidArgument).
	LockDuration time.Duration
	// MaxDeliveryCount is how many deliveries a message gets; a lock that
	// ends after the last one dead-letters it with reason
	// MaxDeliveryCountExceeded (default 10).
	MaxDeliveryCount int
	// DefaultTTL is the time-to-live of messages that set none, and caps
	// those that set a longer one (0 or Forever: unlimited, read back as
	// Forever, as Service Bus reads back TimeSpan.MaxValue; negative is
	// refused).
	DefaultTTL time.Duration
	// DeadLetterOnExpiry moves expired messages to the dead-letter queue
	// with reason TTLExpiredException; otherwise they are dropped.
	DeadLetterOnExpiry bool
	// DeadLetterRetention is how long dead letters are kept (0 or Forever:
	// until purged or received, read back as Forever; negative is
	// refused).
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
	// (default 10 min, 20 s to 7 days: anything else is refused; 0 when
	// detection is off).
	DuplicateDetectionWindow time.Duration
	// RequiresSession makes the queue session-aware: every message needs
	// a SessionID, and messages are received only through a
	// SessionReceiver (AcceptSession, AcceptNextSession), in order within
	// their session. Fixed when the queue is created.
	RequiresSession bool
	// PartitionCount splits the queue into that many partitions (0 or 1:
	// none; at most MaxPartitionCount), as Service Bus's
	// EnablePartitioning does: each has its own sequence numbers, locks
	// and commit pipeline, so a busy queue's work spreads over several.
	// A message goes to the partition its SessionID, PartitionKey or
	// (with duplicate detection) MessageID picks, others take turns;
	// order and duplicate detection hold per partition, a receive takes
	// from every partition in turn, and a sequence number carries its
	// partition in its top 16 bits. Fixed when the queue is created. (A
	// subscription has its topic's: see TopicProperties.PartitionCount.)
	PartitionCount int
	// UserMetadata is the application's own text about the queue, as
	// Service Bus's UserMetadata: sluice stores it and never reads it (at
	// most MaxUserMetadataLength bytes, valid UTF-8). An update sets it as
	// given: an empty one clears it.
	UserMetadata string
}

// MaxUserMetadataLength bounds QueueProperties.UserMetadata, in bytes.
const MaxUserMetadataLength = 1024

// QueueInfo is a queue's name with its settings, defaults filled in.
type QueueInfo struct {
	Name string
	QueueProperties
	// ForwardTo names the entity the queue forwards its messages to.
	ForwardTo string
}

// entityKind tells queues, topics and subscriptions apart; all three are
// storage queues (a topic's holds no messages).
type entityKind string

const (
	kindQueue        entityKind = ""
	kindTopic        entityKind = "topic"
	kindSubscription entityKind = "subscription"
	// kindPartition is a partition of a partitioned queue other than its
	// first (see partition.go): no listing shows it.
	kindPartition entityKind = "partition"
)

// is reports whether k is other: a kind's filter for listEntities.
func (k entityKind) is(other entityKind) bool { return k == other }

func (k entityKind) String() string {
	if k == kindQueue {
		return "queue"
	}
	return string(k)
}

// attributes are the settings the queue layer stores beside storage's
// own, as the queue's attributes.
type attributes struct {
	Kind               entityKind   `json:"kind,omitempty"`
	LockDurationMS     int64        `json:"lockDurationMs,omitempty"`
	MaxMessageSize     int          `json:"maxMessageSize,omitempty"`
	ForwardTo          string       `json:"forwardTo,omitempty"`
	IgnoreFilterErrors bool         `json:"ignoreFilterErrors,omitempty"`
	Rules              []storedRule `json:"rules,omitempty"`
	PartitionCount     int          `json:"partitionCount,omitempty"`
	UserMetadata       string       `json:"userMetadata,omitempty"`
}

// entity is a queue, topic or subscription as the client works with it.
type entity struct {
	name  string
	kind  entityKind
	props QueueProperties
	// forwardTo names the entity messages are forwarded to ("": none).
	forwardTo          string
	ignoreFilterErrors bool
	// rules select a subscription's messages (subscriptions only).
	rules []Rule
	match []compiledRule
}

func (p QueueProperties) withDefaults() QueueProperties {
	// 0 and Forever both mean never, whose one form is Forever (storage
	// stores it as 0: see settings).
	if p.DefaultTTL == 0 {
		p.DefaultTTL = Forever
	}
	if p.DeadLetterRetention == 0 {
		p.DeadLetterRetention = Forever
	}
	if p.LockDuration == 0 {
		p.LockDuration = DefaultLockDuration
	}
	if p.MaxDeliveryCount == 0 {
		p.MaxDeliveryCount = DefaultMaxDeliveryCount
	}
	if p.MaxMessageSize == 0 {
		p.MaxMessageSize = DefaultMaxMessageSize
	}
	if p.PartitionCount == 0 {
		p.PartitionCount = 1
	}
	switch {
	case !p.RequiresDuplicateDetection:
		p.DuplicateDetectionWindow = 0
	case p.DuplicateDetectionWindow == 0:
		p.DuplicateDetectionWindow = DefaultDuplicateDetectionWindow
	}
	return p
}

// checkDurations refuses, before defaults apply, a negative duration and
// a duplicate detection window past its maximum, even with detection off
// (where the window is otherwise ignored).
func (p QueueProperties) checkDurations() error {
	if err := checkDurations(namedDuration{"lock duration", p.LockDuration}, namedDuration{"default TTL", p.DefaultTTL},
		namedDuration{"dead-letter retention", p.DeadLetterRetention},
		namedDuration{"duplicate detection window", p.DuplicateDetectionWindow}); err != nil {
		return err
	}
	if p.DuplicateDetectionWindow > MaxDuplicateDetectionWindow {
		return fmt.Errorf("duplicate detection window %v: at most %v: %w", p.DuplicateDetectionWindow, MaxDuplicateDetectionWindow, ErrInvalidArgument)
	}
	return nil
}

func (p QueueProperties) validate(l store.Limits) error {
	switch {
	case p.LockDuration < time.Second || p.LockDuration > MaxLockDuration:
		return fmt.Errorf("lock duration %v: must be between 1s and %v: %w", p.LockDuration, MaxLockDuration, ErrInvalidArgument)
	case p.MaxMessageSize < MinMaxMessageSize || p.MaxMessageSize > l.MaxMessageBytes:
		return fmt.Errorf("max message size %d: must be between %d and the backend's limit %d: %w",
			p.MaxMessageSize, MinMaxMessageSize, l.MaxMessageBytes, ErrInvalidArgument)
	case len(p.UserMetadata) > MaxUserMetadataLength:
		return fmt.Errorf("user metadata of %d bytes: at most %d: %w", len(p.UserMetadata), MaxUserMetadataLength, ErrInvalidArgument)
	case !utf8.ValidString(p.UserMetadata):
		return fmt.Errorf("user metadata is not valid UTF-8: %w", ErrInvalidArgument)
	}
	return nil
}

// settings turns an entity into storage's settings.
func (e *entity) settings(l store.Limits) (store.QueueSettings, error) {
	if err := e.props.checkDurations(); err != nil {
		return store.QueueSettings{}, err
	}
	p := e.props.withDefaults()
	if err := p.validate(l); err != nil {
		return store.QueueSettings{}, err
	}
	if e.forwardTo != "" {
		if err := validateEntityName("forward-to entity", e.forwardTo); err != nil {
			return store.QueueSettings{}, err
		}
	}
	if err := e.checkPartitions(); err != nil {
		return store.QueueSettings{}, err
	}
	e.props = p
	attrs, err := e.attributes()
	if err != nil {
		return store.QueueSettings{}, err
	}
	return store.QueueSettings{
		Name: e.name, MaxDeliveryCount: p.MaxDeliveryCount, DefaultTTL: storedNever(p.DefaultTTL),
		DeadLetterOnExpiry: p.DeadLetterOnExpiry, DeadLetterRetention: storedNever(p.DeadLetterRetention),
		DuplicateDetectionWindow: p.DuplicateDetectionWindow, RequiresSession: p.RequiresSession,
		Attributes: attrs,
	}, nil
}

// attributes encodes the entity's settings that storage keeps as the
// queue's attributes; e.props holds its defaults.
func (e *entity) attributes() ([]byte, error) {
	p := e.props
	a := attributes{
		Kind: e.kind, LockDurationMS: p.LockDuration.Milliseconds(), MaxMessageSize: p.MaxMessageSize,
		ForwardTo: e.forwardTo, IgnoreFilterErrors: e.ignoreFilterErrors, UserMetadata: p.UserMetadata,
	}
	if p.PartitionCount > 1 {
		a.PartitionCount = p.PartitionCount
	}
	for _, r := range e.rules {
		sr, err := storeRule(r)
		if err != nil {
			return nil, err
		}
		a.Rules = append(a.Rules, sr)
	}
	return json.Marshal(a)
}

// checkPartitions checks an entity's PartitionCount: 0 to
// MaxPartitionCount, and the name of a partitioned queue or subscription
// short enough for its partitions' names (a topic holds no messages: its
// subscriptions are partitioned).
func (e *entity) checkPartitions() error {
	n := e.props.PartitionCount
	switch {
	case n < 0 || n > MaxPartitionCount:
		return fmt.Errorf("partition count %d: must be between 0 and %d: %w", n, MaxPartitionCount, ErrInvalidArgument)
	case n > 1 && e.kind != kindTopic && len(e.name) > maxPartitionedNameLength:
		return fmt.Errorf("a partitioned %s's name is at most %d characters, %q has %d: %w",
			e.kind, maxPartitionedNameLength, e.name, len(e.name), ErrInvalidName)
	}
	return nil
}

// storedNever is a duration as storage stores it: Forever, never, is 0
// (and storage reads a 0 back as never, which withDefaults makes
// Forever again).
func storedNever(d time.Duration) time.Duration {
	if d >= Forever {
		return 0
	}
	return d
}

// decodeEntity reads storage's settings back.
func decodeEntity(s store.QueueSettings) (entity, error) {
	var a attributes
	if len(s.Attributes) > 0 {
		if err := json.Unmarshal(s.Attributes, &a); err != nil {
			return entity{}, fmt.Errorf("entity %q: stored attributes: %w", s.Name, err)
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
		PartitionCount:             a.PartitionCount,
		UserMetadata:               a.UserMetadata,
	}
	e := entity{
		name: s.Name, kind: a.Kind, props: p.withDefaults(),
		forwardTo: a.ForwardTo, ignoreFilterErrors: a.IgnoreFilterErrors,
	}
	for _, sr := range a.Rules {
		r, m, err := loadRule(sr)
		if err != nil {
			return entity{}, fmt.Errorf("entity %q: %w", s.Name, err)
		}
		e.rules, e.match = append(e.rules, r), append(e.match, m)
	}
	return e, nil
}

// validateEntityName checks a queue or topic name: storage's rules, and
// no "/Subscriptions/" segment, which names subscriptions.
func validateEntityName(kind, name string) error {
	if err := store.ValidateName(kind, name); err != nil {
		return err
	}
	if strings.Contains(strings.ToLower(name), subscriptionsSegment) {
		return fmt.Errorf("%s name %q holds %q, which only subscription paths may: %w", kind, name, subscriptionsSegment, ErrInvalidName)
	}
	if strings.Contains(strings.ToLower(name), partitionsSegment) {
		return fmt.Errorf("%s name %q holds %q, which names the partitions of a partitioned queue: %w", kind, name, partitionsSegment, ErrInvalidName)
	}
	return nil
}

// getEntity reads an entity of a kind; another kind is not found.
func (c *Client) getEntity(ctx context.Context, name string, kind entityKind) (entity, error) {
	name = canonical(name)
	s, err := c.st.GetQueue(ctx, name)
	if errors.Is(err, ErrEntityNotFound) {
		// The store's message calls every entity a queue.
		return entity{}, fmt.Errorf("sluice: %s %q: %w", kind, name, ErrEntityNotFound)
	}
	if err != nil {
		return entity{}, err
	}
	e, err := decodeEntity(s)
	if err != nil {
		return entity{}, err
	}
	c.remember(e)
	if e.kind != kind {
		return entity{}, fmt.Errorf("sluice: %s %q: it is a %s: %w", kind, name, e.kind, ErrEntityNotFound)
	}
	return e, nil
}

// createEntity stores a new entity.
func (c *Client) createEntity(ctx context.Context, e *entity) error {
	e.name, e.forwardTo = canonical(e.name), canonical(e.forwardTo)
	s, err := e.settings(c.limits)
	if err != nil {
		return fmt.Errorf("sluice: create %s %q: %w", e.kind, e.name, err)
	}
	if err := c.checkForward(ctx, e); err != nil {
		return fmt.Errorf("sluice: create %s %q: %w", e.kind, e.name, err)
	}
	rows, err := e.partitionRows(&s)
	if err != nil {
		return fmt.Errorf("sluice: create %s %q: %w", e.kind, e.name, err)
	}
	if err := c.st.CreateQueue(ctx, &s); err != nil {
		return err
	}
	if rows != nil {
		if err := c.createPartitions(ctx, rows); err != nil {
			// Undone as far as it goes: a partitioned queue without all its
			// partitions fails the calls that reach the missing ones.
			ctx := context.WithoutCancel(ctx)
			_ = c.deletePartitions(ctx, e.name)
			_ = c.st.DeleteQueue(ctx, e.name)
			return err
		}
	}
	c.forget(e.name)
	return nil
}

// updateEntity changes an entity's settings to e's, merged with the
// current ones (see merge); setForward says whether e.forwardTo is to be
// set, or kept as it is.
func (c *Client) updateEntity(ctx context.Context, e *entity, setForward bool) error {
	e.name, e.forwardTo = canonical(e.name), canonical(e.forwardTo)
	cur, err := c.getEntity(ctx, e.name, e.kind)
	if err != nil {
		return err
	}
	if err := e.merge(cur, setForward); err != nil {
		return fmt.Errorf("sluice: update %s %q: %w", e.kind, e.name, err)
	}
	s, err := e.settings(c.limits)
	if err != nil {
		return fmt.Errorf("sluice: update %s %q: %w", e.kind, e.name, err)
	}
	if setForward {
		if err := c.checkForward(ctx, e); err != nil {
			return fmt.Errorf("sluice: update %s %q: %w", e.kind, e.name, err)
		}
	}
	rows, err := e.partitionRows(&s)
	if err != nil {
		return fmt.Errorf("sluice: update %s %q: %w", e.kind, e.name, err)
	}
	if err := c.updatePartitions(ctx, rows); err != nil {
		return err
	}
	if err := c.st.UpdateQueue(ctx, &s); err != nil {
		return err
	}
	c.forget(e.name)
	return nil
}

// merge completes an update e of the entity cur, so that an update
// changes what it says and nothing else: a zero LockDuration,
// MaxDeliveryCount, MaxMessageSize or DuplicateDetectionWindow (whose
// zero only means "the default") keeps the current value; DefaultTTL,
// DeadLetterRetention and the flags DeadLetterOnExpiry and
// IgnoreFilterErrors are set as given (their zero is a setting: no TTL,
// kept until received, off); RequiresSession and
// RequiresDuplicateDetection are fixed at creation, as in Service Bus (an
// update that leaves them off keeps them; one that turns them on is
// refused); forwarding is kept unless setForward; rules are kept.
func (e *entity) merge(cur entity, setForward bool) error {
	p, was := &e.props, cur.props
	if p.RequiresSession && !was.RequiresSession {
		return fmt.Errorf("RequiresSession is fixed when the entity is created: %w", ErrInvalidArgument)
	}
	if p.RequiresDuplicateDetection && !was.RequiresDuplicateDetection {
		return fmt.Errorf("RequiresDuplicateDetection is fixed when the entity is created: %w", ErrInvalidArgument)
	}
	if p.PartitionCount != 0 && p.PartitionCount != was.partitions() {
		return fmt.Errorf("PartitionCount is fixed when the entity is created (it has %d): %w", was.partitions(), ErrInvalidArgument)
	}
	p.RequiresSession, p.RequiresDuplicateDetection = was.RequiresSession, was.RequiresDuplicateDetection
	p.PartitionCount = was.PartitionCount
	keep := func(v *time.Duration, old time.Duration) {
		if *v == 0 {
			*v = old
		}
	}
	keep(&p.LockDuration, was.LockDuration)
	keep(&p.DuplicateDetectionWindow, was.DuplicateDetectionWindow)
	if p.MaxDeliveryCount == 0 {
		p.MaxDeliveryCount = was.MaxDeliveryCount
	}
	if p.MaxMessageSize == 0 {
		p.MaxMessageSize = was.MaxMessageSize
	}
	if !setForward {
		e.forwardTo = cur.forwardTo
	}
	if e.kind == kindSubscription {
		e.rules = cur.rules
	}
	return nil
}

// listEntities pages through entities of the kinds wanted whose names
// start with prefix, after the name after: it reads the prefix's range
// of names only.
func (c *Client) listEntities(ctx context.Context, wanted func(entityKind) bool, prefix, after string, max int) ([]entity, error) {
	prefix, after = canonical(prefix), canonical(after)
	if max < 1 || max > c.limits.MaxBatch {
		return nil, errInvalid("list", "max %d: must be between 1 and %d", max, c.limits.MaxBatch)
	}
	var out []entity
	for len(out) < max {
		page, err := c.st.ListQueues(ctx, &store.ListParams{After: after, Max: c.limits.MaxBatch, Prefix: prefix})
		if err != nil {
			return nil, err
		}
		for _, s := range page {
			e, err := decodeEntity(s)
			if err != nil {
				return nil, err
			}
			c.remember(e)
			if wanted(e.kind) {
				if out = append(out, e); len(out) == max {
					return out, nil
				}
			}
		}
		if len(page) < c.limits.MaxBatch {
			return out, nil
		}
		after = page[len(page)-1].Name
	}
	return out, nil
}

// CreateQueue creates a queue; nil props take every default.
// ErrEntityExists if the name is taken. props is a pointer because a
// creation may leave every setting out; UpdateQueue takes a value
// because an update states the settings it applies.
func (c *Client) CreateQueue(ctx context.Context, name string, props *QueueProperties) (QueueInfo, error) {
	return c.CreateQueueForwarding(ctx, name, props, "")
}

// CreateQueueForwarding creates a queue that forwards every message sent
// to it to the entity forwardTo (a queue or topic), as Service Bus
// auto-forwarding does; "" forwards nothing. The target must exist, and
// may not lead back to the queue; a queue that requires sessions cannot
// forward (ErrInvalidArgument). A message that cannot be forwarded (too
// many hops, a target deleted since, or too large for it) is
// dead-lettered at the entity that could not forward it, with a reason.
func (c *Client) CreateQueueForwarding(ctx context.Context, name string, props *QueueProperties, forwardTo string) (QueueInfo, error) {
	if err := validateEntityName("queue", name); err != nil {
		return QueueInfo{}, fmt.Errorf("sluice: create queue: %w", err)
	}
	e := entity{name: name, kind: kindQueue, forwardTo: forwardTo}
	if props != nil {
		e.props = *props
	}
	if err := c.createEntity(ctx, &e); err != nil {
		return QueueInfo{}, err
	}
	return QueueInfo{Name: e.name, QueueProperties: e.props.withDefaults(), ForwardTo: e.forwardTo}, nil
}

// UpdateQueue changes a queue's settings: those props sets, merged with
// the current ones (a zero LockDuration, MaxDeliveryCount, MaxMessageSize
// or DuplicateDetectionWindow keeps the current value; DefaultTTL,
// DeadLetterRetention and DeadLetterOnExpiry are set as given;
// RequiresSession and RequiresDuplicateDetection are fixed at creation),
// and keeps its forwarding (UpdateQueueForwarding changes it). Messages
// already sent keep their expiry. Other clients see the change within a
// few seconds.
//
// props is a value, where CreateQueue takes a pointer, by the rule that
// required settings are values: an update has no defaults to fall back
// on, and the fields set as given (a zero DefaultTTL is no expiry) make
// the whole value the request, so nil would have no meaning.
func (c *Client) UpdateQueue(ctx context.Context, name string, props QueueProperties) (QueueInfo, error) {
	return c.updateQueue(ctx, name, props, "", false)
}

// UpdateQueueForwarding is UpdateQueue that also sets where the queue
// forwards its messages ("" for nowhere), checked as
// CreateQueueForwarding checks it.
func (c *Client) UpdateQueueForwarding(ctx context.Context, name string, props QueueProperties, forwardTo string) (QueueInfo, error) {
	return c.updateQueue(ctx, name, props, forwardTo, true)
}

func (c *Client) updateQueue(ctx context.Context, name string, props QueueProperties, forwardTo string, setForward bool) (QueueInfo, error) {
	e := entity{name: name, kind: kindQueue, props: props, forwardTo: forwardTo}
	if err := c.updateEntity(ctx, &e, setForward); err != nil {
		return QueueInfo{}, err
	}
	return QueueInfo{Name: e.name, QueueProperties: e.props.withDefaults(), ForwardTo: e.forwardTo}, nil
}

// GetQueue returns a queue's settings. ErrEntityNotFound if absent.
func (c *Client) GetQueue(ctx context.Context, name string) (QueueInfo, error) {
	e, err := c.getEntity(ctx, name, kindQueue)
	if err != nil {
		return QueueInfo{}, err
	}
	return QueueInfo{Name: e.name, QueueProperties: e.props, ForwardTo: e.forwardTo}, nil
}

// ListQueues returns up to max queues in name order, starting after the
// name after ("" for the first page).
func (c *Client) ListQueues(ctx context.Context, after string, max int) ([]QueueInfo, error) {
	return c.ListQueuesWithPrefix(ctx, "", after, max)
}

// ListQueuesWithPrefix returns up to max queues whose names start with
// prefix, in name order, starting after the name after; it reads only
// the names with the prefix.
func (c *Client) ListQueuesWithPrefix(ctx context.Context, prefix, after string, max int) ([]QueueInfo, error) {
	es, err := c.listEntities(ctx, kindQueue.is, prefix, after, max)
	if err != nil {
		return nil, err
	}
	out := make([]QueueInfo, len(es))
	for i, e := range es {
		out[i] = QueueInfo{Name: e.name, QueueProperties: e.props, ForwardTo: e.forwardTo}
	}
	return out, nil
}

// DeleteQueue deletes a queue with its messages and dead letters.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	if _, err := c.getEntity(ctx, name, kindQueue); err != nil {
		return err
	}
	name = canonical(name)
	c.forget(name)
	if err := c.st.DeleteQueue(ctx, name); err != nil {
		return err
	}
	return c.deletePartitions(ctx, name)
}

// QueueStats counts a queue's messages by state.
type QueueStats = store.QueueStats

// GetQueueStats counts a queue's messages: active, scheduled, in flight,
// deferred and dead-lettered, and the oldest one's age.
func (c *Client) GetQueueStats(ctx context.Context, name string) (QueueStats, error) {
	name = canonical(name)
	if n, err := c.partitionsOf(ctx, name); err != nil || n > 1 {
		if err != nil {
			return QueueStats{}, err
		}
		return c.partitionStats(ctx, name, n)
	}
	return c.st.QueueStats(ctx, name)
}

// DeadLetterReasons counts the dead letters of a queue or subscription
// (SubscriptionPath) by reason: MaxDeliveryCountExceeded,
// TTLExpiredException, or the reason a receiver gave.
func (c *Client) DeadLetterReasons(ctx context.Context, name string) (map[string]int64, error) {
	name = canonical(name)
	n, err := c.partitionsOf(ctx, name)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for p := range n {
		got, err := c.st.DeadLetterReasons(ctx, partitionQueue(name, p))
		if err != nil {
			return nil, err
		}
		for reason, k := range got {
			out[reason] += k
		}
	}
	return out, nil
}
