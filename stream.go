package sluice

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Stream errors.
var (
	// ErrPartitionCount reports a client or processor configured with a
	// number of stream partitions other than the database's.
	ErrPartitionCount = sluicetype.ErrPartitionCount
	// ErrSingleNode reports a second processor of a tenant started on
	// SQLite, where one runs at a time.
	ErrSingleNode = sluicetype.ErrSingleNode
	// ErrSubscriptionNotFound reports a stream subscription that does not
	// exist.
	ErrSubscriptionNotFound = sluicetype.ErrSubscriptionNotFound
	// ErrTrimmed reports a position retention has deleted.
	ErrTrimmed = sluicetype.ErrTrimmed
	// ErrFenced reports a write by a node that no longer owns a partition.
	ErrFenced = sluicetype.ErrFenced
	// ErrConsumerConflict reports a processor started with a consumer
	// that processors of another group handle.
	ErrConsumerConflict = sluicetype.ErrConsumerConflict
	// ErrPartitionNotPulled reports parked events a processor's Replay
	// left parked: their partitions are pulled by another processor.
	ErrPartitionNotPulled = sluicetype.ErrPartitionNotPulled
	// ErrWindowLimit is named in the fault of a subscription that a
	// partition's cache could not give a window of its own, at
	// CacheWindows windows, under WindowLimitFault.
	ErrWindowLimit = sluicetype.ErrWindowLimit
	// ErrRetentionGap is named in the fault (or the parked gap marker) of
	// a subscription that retention's Expiry passed: it had not read
	// records retention deleted.
	ErrRetentionGap = sluicetype.ErrRetentionGap
)

// RetentionGapProperty is the property of a parked marker of a retention
// gap (under the Park policy): the positions of the partition retention
// deleted before the subscription read them, as "first-last". A marker
// has no body; Replay leaves it parked, and the namespace's Parked
// retention (StreamRetention.Parked) removes it.
const RetentionGapProperty = stream.RetentionGapProperty

// StreamID names a stream: a namespace (a name like a queue's) and a key
// (any UTF-8 text of 1 to 1,024 bytes). Streams hash onto partitions by
// both (see PartitionOf).
type StreamID struct {
	Namespace string
	Key       string
}

func (id StreamID) String() string { return id.Namespace + "/" + id.Key }

func (id StreamID) validate() error {
	if err := store.ValidateName("namespace", id.Namespace); err != nil {
		return err
	}
	return store.ValidateKey(id.Key)
}

// PartitionOf returns the partition a stream's events go to when there
// are n partitions: the 64-bit FNV-1a hash of the namespace, a zero byte
// and the key, modulo n. It never changes: every node must agree on it.
func PartitionOf(id StreamID, n int32) int32 {
	return stream.PartitionOf(id.Namespace, id.Key, n)
}

// Event is an event to publish.
type Event struct {
	Body       []byte
	Properties map[string]string
}

// StreamEvent is an event delivered to a handler, with its stream, its
// place in the partition log and its subscription.
type StreamEvent = stream.Event

// StreamHandler handles the events of a subscription, one event of a
// stream at a time. Returning an error or panicking fails the delivery:
// it is retried with backoff, then the consumer's failure policy applies.
// It should return when ctx ends.
type StreamHandler = stream.Handler

// FailurePolicy says what happens to an event whose deliveries all
// failed.
type FailurePolicy = stream.FailurePolicy

const (
	// ParkOnFailure stores the event among the subscription's parked
	// events, with its error, and moves on (the default).
	ParkOnFailure = stream.Park
	// FaultOnFailure stops the subscription and records why; it delivers
	// again once ClearFault is called.
	FaultOnFailure = stream.Fault
)

// WindowLimitPolicy says what a partition's stream cache does when a
// subscription needs a window of its own and the cache already keeps
// StreamProcessorOptions.CacheWindows of them.
type WindowLimitPolicy = stream.WindowLimitPolicy

const (
	// WindowLimitShare shares a window (the default): a subscription that
	// starts behind every window moves the nearest window above it back
	// to its position, whose subscriptions wait while it reads again
	// (missing nothing), and a lagging subscription that pins a full
	// window holds that window's other subscriptions back with it, as a
	// single window would.
	WindowLimitShare = stream.WindowLimitShare
	// WindowLimitFault faults such a subscription instead, with a reason
	// naming ErrWindowLimit; ClearFault or a reposition lets it try
	// again.
	WindowLimitFault = stream.WindowLimitFault
)

// MaxCacheWindows bounds StreamProcessorOptions.CacheWindows.
const MaxCacheWindows = 64

// UnboundedLagging, as StreamProcessorOptions.LaggingRate, lets lagging
// windows deliver as fast as their handlers, beside live ones too.
const UnboundedLagging = math.MaxInt

// StreamCacheWindow describes one resident window of a partition's
// cache, in StreamPartitionStats.Windows.
type StreamCacheWindow = stream.WindowStats

// streamPartitions returns the client's partition count, checking it
// against the database's on first use.
func (c *Client) streamPartitions(ctx context.Context) (int32, error) {
	c.mu.Lock()
	checked := c.partitionsChecked
	c.mu.Unlock()
	if checked {
		return c.partitions, nil
	}
	if err := stream.CheckPartitions(ctx, c.st, c.partitions); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.partitionsChecked = true
	c.mu.Unlock()
	return c.partitions, nil
}

// Publish appends events to a stream atomically and returns their
// positions in the stream's partition, in order. Concurrent publishes
// share commits. When it returns nil the events are stored durably.
func (c *Client) Publish(ctx context.Context, id StreamID, events ...Event) ([]int64, error) {
	in := c.instrumentation()
	if in == nil {
		return c.publish(ctx, id, events)
	}
	op := &Operation{Kind: OperationPublish, Stream: id, Events: CopyEvents(events)}
	ctx, end := in.Start(ctx, op)
	pos, err := c.publish(ctx, id, op.Events)
	end(err)
	return pos, err
}

// publish does Publish's work.
func (c *Client) publish(ctx context.Context, id StreamID, events []Event) ([]int64, error) {
	p, err := c.appendParams(ctx, id, events)
	if err != nil {
		return nil, err
	}
	res, err := c.st.Append(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("sluice: publish to %s: %w", id, err)
	}
	return span(res), nil
}

// PublishTx publishes in the caller's transaction tx, opened on the same
// database (on PostgreSQL, with a search_path that reaches sluice's
// tables): the events commit with the caller's own writes, or not at all.
// The partition stays locked for other publishers until tx ends, so keep
// it short; on SQLite make no other sluice call that writes while it is
// open.
func (c *Client) PublishTx(ctx context.Context, tx Tx, id StreamID, events ...Event) ([]int64, error) {
	in := c.instrumentation()
	if in == nil {
		return c.publishTx(ctx, tx, id, events)
	}
	op := &Operation{Kind: OperationPublish, Stream: id, Events: CopyEvents(events), InTx: true}
	ctx, end := in.Start(ctx, op)
	pos, err := c.publishTx(ctx, tx, id, op.Events)
	end(err)
	return pos, err
}

// publishTx does PublishTx's work.
func (c *Client) publishTx(ctx context.Context, tx Tx, id StreamID, events []Event) ([]int64, error) {
	ta, ok := c.st.(store.TxAppender)
	if !ok {
		return nil, errInvalid("publish", "this backend cannot join a caller's transaction")
	}
	p, err := c.appendParamsTx(id, events)
	if err != nil {
		return nil, err
	}
	res, err := ta.AppendTx(ctx, tx, p)
	if err != nil {
		return nil, fmt.Errorf("sluice: publish to %s: %w", id, err)
	}
	return span(res), nil
}

func (c *Client) appendParams(ctx context.Context, id StreamID, events []Event) (*store.AppendParams, error) {
	if err := checkPublish(id, events); err != nil {
		return nil, err
	}
	n, err := c.streamPartitions(ctx)
	if err != nil {
		return nil, err
	}
	return newAppendParams(id, n, events), nil
}

// appendParamsTx is appendParams for PublishTx: until this client has
// checked the partition count, the append checks it in the caller's
// transaction (recording it there if none is), since a check on a
// connection of sluice's own would wait for that transaction on SQLite.
func (c *Client) appendParamsTx(id StreamID, events []Event) (*store.AppendParams, error) {
	if err := checkPublish(id, events); err != nil {
		return nil, err
	}
	c.mu.Lock()
	checked := c.partitionsChecked
	c.mu.Unlock()
	p := newAppendParams(id, c.partitions, events)
	if !checked {
		p.Partitions = c.partitions
	}
	return p, nil
}

func checkPublish(id StreamID, events []Event) error {
	if err := id.validate(); err != nil {
		return fmt.Errorf("sluice: publish: %w", err)
	}
	if len(events) == 0 {
		return errInvalid("publish", "no events")
	}
	return nil
}

func newAppendParams(id StreamID, n int32, events []Event) *store.AppendParams {
	p := &store.AppendParams{Partition: PartitionOf(id, n), Records: make([]store.NewRecord, len(events))}
	for i, e := range events {
		p.Records[i] = store.NewRecord{Namespace: id.Namespace, Key: id.Key, Properties: e.Properties, Payload: e.Body}
	}
	return p
}

func span(r store.AppendResult) []int64 {
	out := make([]int64, 0, r.Last-r.First+1)
	for pos := r.First; pos <= r.Last; pos++ {
		out = append(out, pos)
	}
	return out
}

// StartPosition says where a new subscription starts.
type StartPosition struct {
	kind int
	at   int64
}

const (
	startNow = iota
	startBeginning
	startAt
)

// FromNow starts a subscription with the events published after it is
// created.
func FromNow() StartPosition { return StartPosition{kind: startNow} }

// FromBeginning starts a subscription with the oldest events retention
// kept.
func FromBeginning() StartPosition { return StartPosition{kind: startBeginning} }

// FromPosition starts a subscription at a position of its stream's
// partition: it receives the stream's events at or after it. ErrTrimmed
// if retention deleted records from there on.
func FromPosition(position int64) StartPosition { return StartPosition{kind: startAt, at: position} }

// Kind is "now", "beginning" or "at" (FromPosition's).
func (s StartPosition) Kind() string {
	switch s.kind {
	case startBeginning:
		return "beginning"
	case startAt:
		return "at"
	}
	return "now"
}

// Position is the position FromPosition names (0 for the others).
func (s StartPosition) Position() int64 { return s.at }

// StreamSubscription is a stored subscription. Stream.Key is empty for
// a consumer's subscription to a whole namespace.
type StreamSubscription struct {
	ID       string
	Consumer string
	Stream   StreamID
	// Partition is the stream's partition (-1 for a whole namespace).
	Partition int32
	// Fault says why the subscription stopped ("" while it runs).
	Fault     string
	FaultedAt time.Time
	CreatedAt time.Time
	// Repositions counts the subscription's repositions
	// (RepositionStreamSubscription); LastReposition is the last one
	// (nil: never repositioned).
	Repositions    int64
	LastReposition *StreamReposition
}

// StreamReposition is a recorded reposition of a subscription.
type StreamReposition struct {
	// To is where it moved: "position", "oldest" (the oldest record
	// retention kept) or "head" (past every record published then).
	To string
	// By names who repositioned it (RepositionOptions.By; the server
	// records its API key's name); At is when, by the database's clock.
	By string
	At time.Time
	// From and To hold, per partition moved, the subscription's position
	// before and after: it is done with every record at or below it, so
	// the next event it gets is the first of its streams after it.
	FromPositions map[int32]int64
	ToPositions   map[int32]int64
}

func repositionOf(r *store.Reposition) *StreamReposition {
	if r == nil {
		return nil
	}
	return &StreamReposition{To: r.Kind.String(), By: r.By, At: r.At, FromPositions: r.From, ToPositions: r.To}
}

func subscriptionOf(s store.Subscription) StreamSubscription {
	return StreamSubscription{ID: s.ID, Consumer: s.Consumer, Stream: StreamID{s.Namespace, s.Key},
		Partition: s.Partition, Fault: s.Fault, FaultedAt: s.FaultedAt, CreatedAt: s.CreatedAt,
		Repositions: s.Repositions, LastReposition: repositionOf(s.LastReposition)}
}

// Subscribe subscribes a consumer to one stream: processors that handle
// the consumer (StreamProcessor.Handle) deliver the stream's events to
// it, from the start position on, each event at least once and in order.
// The subscription is stored: it survives restarts and resumes from its
// own progress until Unsubscribe. A consumer may hold several
// subscriptions to one stream; each has its own ID.
//
// With an empty key, Subscribe stores the consumer's subscription to the
// whole namespace: the one a processor stores when it starts with the
// consumer's ConsumerOptions.Namespace, made ahead of it (so that events
// published before the first processor starts are the consumer's too),
// from now or from the beginning (a position belongs to one partition:
// FromPosition is refused). A consumer has one subscription to a
// namespace: Subscribe fails with ErrEntityExists when it is stored.
func (c *Client) Subscribe(ctx context.Context, id StreamID, consumer string, from StartPosition) (StreamSubscription, error) {
	if id.Key == "" {
		return c.subscribeNamespace(ctx, id.Namespace, consumer, from)
	}
	if err := id.validate(); err != nil {
		return StreamSubscription{}, fmt.Errorf("sluice: subscribe: %w", err)
	}
	if err := store.ValidateName("consumer", consumer); err != nil {
		return StreamSubscription{}, fmt.Errorf("sluice: subscribe: %w", err)
	}
	n, err := c.streamPartitions(ctx)
	if err != nil {
		return StreamSubscription{}, err
	}
	part := PartitionOf(id, n)
	if from.kind == startAt && from.at < 1 {
		return StreamSubscription{}, errInvalid("subscribe", "position %d: positions start at 1", from.at)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	sub := store.NewSubscription{ID: hex.EncodeToString(b), Consumer: consumer, Namespace: id.Namespace, Key: id.Key,
		Partition: part}
	if err := c.storeSubscription(ctx, &sub, []int32{part}, from); err != nil {
		return StreamSubscription{}, fmt.Errorf("sluice: subscribe: %w", err)
	}
	c.subscriptionsChanged()
	return StreamSubscription{ID: sub.ID, Consumer: consumer, Stream: id, Partition: part, CreatedAt: time.Now()}, nil
}

// subscribeNamespace stores a consumer's subscription to a whole
// namespace, from each partition's head (or oldest record) on.
func (c *Client) subscribeNamespace(ctx context.Context, namespace, consumer string, from StartPosition) (StreamSubscription, error) {
	if err := store.ValidateName("namespace", namespace); err != nil {
		return StreamSubscription{}, fmt.Errorf("sluice: subscribe: %w", err)
	}
	if err := store.ValidateName("consumer", consumer); err != nil {
		return StreamSubscription{}, fmt.Errorf("sluice: subscribe: %w", err)
	}
	if from.kind == startAt {
		return StreamSubscription{}, errInvalid("subscribe", "a subscription to namespace %q starts from now or from the beginning: "+
			"a position belongs to one partition", namespace)
	}
	n, err := c.streamPartitions(ctx)
	if err != nil {
		return StreamSubscription{}, err
	}
	sub := store.NewSubscription{ID: stream.ImplicitID(namespace, consumer), Consumer: consumer, Namespace: namespace,
		Partition: store.NoPartition}
	parts := make([]int32, n)
	for p := range parts {
		parts[p] = int32(p)
	}
	if err := c.storeSubscription(ctx, &sub, parts, from); err != nil {
		return StreamSubscription{}, fmt.Errorf("sluice: subscribe: %w", err)
	}
	c.subscriptionsChanged()
	return StreamSubscription{ID: sub.ID, Consumer: consumer, Stream: StreamID{Namespace: namespace}, Partition: store.NoPartition,
		CreatedAt: time.Now()}, nil
}

// storeSubscription stores sub, starting on each of parts where from
// says: at its position, at the partition's head (now) or at its oldest
// record (the beginning).
func (c *Client) storeSubscription(ctx context.Context, sub *store.NewSubscription, parts []int32, from StartPosition) error {
	for attempt := 0; ; attempt++ {
		sub.Start = make(map[int32]int64, len(parts))
		for _, p := range parts {
			if from.kind == startAt {
				sub.Start[p] = from.at - 1
				continue
			}
			info, err := c.st.PartitionInfo(ctx, p)
			if err != nil {
				return err
			}
			sub.Start[p] = info.Head
			if from.kind == startBeginning {
				sub.Start[p] = info.Trimmed
			}
		}
		err := c.st.CreateSubscription(ctx, sub)
		// A trim between reading the oldest positions and taking the
		// retention lock: read them again.
		if err == nil || from.kind != startBeginning || !errors.Is(err, ErrTrimmed) || attempt == 3 {
			return err
		}
	}
}

// Unsubscribe deletes a subscription, with its progress and parked
// events: delivery stops at once in this process, and within a refresh
// interval in others. A consumer's subscription to a whole namespace is
// stored again when a processor handling it starts.
func (c *Client) Unsubscribe(ctx context.Context, subscription string) error {
	if err := c.st.DeleteSubscription(ctx, subscription); err != nil {
		return err
	}
	c.subscriptionsChanged()
	return nil
}

// StreamSubscriptions lists the subscriptions that receive a stream's
// events: those to the stream and those to its whole namespace, in the
// order ListStreamSubscriptions lists them, all of them (a page at a
// time).
func (c *Client) StreamSubscriptions(ctx context.Context, id StreamID) ([]StreamSubscription, error) {
	var out []StreamSubscription
	opts := StreamSubscriptionListOptions{Max: c.limits.MaxBatch}
	for {
		page, err := c.ListStreamSubscriptions(ctx, id, &opts)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < opts.Max {
			return out, nil
		}
		opts.AfterConsumer, opts.AfterID = page[len(page)-1].Consumer, page[len(page)-1].ID
	}
}

// DefaultStreamSubscriptionPage is the page ListStreamSubscriptions lists
// when its options set no Max.
const DefaultStreamSubscriptionPage = 100

// StreamSubscriptionListOptions select a page of the subscriptions that
// receive a stream's events (ListStreamSubscriptions). Consumer names are
// compared case-insensitively here, as a server's grants compare them.
type StreamSubscriptionListOptions struct {
	// Consumer, when set, lists only the subscriptions of the consumer of
	// that name; ConsumerPrefix, of the consumers whose names start with
	// it. Set one or neither.
	Consumer, ConsumerPrefix string
	// AfterConsumer and AfterID are the consumer and id of the last
	// subscription of the previous page ("" for the first page).
	AfterConsumer, AfterID string
	// Max bounds the page: 1 to the backend's largest batch (1,000 by
	// default); 0 means DefaultStreamSubscriptionPage.
	Max int
}

// ListStreamSubscriptions lists a page of the subscriptions that receive
// a stream's events, those to the stream and those to its whole
// namespace, in the order of their consumers' names in lower case, then
// of their ids; a page shorter than Max is the last. It reads the
// subscriptions of the page, not those of other consumers or other
// streams. nil opts list the first page of every consumer's.
func (c *Client) ListStreamSubscriptions(ctx context.Context, id StreamID, opts *StreamSubscriptionListOptions) ([]StreamSubscription, error) {
	if err := id.validate(); err != nil {
		return nil, fmt.Errorf("sluice: list stream subscriptions: %w", err)
	}
	var o StreamSubscriptionListOptions
	if opts != nil {
		o = *opts
	}
	if o.Consumer != "" && o.ConsumerPrefix != "" {
		return nil, errInvalid("list stream subscriptions", "a consumer and a consumer prefix: set one or neither")
	}
	if o.Max == 0 {
		o.Max = min(DefaultStreamSubscriptionPage, c.limits.MaxBatch)
	}
	p := store.ListSubscriptionsParams{Namespace: id.Namespace, Consumer: o.Consumer, AfterConsumer: o.AfterConsumer,
		AfterID: o.AfterID, Max: o.Max}
	if o.Consumer == "" {
		p.Consumer, p.Prefix = o.ConsumerPrefix, true
	}
	// The stream's and the namespace's, each in order: their first Max,
	// merged.
	p.Key = id.Key
	own, err := c.st.ListSubscriptions(ctx, &p)
	if err != nil {
		return nil, err
	}
	p.Key = ""
	whole, err := c.st.ListSubscriptions(ctx, &p)
	if err != nil {
		return nil, err
	}
	merged := append(own, whole...)
	slices.SortFunc(merged, func(a, b store.Subscription) int {
		return cmp.Or(strings.Compare(strings.ToLower(a.Consumer), strings.ToLower(b.Consumer)), strings.Compare(a.ID, b.ID))
	})
	out := make([]StreamSubscription, 0, min(len(merged), o.Max))
	for _, s := range merged[:min(len(merged), o.Max)] {
		out = append(out, subscriptionOf(s))
	}
	return out, nil
}

// GetStreamSubscription returns a subscription, with its fault if it
// stopped. ErrSubscriptionNotFound if absent.
func (c *Client) GetStreamSubscription(ctx context.Context, subscription string) (StreamSubscription, error) {
	subs, err := c.st.Subscriptions(ctx, &store.SubscriptionFilter{ID: subscription})
	if err != nil {
		return StreamSubscription{}, err
	}
	if len(subs) == 0 {
		return StreamSubscription{}, fmt.Errorf("sluice: subscription %q: %w", subscription, ErrSubscriptionNotFound)
	}
	return subscriptionOf(subs[0]), nil
}

// ClearFault resumes a faulted subscription: the event that faulted it is
// delivered again, then the ones after it.
func (c *Client) ClearFault(ctx context.Context, subscription string) error {
	if err := c.st.FaultSubscription(ctx, &store.FaultParams{ID: subscription}); err != nil {
		return err
	}
	c.subscriptionsChanged()
	return nil
}

// RepositionOptions qualify a reposition.
type RepositionOptions struct {
	// Partition is the partition a FromPosition reposition of a namespace
	// subscription moves it on (the others stay); a subscription to one
	// stream moves on its stream's partition, whatever this says.
	Partition int32
	// By names who repositions, for the record (at most 256 bytes).
	By string
}

// RepositionStreamSubscription moves a subscription, explicit or a
// consumer's to a whole namespace, to a new position and records it
// (StreamSubscription.LastReposition): to the head (FromNow: past every
// event published so far), to the oldest event retention kept
// (FromBeginning), or to a position of its partition (FromPosition: the
// next event it gets is the first of its streams at or after it). It
// clears the subscription's fault: this is how a subscription leaves a
// gap retention made. The processor pulling the partition picks the new
// position up at its next listing of subscriptions (at once in this
// process): it cancels the deliveries in progress of the subscription,
// and delivers nothing from the old position afterwards. ErrTrimmed if
// retention deleted events after the new position; ErrInvalidArgument
// past the head or for a position below 1; ErrSubscriptionNotFound if
// the subscription is absent.
func (c *Client) RepositionStreamSubscription(ctx context.Context, subscription string, to StartPosition, opts *RepositionOptions) (StreamReposition, error) {
	var o RepositionOptions
	if opts != nil {
		o = *opts
	}
	p := store.RepositionParams{ID: subscription, By: o.By}
	switch to.kind {
	case startNow:
		p.Kind = store.RepositionToHead
	case startBeginning:
		p.Kind = store.RepositionToOldest
	default:
		p.Kind, p.Position = store.RepositionToPosition, to.at
		sub, err := c.GetStreamSubscription(ctx, subscription)
		if err != nil {
			return StreamReposition{}, fmt.Errorf("sluice: reposition: %w", err)
		}
		p.Partition = sub.Partition
		if sub.Stream.Key == "" {
			p.Partition = o.Partition
		}
	}
	r, err := c.st.RepositionSubscription(ctx, &p)
	if err != nil {
		return StreamReposition{}, err
	}
	c.subscriptionsChanged()
	return *repositionOf(&r), nil
}

// ParkedEvent is an event a subscription gave up on.
type ParkedEvent struct {
	StreamEvent
	// Error is the last delivery's error; Attempts counts deliveries.
	Error    string
	Attempts int
	ParkedAt time.Time
}

// ParkedEvents lists up to max of a subscription's parked events,
// oldest first (max from 1 to Limits.MaxBatch).
// StreamProcessor.Replay delivers them again. ErrSubscriptionNotFound
// if the subscription is absent.
func (c *Client) ParkedEvents(ctx context.Context, subscription string, max int) ([]ParkedEvent, error) {
	if max < 1 || max > c.limits.MaxBatch {
		return nil, fmt.Errorf("sluice: parked events: max %d: want 1 to %d: %w", max, c.limits.MaxBatch, ErrInvalidArgument)
	}
	evs, err := c.st.Parked(ctx, &store.ParkedParams{Subscription: subscription, Max: max})
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		// None parked, or no such subscription.
		if _, err := c.GetStreamSubscription(ctx, subscription); err != nil {
			return nil, err
		}
	}
	out := make([]ParkedEvent, len(evs))
	for i, e := range evs {
		out[i] = ParkedEvent{StreamEvent: stream.EventOf(&e.Record, e.Partition, subscription),
			Error: e.Error, Attempts: e.Attempts, ParkedAt: e.ParkedAt}
	}
	return out, nil
}

// StreamRetention says how long a namespace's events stay once every
// subscription is done with them. The zero value deletes them then.
type StreamRetention = store.Retention

// SetStreamRetention sets a namespace's retention.
func (c *Client) SetStreamRetention(ctx context.Context, namespace string, r StreamRetention) error {
	return c.st.SetRetention(ctx, namespace, r)
}

// ConsumerOptions configure how a processor delivers to a consumer. Zero
// values take the defaults.
type ConsumerOptions struct {
	// Namespace, when set, subscribes the consumer to every stream of the
	// namespace (an implicit subscription, stored when the processor
	// starts, from the events published after that the first time).
	Namespace string
	// MaxConcurrency bounds the streams handled at once, per subscription
	// and partition (default 8). One stream's events are handled one at a
	// time, in order.
	MaxConcurrency int
	// DeliveryTimeout bounds one delivery (default 1 min). It and the
	// backoffs below refuse negative values (ErrInvalidArgument).
	DeliveryTimeout time.Duration
	// MaxAttempts bounds the deliveries of one event (default 5).
	MaxAttempts int
	// RetryBackoff is the wait after a failed delivery, doubled each time
	// up to MaxRetryBackoff (defaults 100 ms and 10 s).
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// OnFailure applies once an event's attempts are used up (default
	// ParkOnFailure).
	OnFailure FailurePolicy
}

// StreamProcessorOptions configure a stream processor. Zero values take
// the defaults.
type StreamProcessorOptions struct {
	// Name names this node (default: the host's name). Its id in the
	// cluster is the name and a random suffix, new at each start, so that
	// a restarted process is a new node.
	Name string
	// Address is where operators reach this node, shown in ClusterStatus
	// (default none).
	Address string
	// Group names the processors that share the partitions (default "").
	// Processors of one group must handle the same consumers: each
	// partition goes to one processor of the group, which delivers to
	// every consumer it handles. Processors that handle other consumers
	// form a group of their own (each group pulls every partition, for
	// its consumers). A consumer is handled by one group at a time: Start
	// fails with ErrConsumerConflict while live processors of another
	// group handle one of its consumers.
	Group string
	// HeartbeatInterval is how often the processor heartbeats, renews its
	// partition leases and rebalances (default 1 s); FailureTimeout how
	// long a node may stay silent before it counts as gone, and so how
	// long a lease lasts unless renewed (default 5 s, and at least three
	// heartbeat intervals). Processors of one tenant on PostgreSQL or
	// MariaDB share the partitions evenly; on SQLite one processor at a
	// time runs, and Start fails with ErrSingleNode beside a live one.
	HeartbeatInterval time.Duration
	FailureTimeout    time.Duration
	// PollInterval is the wait between reads of a partition with records;
	// reads back off to IdlePollInterval while none come (defaults 100 ms
	// and 1 s). A publish in this process, or on PostgreSQL anywhere,
	// wakes the reader at once.
	PollInterval     time.Duration
	IdlePollInterval time.Duration
	// ReadBatch bounds one read of a partition (default 256).
	ReadBatch int
	// CacheRecords and CacheBytes bound each partition's cache (defaults
	// 4,096 records and 16 MiB), whatever its windows hold.
	CacheRecords int
	CacheBytes   int64
	// CacheWindows bounds the resident windows of each partition's cache
	// (default 4, at most MaxCacheWindows; 1 keeps one contiguous
	// window). Subscriptions near each other in a partition read one
	// window. When one lags (its handler is slow or stuck) and pins the
	// oldest record of a full window, it goes on in a lagging window of
	// its own, read again from the database as it needs more, and the
	// others carry on in the head window; a subscription that starts or
	// resumes behind the cache (FromBeginning, FromPosition, ClearFault,
	// a reposition, a restart) reads a window of its own and holds up no
	// one. The windows merge once they meet. Nothing is dropped either
	// way: the partition's checkpoint stays at the lagging subscription,
	// and retention with it.
	//
	// With more than one window, a subscription examines at most
	// CacheRecords/(2*(CacheWindows-1)) records past its oldest event in
	// delivery; with one, as far as the cache holds (and a lagging
	// subscription that pins the full cache pauses reading for everyone
	// in its partition). Backends without cheap reads after any position
	// keep one window; SQLite, PostgreSQL and MariaDB have them.
	CacheWindows int
	// WindowLimit says what happens when a subscription needs a window
	// and the cache keeps CacheWindows already (default WindowLimitShare).
	// It has no effect with one window, which everyone shares.
	WindowLimit WindowLimitPolicy
	// LaggingRate bounds the events a second that lagging windows start
	// delivering across the processor (default 10,000; UnboundedLagging
	// for no bound; a negative rate is refused). A lagging window is one
	// behind its partition's head window: a replay, a rewind, a
	// subscription released after lagging. The bound holds only while a
	// head window has started a delivery within the last second, so that
	// a replay takes a bounded share of the process and live
	// subscriptions keep their latency; with no live deliveries it goes
	// as fast as its handlers. When the bound has no room, each lagging
	// subscription may still start twice as many deliveries as its
	// partition took in records (measured every 250 ms), so that it always
	// gains on the head, however high the inflow and however many lagging
	// subscriptions share the bound. A replay of N events beside live traffic at R events a second
	// reaches the head after about N/(max(LaggingRate, 2R)-R) seconds.
	// StreamPartitionStats.LaggingHeld counts the deliveries it held back.
	LaggingRate int
	// ProgressInterval is how often progress is stored (default 200 ms).
	ProgressInterval time.Duration
	// RefreshInterval is how often subscriptions made by other processes
	// are picked up (default 1 s).
	//
	// A negative duration among these options is refused, and so is a
	// HeartbeatInterval or FailureTimeout over 24 hours: Start fails with
	// ErrInvalidArgument.
	RefreshInterval time.Duration
	// Middleware wraps every consumer's handler, the first outermost:
	// each sees every delivery attempt (see StreamMiddleware). The
	// processor runs the whole chain inside RecoverStream, so that a
	// panic fails the delivery and never ends the process.
	Middleware []StreamMiddleware
}

// StreamProcessor pulls stream partitions and delivers their events to
// the consumers registered on it. On one node it pulls every partition.
type StreamProcessor struct {
	c         *Client
	id        string
	node      *stream.Node
	balancer  *stream.Leases
	consumers []string
	// middleware wraps each consumer's handler.
	middleware []StreamMiddleware
	// invalid is why the options are refused: Start fails with it.
	invalid error
}

// StreamPartitionStats describe a partition a processor pulls.
type StreamPartitionStats = stream.PartitionStats

// NewStreamProcessor returns a processor; register consumers with
// Handle, then Start it.
func (c *Client) NewStreamProcessor(opts *StreamProcessorOptions) *StreamProcessor {
	var o StreamProcessorOptions
	if opts != nil {
		o = *opts
	}
	name := o.Name
	if name == "" {
		name, _ = os.Hostname()
	}
	id := nodeID(name)
	windows := o.CacheWindows
	if !c.positionedReads {
		windows = 1 // each window would read the log from its own position
	}
	bal := &stream.Leases{
		Store: c.st, Node: id, Group: o.Group, Address: o.Address, Alone: !c.sharedStreams,
		HeartbeatInterval: o.HeartbeatInterval, FailureTimeout: o.FailureTimeout,
		Logger: c.log.With("node", id),
	}
	node := stream.NewNode(stream.Config{
		Store: c.st, Partitions: c.partitions, Logger: c.log, Balancer: bal, Group: o.Group,
		PollInterval: o.PollInterval, IdlePollInterval: o.IdlePollInterval, ReadBatch: o.ReadBatch,
		CacheRecords: o.CacheRecords, CacheBytes: o.CacheBytes, CacheWindows: windows, WindowLimit: o.WindowLimit,
		ProgressInterval: o.ProgressInterval, RefreshInterval: o.RefreshInterval, LaggingRate: o.LaggingRate,
	})
	p := &StreamProcessor{c: c, id: id, node: node, balancer: bal, middleware: o.Middleware}
	if err := checkDurations(namedDuration{"heartbeat interval", o.HeartbeatInterval}, namedDuration{"failure timeout", o.FailureTimeout},
		namedDuration{"poll interval", o.PollInterval}, namedDuration{"idle poll interval", o.IdlePollInterval},
		namedDuration{"progress interval", o.ProgressInterval}, namedDuration{"refresh interval", o.RefreshInterval}); err != nil {
		p.invalid = fmt.Errorf("sluice: stream processor: %w", err)
	}
	if o.CacheWindows < 0 || o.CacheWindows > MaxCacheWindows {
		p.invalid = fmt.Errorf("sluice: stream processor: cache windows %d: from 1 to %d (0 for the default, %d): %w",
			o.CacheWindows, MaxCacheWindows, stream.DefaultCacheWindows, ErrInvalidArgument)
	}
	if o.LaggingRate < 0 {
		p.invalid = fmt.Errorf("sluice: stream processor: lagging rate %d events/s: at least 1 (0 for the default, %d; UnboundedLagging for none): %w",
			o.LaggingRate, stream.DefaultLaggingRate, ErrInvalidArgument)
	}
	if o.WindowLimit != WindowLimitShare && o.WindowLimit != WindowLimitFault {
		p.invalid = fmt.Errorf("sluice: stream processor: window limit policy %d: use WindowLimitShare or WindowLimitFault: %w",
			o.WindowLimit, ErrInvalidArgument)
	}
	if o.HeartbeatInterval > maxLeaseTiming || o.FailureTimeout > maxLeaseTiming {
		p.invalid = fmt.Errorf("sluice: stream processor: heartbeat interval %v and failure timeout %v: at most %v each: %w",
			o.HeartbeatInterval, o.FailureTimeout, maxLeaseTiming, ErrInvalidArgument)
	}
	return p
}

// maxLeaseTiming bounds HeartbeatInterval and FailureTimeout: the
// balancer adds and multiplies them, and a node silent for longer is gone
// whatever the setting.
const maxLeaseTiming = 24 * time.Hour

// NodeID is the processor's id in the cluster (its name and a random
// suffix), as ClusterStatus lists it.
func (p *StreamProcessor) NodeID() string { return p.id }

// nodeID is a node's id in the cluster: its name, made a valid name, and
// a random suffix.
func nodeID(name string) string {
	clean := strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_", r)) {
			return r
		}
		return '-'
	}, name)
	clean = strings.Trim(clean, ".-_")
	if len(clean) > 200 {
		clean = clean[:200]
	}
	if clean == "" {
		clean = "node"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return clean + "-" + hex.EncodeToString(b)
}

// Handle registers a consumer and its handler, before Start. The handler
// runs inside the processor's middleware (StreamProcessorOptions.Middleware).
func (p *StreamProcessor) Handle(consumer string, h StreamHandler, opts *ConsumerOptions) error {
	var o ConsumerOptions
	if opts != nil {
		o = *opts
	}
	if err := checkDurations(namedDuration{"delivery timeout", o.DeliveryTimeout}, namedDuration{"retry backoff", o.RetryBackoff},
		namedDuration{"max retry backoff", o.MaxRetryBackoff}); err != nil {
		return fmt.Errorf("sluice: handle %q: %w", consumer, err)
	}
	if h != nil {
		var err error
		if h, err = WrapStream(h, p.middleware); err != nil {
			return fmt.Errorf("sluice: handle %q: %w", consumer, err)
		}
	}
	err := p.node.Register(stream.Consumer{Name: consumer, Handler: h, Namespace: o.Namespace,
		MaxConcurrency: o.MaxConcurrency, DeliveryTimeout: o.DeliveryTimeout, MaxAttempts: o.MaxAttempts,
		RetryBackoff: o.RetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff, OnFailure: o.OnFailure})
	if err == nil {
		p.consumers = append(p.consumers, consumer)
	}
	return err
}

// Start checks the partition count against the database's
// (ErrPartitionCount) and that no other group handles its consumers
// (ErrConsumerConflict), stores the consumers' namespace subscriptions,
// and starts pulling.
func (p *StreamProcessor) Start(ctx context.Context) error {
	if p.invalid != nil {
		return p.invalid
	}
	p.balancer.Consumers = slices.Sorted(slices.Values(p.consumers))
	if !p.c.beginStart() {
		return fmt.Errorf("sluice: start stream processor: the client is closed: %w", ErrClosed)
	}
	defer p.c.starting.Done()
	// A Close cuts the start short (on SQLite it may wait seconds for
	// another node to fall silent).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.c.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := p.node.Start(ctx); err != nil {
		if isClosed(p.c.closing) {
			return fmt.Errorf("sluice: start stream processor: the client closed: %w", ErrClosed)
		}
		return err
	}
	p.c.addProcessor(p.node)
	return nil
}

// Stop stops pulling: deliveries in progress finish until ctx ends, then
// are cancelled (and delivered again later); final progress is stored.
func (p *StreamProcessor) Stop(ctx context.Context) error {
	// Recorded until it has stopped: a Close meanwhile waits for it.
	defer p.c.removeProcessor(p.node)
	return p.node.Stop(ctx)
}

// Replay delivers up to max of a subscription's parked events again,
// oldest first, through its consumer on this processor; each delivered
// one leaves the parked events. A replayed event goes through its
// stream's ordered delivery on this processor: as the stream's next
// event, once the stream's delivery in progress has ended and before its
// live events still waiting, so that one event of a stream at a time
// still holds. Replay stops at the first that fails again (which stays
// parked, with its new error) and returns how many were delivered.
// Events of partitions another processor pulls stay parked: Replay
// delivers the others, then fails with ErrPartitionNotPulled (replay on
// each processor of the group to deliver them all).
func (p *StreamProcessor) Replay(ctx context.Context, subscription string, max int) (int, error) {
	return p.node.Replay(ctx, subscription, max)
}

// Stats describe the partitions the processor pulls.
func (p *StreamProcessor) Stats() []StreamPartitionStats { return p.node.Stats() }

// beginStart counts a processor's Start, which Close waits for; it
// reports false once the client is closed.
func (c *Client) beginStart() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.starting.Add(1) // under mu, before Close sets closed and waits
	return true
}

// addProcessor records a started processor's node for Close to stop.
func (c *Client) addProcessor(n *stream.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.processors[n] = struct{}{}
}

func (c *Client) removeProcessor(n *stream.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.processors, n)
}

// subscriptionsChanged tells this client's processors at once.
func (c *Client) subscriptionsChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := range c.processors {
		n.SubscriptionsChanged()
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
