package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/sluicetype"
)

// StreamStore holds what the stream runtime keeps beside the partition
// logs: the partition count, each partition's owner with its epoch and
// checkpoint, subscriptions with their progress, parked events and
// retention.
type StreamStore interface {
	// StreamPartitions records n as the tenant's number of stream
	// partitions when none is recorded yet, and returns the recorded one.
	StreamPartitions(ctx context.Context, n int32) (int32, error)

	// CreateSubscription stores a subscription and its starting progress
	// on every partition it covers. In the same transaction it checks that
	// retention kept every record after each start (ErrTrimmed
	// otherwise), and takes each partition's checkpoint back to the start
	// if it was past it; from then on retention keeps the records until
	// the subscription's progress passes them. ErrEntityExists if the id
	// is taken.
	CreateSubscription(ctx context.Context, p *NewSubscription) error
	// DeleteSubscription deletes a subscription with its progress and
	// parked events. ErrSubscriptionNotFound if absent.
	DeleteSubscription(ctx context.Context, id string) error
	// Subscriptions lists subscriptions in id order, as p selects them.
	Subscriptions(ctx context.Context, p *SubscriptionFilter) ([]Subscription, error)
	// ListSubscriptions lists a page of the subscriptions to one stream,
	// or to a whole namespace, by consumer, in the order of their
	// consumers' names in lower case, then of their ids (byte order). It
	// reads the rows of the page (and of the consumer the page starts
	// after), not those of other consumers.
	ListSubscriptions(ctx context.Context, p *ListSubscriptionsParams) ([]Subscription, error)
	// FaultSubscription records that a subscription stopped, and why; an
	// empty reason clears the fault. ErrSubscriptionNotFound if absent;
	// ErrFenced, and nothing written, if p.Fence names an epoch that has
	// moved on.
	FaultSubscription(ctx context.Context, p *FaultParams) error
	// RepositionSubscription moves a subscription's stored position, on
	// the partitions p names, to a position, the oldest record retention
	// kept or the head, clears its fault, and records the reposition on
	// the subscription (counted in Repositions, described in
	// LastReposition), in one transaction under the partitions' retention
	// locks. A save of progress that does not know of the reposition
	// (ProgressParams.Repositions) no longer writes the subscription's
	// position. ErrTrimmed (and nothing written) if retention deleted
	// records after the new position; ErrSubscriptionNotFound if absent.
	RepositionSubscription(ctx context.Context, p *RepositionParams) (Reposition, error)

	// Progress returns a partition's checkpoint and the stored position
	// of each subscription on it, each with the subscription's count of
	// repositions as of the same moment (one read of both).
	Progress(ctx context.Context, partition int32) (PartitionProgress, error)
	// SaveProgress stores, in one transaction, the progress of several
	// partitions: subscriptions' positions and the checkpoint of each,
	// then trims up to Trim of its consumed records as
	// Trimmer.TrimConsumed does. A partition whose epoch has moved on is
	// skipped, with ErrFenced in its result, and nothing of it is
	// written. The checkpoint never moves back on its own, and never past
	// a stored position (of a subscription created since the owner
	// computed it). An error of the call itself leaves nothing written.
	SaveProgress(ctx context.Context, ps []ProgressParams) ([]ProgressResult, error)

	// Park stores events a subscription gave up on, with the error.
	// ErrSubscriptionNotFound if the subscription is gone; ErrFenced, and
	// nothing stored, if p.Fence names an epoch that has moved on.
	Park(ctx context.Context, p *ParkParams) error
	// Parked lists a subscription's parked events in (partition,
	// position) order, after p.After.
	Parked(ctx context.Context, p *ParkedParams) ([]ParkedEvent, error)
	// Unpark deletes parked events of a subscription. ErrMessageNotFound
	// (and nothing deleted) if any is not parked.
	Unpark(ctx context.Context, p *UnparkParams) error

	// SetRetention stores how long a namespace's consumed records are
	// kept; the zero Retention keeps them until consumed.
	SetRetention(ctx context.Context, namespace string, r Retention) error
}

// Trimmer is a Store that trims a partition's consumed records on
// demand. The owner of a partition trims it as it saves its progress
// (ProgressParams.Trim), so nothing in sluice needs it: the conformance
// suite calls it to test retention apart from progress, and the bench to
// clean up. The backends of this module implement it.
type Trimmer interface {
	// TrimConsumed deletes, in position order, up to p.Max records of a
	// partition at or below its checkpoint that no subscription's stored
	// progress still needs and that their namespace's retention lets go;
	// it returns how many it deleted.
	TrimConsumed(ctx context.Context, p *TrimConsumedParams) (int64, error)
}

// TxAppender is a Store whose appends can join a transaction the caller
// opened on the same database: the records commit, or vanish, with the
// caller's own writes. The partition's head row stays locked until the
// caller commits, so keep such transactions short.
type TxAppender interface {
	AppendTx(ctx context.Context, tx Tx, p *AppendParams) (AppendResult, error)
}

// PartitionProgress is what is stored of a partition's consumption.
type PartitionProgress struct {
	// Checkpoint is the position through which every subscription is
	// done with the partition's records.
	Checkpoint int64
	// Positions holds each subscription's position on the partition: it
	// is done with every record at or below it.
	Positions map[string]int64
	// Repositions holds, for each subscription of Positions, its count of
	// repositions, read with its position in one snapshot: every
	// reposition counted is in the position (if it moved the subscription
	// on this partition), and no other is. It is the count to save the
	// subscription's progress under (ProgressParams.Repositions). Read
	// apart, a reposition committing in between would show its position
	// under the count before it.
	Repositions map[string]int64
}

// Fence makes a write apply only while a partition's lease is under
// Epoch: a node that lost the lease (paused past it, say) writes nothing
// once another node acquired the partition, and gets ErrFenced. The
// write holds the lease row until it commits, so no acquisition lands in
// between.
type Fence struct {
	// Group is the group whose lease fences the write.
	Group     string
	Partition int32
	Epoch     int64
}

// FaultParams records or clears a subscription's fault.
type FaultParams struct {
	ID string
	// Reason says why the subscription stopped; "" clears the fault.
	Reason string
	// Fence, when set, writes the fault only under that lease: the
	// partition's owner records the faults it finds.
	Fence *Fence
}

// NoPartition is the partition of a subscription to a whole namespace.
const NoPartition int32 = -1

// NewSubscription creates a subscription.
type NewSubscription struct {
	// ID is the subscription's handle.
	ID       string
	Consumer string
	// Namespace and Key select the events; an empty Key selects every
	// stream of the namespace.
	Namespace string
	Key       string
	// Partition is the stream's partition, or NoPartition with an empty
	// Key.
	Partition int32
	// Start holds the starting position on each partition the
	// subscription covers: one entry for a stream, every partition for a
	// namespace.
	Start map[int32]int64
}

// Subscription is a stored subscription.
type Subscription struct {
	ID        string
	Consumer  string
	Namespace string
	Key       string
	Partition int32
	// Fault says why the subscription stopped ("" while it runs).
	Fault     string
	FaultedAt time.Time
	CreatedAt time.Time
	// Repositions counts the repositions of the subscription; its last
	// is LastReposition (nil: never repositioned).
	Repositions    int64
	LastReposition *Reposition
}

// RepositionKind says where a reposition moves a subscription.
type RepositionKind int

const (
	// RepositionToPosition moves it to a position of one partition: the
	// next record it gets is the first of its streams at or after it.
	RepositionToPosition RepositionKind = iota + 1
	// RepositionToOldest moves it to the oldest record retention kept.
	RepositionToOldest
	// RepositionToHead moves it past every record appended so far.
	RepositionToHead
)

func (k RepositionKind) String() string {
	switch k {
	case RepositionToPosition:
		return "position"
	case RepositionToOldest:
		return "oldest"
	case RepositionToHead:
		return "head"
	}
	return fmt.Sprintf("RepositionKind(%d)", int(k))
}

// RepositionParams repositions a subscription.
type RepositionParams struct {
	ID   string
	Kind RepositionKind
	// Partition and Position, for RepositionToPosition: the partition
	// (the stream's, for a subscription to one stream) and the position
	// of the next record to deliver (at least 1, at most the head + 1).
	// A namespace subscription moves on that partition only; to the
	// oldest record or the head, every subscription moves on every
	// partition it covers.
	Partition int32
	Position  int64
	// By names who repositions (an operator, an API key), for the record.
	By string
}

// Reposition is a recorded reposition of a subscription.
type Reposition struct {
	Kind RepositionKind
	By   string
	At   time.Time
	// From and To hold, per partition moved, the stored position before
	// and after: the subscription is done with every record at or below.
	From map[int32]int64
	To   map[int32]int64
}

// MaxRepositionByLen bounds RepositionParams.By.
const MaxRepositionByLen = 256

// Validate checks a reposition.
func (p *RepositionParams) Validate() error {
	if err := ValidateName("subscription id", p.ID); err != nil {
		return err
	}
	switch p.Kind {
	case RepositionToPosition:
		if err := ValidatePartition(p.Partition); err != nil {
			return err
		}
		if p.Position < 1 {
			return invalid("reposition to position %d: positions start at 1", p.Position)
		}
	case RepositionToOldest, RepositionToHead:
	default:
		return invalid("reposition of kind %d: want a position, the oldest record or the head", int(p.Kind))
	}
	if len(p.By) > MaxRepositionByLen || !utf8.ValidString(p.By) {
		return invalid("reposition by a name of %d bytes: at most %d bytes of UTF-8", len(p.By), MaxRepositionByLen)
	}
	return nil
}

// SubscriptionFilter selects subscriptions. Zero fields select all.
type SubscriptionFilter struct {
	// ID selects one subscription.
	ID string
	// Namespace and Key select a namespace's subscriptions, or with Key
	// one stream's (not the namespace's).
	Namespace string
	Key       string
	// Partition, when set, selects the subscriptions that read it: those
	// to its streams and those to whole namespaces.
	Partition *int32
}

// ListSubscriptionsParams selects a page of the subscriptions to one
// stream or to a whole namespace (StreamStore.ListSubscriptions). Consumer
// names are compared in lower case here, as grants compare them.
type ListSubscriptionsParams struct {
	Namespace string
	// Key names the stream; "" selects the subscriptions to the whole
	// namespace (not those to its streams).
	Key string
	// Consumer selects the consumers named so or, with Prefix, whose
	// names start so ("" with Prefix: every consumer).
	Consumer string
	Prefix   bool
	// AfterConsumer and AfterID are the consumer and id of the
	// subscription the page starts after ("" for the first page).
	AfterConsumer, AfterID string
	// Max bounds the page: 1 to Limits.MaxBatch.
	Max int
}

// Validate checks a listing of subscriptions.
func (p *ListSubscriptionsParams) Validate(l Limits) error {
	if err := ValidateName("namespace", p.Namespace); err != nil {
		return err
	}
	if p.Key != "" {
		if err := ValidateKey(p.Key); err != nil {
			return err
		}
	}
	switch {
	case !p.Prefix:
		if err := ValidateName("consumer", p.Consumer); err != nil {
			return err
		}
	case len(p.Consumer) > MaxNameLen:
		return invalid("list of the consumers starting with a prefix of %d bytes: at most %d", len(p.Consumer), MaxNameLen)
	}
	if len(p.AfterConsumer) > MaxNameLen || len(p.AfterID) > MaxNameLen {
		return invalid("list of subscriptions after a consumer of %d bytes and an id of %d: at most %d each",
			len(p.AfterConsumer), len(p.AfterID), MaxNameLen)
	}
	if p.Max < 1 || p.Max > l.MaxBatch {
		return invalid("list of %d subscriptions: want 1 to %d", p.Max, l.MaxBatch)
	}
	return nil
}

// ConsumerRange returns the range [from, to) of consumer names in lower
// case that p selects, from at least p.AfterConsumer in lower case.
// "!" sorts before every character a name holds (and after the space
// that PAD SPACE collations pad with), so a name followed by it ends the
// range of that one name.
func (p *ListSubscriptionsParams) ConsumerRange() (from, to string) {
	c := strings.ToLower(p.Consumer)
	if p.Prefix {
		from, to = PrefixRange(c)
	} else {
		from, to = c, c+"!"
	}
	return max(from, strings.ToLower(p.AfterConsumer)), to
}

// ProgressParams saves progress on a partition.
type ProgressParams struct {
	// Group, Partition and Epoch name the lease that fences the save.
	Group     string
	Partition int32
	Epoch     int64
	// Checkpoint is the partition's new checkpoint (it never moves back).
	Checkpoint int64
	// Positions holds subscriptions' new positions.
	Positions map[string]int64
	// Repositions holds, for subscriptions of Positions, the count of
	// their repositions the owner knows of (missing: 0): a position is
	// written only while the stored count is the same, so that a save
	// computed before a reposition never moves the subscription back.
	Repositions map[string]int64
	// Trim bounds the consumed records trimmed after saving (0: none).
	Trim int
}

// ProgressResult is what SaveProgress did with one partition.
type ProgressResult struct {
	// Err is ErrFenced when the partition's epoch moved on.
	Err error
	// Checkpoint is the checkpoint stored: the one proposed, capped by
	// the lowest stored position of any subscription of the partition
	// (and never moved back).
	Checkpoint int64
	// Trimmed counts the records trimmed.
	Trimmed int64
	// TrimmedThrough is the partition's retention watermark after the
	// save's trim (valid when ProgressParams.Trim > 0): records at or
	// below it are gone.
	TrimmedThrough int64
	// Timed reports retention that trims with time alone, whether or not
	// the checkpoint moves: a namespace's Expiry or Parked retention
	// (valid when ProgressParams.Trim > 0).
	Timed bool
}

// ParkParams parks events of a subscription.
type ParkParams struct {
	Subscription string
	Events       []ParkedEvent
	// Fence, when set, parks only under that lease: the partition's
	// owner parks the events it gives up on.
	Fence *Fence
}

// ParkedEvent is an event a subscription gave up on.
type ParkedEvent struct {
	Partition int32
	sluicetype.Record
	// Error is the last delivery's error.
	Error    string
	Attempts int
	ParkedAt time.Time
}

// ParkedParams lists parked events.
type ParkedParams struct {
	Subscription string
	// AfterPartition and AfterPosition continue a listing (zeros: from
	// the first).
	AfterPartition int32
	AfterPosition  int64
	Max            int
}

// UnparkParams deletes parked events.
type UnparkParams struct {
	Subscription string
	Events       []ParkedID
}

// ParkedID names a parked event.
type ParkedID struct {
	Partition int32
	Position  int64
}

// Retention says how long a namespace's records stay once every
// subscription is done with them, how long at most whether or not they
// are, and how long its parked events stay. The zero value deletes
// records once every subscription is done with them and keeps parked
// events until replayed or deleted.
type Retention struct {
	// MaxAge keeps consumed records until they are this old (Forever: for
	// ever; negative is refused).
	MaxAge time.Duration
	// MaxBytes keeps the newest consumed records of the namespace on each
	// partition while their payloads add up to at most this many bytes.
	MaxBytes int64
	// Expiry is the hard ceiling: a record older than this goes whether
	// or not the namespace's subscriptions have read it, and none of them
	// holds its partition's older records back any more (0 or Forever:
	// none; at least MaxAge). A subscription that had not read what went
	// meets ErrRetentionGap. Trims remove a partition's oldest records
	// first, and a subscription of a namespace without an expiry (or
	// with a longer one, for records younger than it) still holds back
	// every record of its partition after its position.
	Expiry time.Duration
	// Parked deletes the namespace's parked events once parked this long
	// (0 or Forever: kept until replayed or deleted).
	Parked time.Duration
}

// HasExpiry reports whether r has a hard ceiling.
func (r Retention) HasExpiry() bool { return r.Expiry > 0 && r.Expiry < Forever }

// TrimConsumedParams trims a partition's consumed records.
type TrimConsumedParams struct {
	Partition int32
	// Max bounds how many records one call deletes.
	Max int
}

// Validate checks a fence.
func (f *Fence) Validate() error {
	if err := ValidatePartition(f.Partition); err != nil {
		return err
	}
	if err := ValidateGroup(f.Group); err != nil {
		return err
	}
	if f.Epoch < 1 {
		return invalid("fence of epoch %d: an owner's epoch is at least 1", f.Epoch)
	}
	return nil
}

// Validate checks a fault.
func (p *FaultParams) Validate() error {
	if err := ValidateName("subscription id", p.ID); err != nil {
		return err
	}
	if p.Fence != nil {
		return p.Fence.Validate()
	}
	return nil
}

// Validate checks a new subscription.
func (p *NewSubscription) Validate() error {
	if err := ValidateName("subscription id", p.ID); err != nil {
		return err
	}
	if err := ValidateName("consumer", p.Consumer); err != nil {
		return err
	}
	if err := ValidateName("namespace", p.Namespace); err != nil {
		return err
	}
	if p.Key == "" {
		if p.Partition != NoPartition {
			return invalid("subscription to a whole namespace on partition %d", p.Partition)
		}
	} else {
		if err := ValidateKey(p.Key); err != nil {
			return err
		}
		if err := ValidatePartition(p.Partition); err != nil {
			return err
		}
		if _, ok := p.Start[p.Partition]; !ok || len(p.Start) != 1 {
			return invalid("subscription to a stream of partition %d must start on that partition only", p.Partition)
		}
	}
	if len(p.Start) == 0 {
		return invalid("subscription starts on no partition")
	}
	for part, pos := range p.Start {
		if err := ValidatePartition(part); err != nil {
			return err
		}
		if pos < 0 {
			return invalid("start position %d: must not be negative", pos)
		}
	}
	return nil
}

// ValidateKey checks a stream key: valid UTF-8 of 1 to MaxKeyLen bytes.
func ValidateKey(key string) error {
	if key == "" || len(key) > MaxKeyLen || !utf8.ValidString(key) {
		return fmt.Errorf("stream key must be valid UTF-8 of 1 to %d bytes: %w", MaxKeyLen, sluicetype.ErrInvalidName)
	}
	return nil
}

// Validate checks saved progress.
func (p *ProgressParams) Validate() error {
	if err := ValidatePartition(p.Partition); err != nil {
		return err
	}
	if err := ValidateGroup(p.Group); err != nil {
		return err
	}
	if p.Checkpoint < 0 {
		return invalid("checkpoint %d: must not be negative", p.Checkpoint)
	}
	if p.Epoch < 1 {
		return invalid("epoch %d: an owner's epoch is at least 1", p.Epoch)
	}
	if p.Trim < 0 {
		return invalid("trim of %d records", p.Trim)
	}
	for id, pos := range p.Positions {
		if err := ValidateName("subscription id", id); err != nil {
			return err
		}
		if pos < 0 {
			return invalid("position %d of subscription %q: must not be negative", pos, id)
		}
	}
	return nil
}

// Validate checks parked events.
func (p *ParkParams) Validate(l Limits) error {
	if err := ValidateName("subscription id", p.Subscription); err != nil {
		return err
	}
	if len(p.Events) == 0 || len(p.Events) > l.MaxBatch {
		return invalid("park of %d events, 1 to %d allowed", len(p.Events), l.MaxBatch)
	}
	if p.Fence != nil {
		if err := p.Fence.Validate(); err != nil {
			return err
		}
	}
	for _, e := range p.Events {
		if err := ValidatePartition(e.Partition); err != nil {
			return err
		}
		if p.Fence != nil && e.Partition != p.Fence.Partition {
			return invalid("park of an event of partition %d under the lease of partition %d", e.Partition, p.Fence.Partition)
		}
		if len(e.Error) > MaxReasonLen {
			return invalid("parking error of %d bytes, at most %d allowed", len(e.Error), MaxReasonLen)
		}
	}
	return nil
}

// Validate checks a listing of parked events.
func (p *ParkedParams) Validate(l Limits) error {
	if err := ValidateName("subscription id", p.Subscription); err != nil {
		return err
	}
	if p.Max <= 0 || p.Max > l.MaxBatch {
		return invalid("listing of %d parked events, 1 to %d allowed", p.Max, l.MaxBatch)
	}
	return nil
}

// Validate checks an unpark.
func (p *UnparkParams) Validate(l Limits) error {
	if err := ValidateName("subscription id", p.Subscription); err != nil {
		return err
	}
	if len(p.Events) == 0 || len(p.Events) > l.MaxBatch {
		return invalid("unpark of %d events, 1 to %d allowed", len(p.Events), l.MaxBatch)
	}
	return nil
}

// Validate checks a retention.
func (r Retention) Validate() error {
	switch {
	case r.MaxAge < 0 || r.MaxBytes < 0:
		return invalid("retention of %v and %d bytes: must not be negative", r.MaxAge, r.MaxBytes)
	case r.Expiry < 0:
		return invalid("retention expiry %v: must not be negative (0: none)", r.Expiry)
	case r.Parked < 0:
		return invalid("parked retention %v: must not be negative (0: until replayed or deleted)", r.Parked)
	case r.HasExpiry() && r.Expiry < r.MaxAge:
		return invalid("retention expiry %v is shorter than its max age %v: consumed records would go before they are that old", r.Expiry, r.MaxAge)
	}
	return nil
}

// Validate checks a trim.
func (p *TrimConsumedParams) Validate(l Limits) error {
	if err := ValidatePartition(p.Partition); err != nil {
		return err
	}
	if p.Max <= 0 || p.Max > 10*l.MaxBatch {
		return invalid("trim of %d records, 1 to %d allowed", p.Max, 10*l.MaxBatch)
	}
	return nil
}
