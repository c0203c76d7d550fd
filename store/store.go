package store

import (
	"context"
	"io"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// Tenant scopes every row and every operation: several deployments
// (services) and several named providers can share one database without
// ever seeing each other's rows.
type Tenant struct {
	Service  string
	Provider string
}

// Backend is an opened database with sluice's schema applied. It hands out
// Stores scoped to one tenant; all of them share the backend's connections
// and its group commit.
type Backend interface {
	// Store returns the operations of one tenant. It fails with
	// ErrInvalidName when the tenant's names are not valid.
	Store(t Tenant) (Store, error)
	// Features says what this backend can and cannot do.
	Features() Features
	io.Closer
}

// DeadLettered reports messages of one queue that a committed
// transaction moved to dead letters for one reason.
type DeadLettered struct {
	Tenant Tenant
	Queue  string
	Reason string
	Count  int
}

// DeadLetterObserver is a Store that reports every dead-lettering its
// process commits, whatever the cause: a receiver's, a delivery count
// exhausted, a time-to-live run out, a filter that failed. The backends
// of this module are: their stores implement it. Dead-lettering in a
// caller's transaction (EnqueueTx) is not reported, since its commit is
// the caller's, nor is a transaction whose outcome is unknown.
type DeadLetterObserver interface {
	// ObserveDeadLetters calls fn after each commit that dead-lettered
	// messages of the store's tenant, once per queue and reason, until
	// stop is called; once stop returns, fn is not called again. fn runs
	// on the committing goroutine: it must not block, nor call the store
	// or stop.
	ObserveDeadLetters(fn func(DeadLettered)) (stop func())
}

// Features describes a backend's capabilities to the conformance suite and
// to the layers above.
type Features struct {
	// Name is the backend's name: "sqlite", "postgres" or "mysql".
	Name string
	// Driver names the Go database driver the backend runs on.
	Driver string
	// CrossProcessWake is true when an enqueue in one process wakes a
	// waiting leaser in another at once (LISTEN/NOTIFY). Without it, other
	// processes notice new messages on their next poll.
	CrossProcessWake bool
	// SharedStreams is true when several processes may pull one tenant's
	// stream partitions, sharing them through leases (a database server).
	// Without it one stream node at a time runs (SQLite).
	SharedStreams bool
	// PositionedReads is true when reading a partition's log after any
	// position is cheap (an ordered read on an index, whatever the
	// position), so that a stream cache may keep several windows of the
	// log and read each after its own end. Without it a partition's cache
	// keeps one contiguous window.
	PositionedReads bool
	// CommitPipelines is how many group commits the backend runs at once
	// (store.OpenOptions.CommitPipelines): with several, a queue's sends
	// and its receives, and independent entities, commit side by side.
	CommitPipelines int
}

// Store is one tenant's view of the database.
type Store interface {
	QueueStore
	LogStore
	StreamStore
	ClusterStore
}

// QueueStore holds the operations on queue entities.
type QueueStore interface {
	// CreateQueue creates a queue with the given settings (zero fields take
	// their defaults). ErrQueueExists if the name is taken.
	CreateQueue(ctx context.Context, s *QueueSettings) error
	// GetQueue returns a queue's settings. ErrQueueNotFound if absent.
	GetQueue(ctx context.Context, name string) (QueueSettings, error)
	// UpdateQueue replaces a queue's settings (zero fields take their
	// defaults); its messages keep their numbers. ErrQueueNotFound if
	// absent.
	UpdateQueue(ctx context.Context, s *QueueSettings) error
	// ListQueues returns queues in name order, after p.After, at most
	// p.Max of them.
	ListQueues(ctx context.Context, p *ListParams) ([]QueueSettings, error)
	// DeleteQueue removes a queue with its messages and dead letters.
	DeleteQueue(ctx context.Context, name string) error

	// Enqueue appends a batch of messages atomically and returns their
	// sequence numbers, in the order given.
	Enqueue(ctx context.Context, p *EnqueueParams) ([]int64, error)
	// EnqueueAll appends batches to several queues in one transaction, all
	// or nothing, and returns each batch's sequence numbers. A message
	// with a DeadLetterReason goes straight to its queue's dead letters.
	// With p.Arrivals, the duplicate checks of entities the copies passed
	// through run first, and a copy that came through a duplicate is not
	// written (its number is 0). The batch limits do not apply to the
	// copies (see EnqueueAllParams.Validate).
	// With p.Routed, the scheduled messages of the send the batches copy
	// are also numbered by the queue they were sent to, so that
	// CancelScheduled on that queue can cancel all their copies.
	EnqueueAll(ctx context.Context, p *EnqueueAllParams) (EnqueueAllResult, error)
	// Lease takes up to p.Max available messages in sequence order and
	// hides them for p.Visibility. It returns an empty slice, not an error,
	// when none is available.
	Lease(ctx context.Context, p *LeaseParams) ([]sluicetype.Leased, error)
	// Settle applies one action to messages by receipt. The error is for
	// the call as a whole; per-message outcomes (ErrLockLost for a stale
	// receipt) come in the results, aligned with p.Receipts.
	Settle(ctx context.Context, p *SettleParams) ([]SettleResult, error)
	// LeaseDeferred leases deferred messages by sequence number, in the
	// order given. ErrMessageNotFound (and nothing leased) if any names no
	// deferred message. A deferred message whose lease ends, or that is
	// abandoned, is deferred again.
	LeaseDeferred(ctx context.Context, p *LeaseDeferredParams) ([]sluicetype.Leased, error)
	// CancelScheduled deletes scheduled messages that were never
	// delivered, by sequence number, atomically. A number that EnqueueAll
	// gave a routed send (EnqueueAllParams.Routed) cancels every copy of
	// that message still scheduled, if its time has not come.
	// ErrMessageNotFound (and nothing deleted) if any names no such
	// message.
	CancelScheduled(ctx context.Context, p *CancelParams) error
	// Peek browses messages from a sequence number without leasing them.
	Peek(ctx context.Context, p *PeekParams) ([]sluicetype.Message, error)
	// Browse examines a queue's messages, or its dead letters, in
	// sequence order from p.FromSeq, at most p.Scan of them, reading them
	// without their bodies, and returns up to p.Max of those p.Match
	// accepts, with their bodies; the result says where to go on.
	Browse(ctx context.Context, p *BrowseParams) (BrowseResult, error)
	// DeleteMessages deletes messages of a queue that no lock holds (a
	// lease that has not ended), without receiving them: those p.Seqs
	// names, or the oldest p.Max, enqueued before p.Before when it is set.
	// It returns how many it deleted, in one transaction; a number that
	// names no such message deletes nothing.
	DeleteMessages(ctx context.Context, p *DeleteParams) (int64, error)

	// PeekDeadLetters browses a queue's dead letters from a sequence number.
	PeekDeadLetters(ctx context.Context, p *PeekParams) ([]sluicetype.DeadLetter, error)
	// ResubmitDeadLetters moves dead letters back to their queue as new
	// messages, atomically, and returns the new sequence numbers in the
	// order given. ErrMessageNotFound (and nothing moved) if any sequence
	// number names no dead letter.
	ResubmitDeadLetters(ctx context.Context, p *ResubmitParams) ([]int64, error)
	// LeaseDeadLetters locks up to p.Max of a queue's dead letters that no
	// one holds, in sequence order, for p.Visibility, so that they can be
	// received from the dead-letter queue as from a queue.
	LeaseDeadLetters(ctx context.Context, p *LeaseParams) ([]sluicetype.DeadLetter, error)
	// SettleDeadLetters settles leased dead letters by receipt: Complete
	// deletes them, Abandon unlocks them, Extend renews their locks. A
	// stale receipt gets ErrLockLost in its result.
	SettleDeadLetters(ctx context.Context, p *SettleParams) ([]SettleResult, error)
	// PurgeDeadLetters deletes all of a queue's dead letters, in bounded
	// transactions, and returns how many it deleted.
	PurgeDeadLetters(ctx context.Context, queue string) (int64, error)
	// DeleteDeadLetters deletes the dead letters of a queue that seqs
	// name (1 to Limits.MaxBatch of them, each from 1), in one
	// transaction, and returns how many it deleted: a number that names
	// none deletes nothing.
	DeleteDeadLetters(ctx context.Context, queue string, seqs []int64) (int64, error)

	// QueueStats counts a queue's messages by state.
	QueueStats(ctx context.Context, queue string) (QueueStats, error)
	// DeadLetterReasons counts a queue's dead letters by reason.
	DeadLetterReasons(ctx context.Context, queue string) (map[string]int64, error)

	SessionStore

	// WatchQueue returns a channel that receives a value soon after
	// messages may have become available in the queue, and a function that
	// stops the watch. Wake-ups may be spurious; a missed one is covered by
	// the caller's own poll.
	WatchQueue(queue string) (<-chan struct{}, func())
}

// TxEnqueuer is a Store whose enqueues can join a transaction the caller
// opened on the same database (the transactional outbox): the messages
// commit, or vanish, with the caller's own writes. The queues' counter
// rows stay locked until the caller commits, so keep such transactions
// short. Wake-ups of receivers in other processes come with the commit on
// PostgreSQL; elsewhere receivers find the messages on their next poll.
type TxEnqueuer interface {
	EnqueueTx(ctx context.Context, tx Tx, p *EnqueueAllParams) (EnqueueAllResult, error)
}

// SessionStore holds the operations on sessions of queues that require
// them. A session is locked by one holder at a time; its messages are
// leased only under its lock, in sequence order, and their locks end with
// the session's.
type SessionStore interface {
	// AcceptSession locks a named session (created if it has never been
	// seen), or with an empty p.SessionID the next session that has
	// available messages and no live lock. ErrSessionCannotBeLocked if the
	// named session is held; ErrNoSessionAvailable if no session is free.
	AcceptSession(ctx context.Context, p *AcceptSessionParams) (SessionLock, error)
	// LeaseSession leases up to p.Max available messages of a held
	// session, in sequence order, under the session's lock.
	LeaseSession(ctx context.Context, p *LeaseSessionParams) ([]sluicetype.Leased, error)
	// RenewSession extends a session's lock, and the locks of its leased
	// messages, to p.Duration from now, and returns the new end.
	RenewSession(ctx context.Context, p *SessionParams) (time.Time, error)
	// ReleaseSession unlocks a session; its leased messages are available
	// again at once, and the release does not count as a delivery: their
	// delivery counts go back to what they were before their lease.
	ReleaseSession(ctx context.Context, p *SessionParams) error
	// SessionState returns a held session's state (nil when none).
	SessionState(ctx context.Context, p *SessionParams) ([]byte, error)
	// SetSessionState replaces a held session's state; nil clears it.
	SetSessionState(ctx context.Context, p *SessionStateParams) error
	// SessionHeld reports whether the lock still holds the session.
	SessionHeld(ctx context.Context, p *SessionParams) (bool, error)
}

// AcceptSessionParams accepts a session.
type AcceptSessionParams struct {
	Queue string
	// SessionID names the session; empty accepts the next free one.
	SessionID string
	// Duration is how long the lock lasts unless renewed.
	Duration time.Duration
}

// SessionLock proves a session lock.
type SessionLock struct {
	SessionID   string
	Token       int64
	LockedUntil time.Time
}

// SessionParams names a session and the lock its caller holds.
type SessionParams struct {
	Queue     string
	SessionID string
	Token     int64
	// Duration is the renewed lock's length (RenewSession only).
	Duration time.Duration
}

// LeaseSessionParams leases messages of a held session.
type LeaseSessionParams struct {
	SessionParams
	Max int
}

// SessionStateParams sets a held session's state.
type SessionStateParams struct {
	SessionParams
	State []byte
}

// LogStore holds the operations on partition logs.
type LogStore interface {
	// Append adds records to a partition atomically and returns the
	// positions given to the first and the last.
	Append(ctx context.Context, p *AppendParams) (AppendResult, error)
	// Read returns up to p.Max records with positions after p.After, in
	// position order: of the whole partition, or with p.Namespace and
	// p.Key of that one stream only. ErrTrimmed if retention removed
	// records after p.After that the reader has not seen; a stream's read
	// after a position below the partition's trimmed position fails so.
	Read(ctx context.Context, p *ReadParams) ([]sluicetype.Record, error)
	// PartitionInfo reports a partition's head (last position) and the
	// position through which retention has trimmed it.
	PartitionInfo(ctx context.Context, partition int32) (PartitionInfo, error)

	// WatchPartition is WatchQueue for a partition log.
	WatchPartition(partition int32) (<-chan struct{}, func())
	// TailPartition follows a partition log as WatchPartition does, and
	// also hands over the records this store's own appends commit, so
	// that a reader that has every record before them need not read them
	// back.
	TailPartition(partition int32) Tail
}

// Tail follows the appends to a partition log (Store.TailPartition).
type Tail interface {
	// Ready is woken when the partition may have grown.
	Ready() <-chan struct{}
	// Take returns the records this store committed to the partition
	// since the last Take, in position order, as Read would return them
	// (copies: the appender's buffers are its own again). read says the
	// partition may also hold records that were not handed over, and
	// that the follower must read: those another store or a caller's
	// transaction appended, those of an append whose outcome its caller
	// never learnt, or more than a tail keeps for a follower that does
	// not take them (about 1 MiB).
	Take() (recs []sluicetype.Record, read bool)
	// Stop ends the tail.
	Stop()
}

// QueueSettings are a queue's stored settings. Zero values take defaults.
type QueueSettings struct {
	Name string
	// MaxDeliveryCount is how many leases a message gets before a lease
	// that ends dead-letters it (default 10).
	MaxDeliveryCount int
	// DefaultTTL caps every message's time-to-live (0 or Forever:
	// unlimited, stored as 0; negative is refused).
	DefaultTTL time.Duration
	// DeadLetterOnExpiry moves expired messages to dead letters with reason
	// TTLExpiredException instead of dropping them.
	DeadLetterOnExpiry bool
	// DeadLetterRetention is how long dead letters are kept (0 or
	// Forever: until purged, stored as 0; negative is refused).
	DeadLetterRetention time.Duration
	// EvictionInterval is how often a lease runs an eviction batch
	// (default 5 s).
	EvictionInterval time.Duration
	// EvictionBatch bounds the rows one eviction batch moves or deletes
	// (default 256).
	EvictionBatch int
	// RequiresSession makes every message carry a session id and be
	// received only under its session's lock (AcceptSession). It is fixed
	// when the queue is created.
	RequiresSession bool
	// DuplicateDetectionWindow, when not 0, turns duplicate detection on:
	// an enqueue of a message whose MessageID (with its PartitionKey, when
	// set) was enqueued within the window stores nothing and returns the
	// first one's sequence number. 20 s to 7 days.
	DuplicateDetectionWindow time.Duration
	// Attributes are the layer above's own settings, stored with the
	// queue and returned as given (at most MaxAttributesLen bytes).
	Attributes []byte
}

// ListParams pages through queues by name.
type ListParams struct {
	// After is the last name of the previous page ("" for the first).
	After string
	// Max is how many to return at most.
	Max int
	// Prefix, when set, lists only the names that start with it: the
	// listing reads that range of names, not the others.
	Prefix string
}

// NewMessage is a message to enqueue.
type NewMessage struct {
	MessageID    string
	SessionID    string
	PartitionKey string
	ContentType  string
	Properties   map[string]string
	// Headers are the layer above's system properties (correlation id,
	// subject, reply-to and the like), stored and returned as given.
	Headers map[string]string
	Payload []byte
	// TTL is the message's time-to-live from enqueue, or from VisibleAt
	// for a scheduled message (0: the queue's default; Forever: never;
	// negative is refused). The queue's DefaultTTL caps it.
	TTL time.Duration
	// VisibleAt schedules delivery: the message is not leased before then
	// (a time past the year 9999 is that year's end). Zero means now.
	// When it comes, the message is enqueued under a new sequence number,
	// as enqueued then; the number Enqueue returned names it only until
	// then.
	VisibleAt time.Time
	// DeadLetterReason, when set (EnqueueAll only), dead-letters the
	// message on arrival with this reason and DeadLetterDescription: a
	// copy the layer above could not route.
	DeadLetterReason      string
	DeadLetterDescription string
}

// EnqueueParams enqueues a batch of messages into one queue.
type EnqueueParams struct {
	Queue    string
	Messages []NewMessage
}

// EnqueueAllParams enqueues batches into several queues atomically; each
// queue appears once.
type EnqueueAllParams struct {
	Batches []EnqueueParams
	// Routed, when set, says which send the batches copy.
	Routed *RoutedSend
	// Arrivals are the duplicate checks of the send: its messages'
	// arrivals at entities with duplicate detection that they pass
	// through (a topic before its fan-out, a queue that forwards).
	Arrivals []Arrival
	// Through holds, with Arrivals, for each message of each batch the
	// index of the last arrival it came through (-1: none). A copy is
	// written only if that arrival, and every arrival it came after, was
	// not a duplicate.
	Through [][]int
}

// Arrival is a message's arrival at an entity with duplicate detection
// on its way. The entity records the message's id (with its partition
// key) for its window, as an enqueue to it would; an id it has already
// recorded makes the arrival, and every copy after it, a duplicate.
type Arrival struct {
	// Queue is the entity (a topic, a forwarding queue).
	Queue string
	// MessageID and PartitionKey are the message's (an empty MessageID is
	// never a duplicate).
	MessageID, PartitionKey string
	// Message is the index of the sent message that arrives.
	Message int
	// After is the index of the arrival this one came through, which
	// comes before it (-1: none).
	After int
}

// RoutedSend is a send to a queue whose messages land elsewhere (copies
// in a topic's subscriptions, or where a queue forwards them). Each of
// its scheduled messages takes a number from Queue's counter, and the
// store keeps, until its scheduled time, where its copies went.
type RoutedSend struct {
	// Queue is the queue (or topic) the messages were sent to.
	Queue string
	// VisibleAt holds each sent message's scheduled time (zero: now).
	VisibleAt []time.Time
	// Origins holds, for each message of each batch, the index in
	// VisibleAt of the sent message it copies.
	Origins [][]int
}

// EnqueueAllResult is what an EnqueueAll gave its messages.
type EnqueueAllResult struct {
	// Seqs holds each batch's sequence numbers, in the order given.
	Seqs [][]int64
	// Routed holds, with RoutedSend, the number each sent message took
	// from RoutedSend.Queue: 0 for those not scheduled for later.
	Routed []int64
}

// LeaseParams leases messages from one queue.
type LeaseParams struct {
	Queue string
	// Max is how many messages to lease at most.
	Max int
	// Visibility is how long the leased messages stay hidden.
	Visibility time.Duration
}

// SettleAction is what Settle does with the messages.
type SettleAction int

// Settle actions.
const (
	// Complete deletes the messages.
	Complete SettleAction = iota + 1
	// Abandon makes the messages available again, after Delay if set; a
	// message on its last allowed delivery is dead-lettered instead with
	// reason MaxDeliveryCountExceeded.
	Abandon
	// DeadLetter moves the messages to dead letters with Reason and
	// Description.
	DeadLetter
	// Extend keeps the messages hidden for Extension from now.
	Extend
	// Defer sets the messages aside: they are leased again only by
	// sequence number (LeaseDeferred).
	Defer
	// Release hands the messages back without counting a delivery: they
	// are available again at once (deferred ones deferred again) with the
	// delivery count they had before their lease, and never
	// dead-lettered for it. It is for a consumer that shuts down, not for
	// one that failed (Abandon).
	Release
)

// String names the action.
func (a SettleAction) String() string {
	switch a {
	case Complete:
		return "complete"
	case Abandon:
		return "abandon"
	case DeadLetter:
		return "dead-letter"
	case Extend:
		return "extend"
	case Defer:
		return "defer"
	case Release:
		return "release"
	}
	return "unknown"
}

// SettleParams settles messages of one queue by receipt.
type SettleParams struct {
	Queue    string
	Action   SettleAction
	Receipts []sluicetype.Receipt
	// Delay (Abandon) keeps the messages hidden that long before they are
	// available again.
	Delay time.Duration
	// Reason and Description (DeadLetter) say why.
	Reason      string
	Description string
	// Extension (Extend) is the new lease length from now.
	Extension time.Duration
	// Properties, when not nil, replace the messages' application
	// properties (Abandon, DeadLetter and Defer only).
	Properties map[string]string
}

// LeaseDeferredParams leases deferred messages by sequence number.
type LeaseDeferredParams struct {
	Queue string
	Seqs  []int64
	// Visibility is how long the leased messages stay hidden.
	Visibility time.Duration
	// Session, on a queue that requires sessions, is the session lock the
	// caller holds: the messages must be of that session, and are leased
	// under its lock (Visibility is then unused).
	Session *SessionParams
}

// CancelParams cancels scheduled messages by sequence number.
type CancelParams struct {
	Queue string
	Seqs  []int64
}

// SettleResult is the outcome of settling one message.
type SettleResult struct {
	// Err is nil, or wraps ErrLockLost when the receipt no longer held the
	// message.
	Err error
	// LockedUntil is the new end of the lease (Extend only).
	LockedUntil time.Time
}

// PeekParams browses a queue or its dead letters.
type PeekParams struct {
	Queue string
	// FromSeq is the first sequence number to return (inclusive).
	FromSeq int64
	// Max is how many to return at most.
	Max int
}

// MaxBrowseScan bounds the messages one Browse examines.
const MaxBrowseScan = 10000

// BrowseParams examine a queue's messages or dead letters.
type BrowseParams struct {
	Queue string
	// DeadLetters browses the queue's dead letters instead of its
	// messages.
	DeadLetters bool
	// FromSeq is the first sequence number to examine.
	FromSeq int64
	// Max is how many to return at most (1 to Limits.MaxBatch).
	Max int
	// Scan is how many to examine at most (1 to MaxBrowseScan).
	Scan int
	// Match says which to return (nil: all). It sees a message without
	// its body, its State as Peek reports it (a message's Reason and the
	// other dead-letter fields are zero); it must not keep the pointer.
	Match func(*sluicetype.DeadLetter) bool
}

// BrowseResult is what a Browse returned, and where it stopped.
type BrowseResult struct {
	// Messages are those Match accepted, in sequence order. A message
	// (not a dead letter) is in the DeadLetter's Message, the other
	// fields zero.
	Messages []sluicetype.DeadLetter
	// Next is the first sequence number the browse did not examine, to
	// go on from; 0 when it examined the last there was.
	Next int64
}

// DeleteParams name messages to delete: Seqs, or the oldest Max.
type DeleteParams struct {
	Queue string
	// Seqs names the messages (1 to Limits.MaxBatch of them, distinct,
	// each from 1). Unset: the oldest Max.
	Seqs []int64
	// Max is how many of the oldest to delete (1 to Limits.MaxBatch),
	// when Seqs is unset.
	Max int
	// Before, when set, deletes only messages enqueued before it (by the
	// database's clock), when Seqs is unset.
	Before time.Time
}

// ResubmitParams moves dead letters back to their queue.
type ResubmitParams struct {
	Queue string
	Seqs  []int64
}

// EvictResult says what one eviction batch did.
type EvictResult struct {
	// Expired counts messages whose TTL ran out (dead-lettered or dropped).
	Expired int64
	// Exhausted counts messages dead-lettered for their delivery count.
	Exhausted int64
	// Removed counts dead letters deleted by retention.
	Removed int64
	// Bodies counts the tenant's shared bodies deleted because no message
	// or dead letter refers to them any more (the copies of a large
	// message sent to several queues share one stored body).
	Bodies int64
}

// QueueStats counts a queue's messages by state.
type QueueStats struct {
	// Active messages are available to a lease now (an expired one is
	// not: see Expired).
	Active int64
	// Expired messages would be active, but their time-to-live has run
	// out: the next receive or sweep dead-letters or drops them.
	Expired int64
	// Scheduled messages become available later.
	Scheduled int64
	// InFlight messages are held by a lease that has not ended.
	InFlight int64
	// Deferred messages wait to be received by sequence number.
	Deferred int64
	// DeadLettered counts the queue's dead letters.
	DeadLettered int64
	// OldestAge is how long the oldest active message has been in the
	// queue (0 with none); OldestDeferredAge the oldest deferred one.
	// Scheduled, in-flight and expired messages count in neither.
	OldestAge         time.Duration
	OldestDeferredAge time.Duration
}

// NewRecord is a record to append.
type NewRecord struct {
	Namespace  string
	Key        string
	Properties map[string]string
	Payload    []byte
}

// AppendParams appends records to one partition.
type AppendParams struct {
	Partition int32
	Records   []NewRecord
	// Partitions, when above 0, is the tenant's stream partition count as
	// the caller knows it, for AppendTx to check in the caller's
	// transaction: recorded there when none is recorded yet, and
	// ErrPartitionCount when another is. A caller whose transaction holds
	// SQLite's write lock cannot have StreamPartitions record it on a
	// connection of its own. Append ignores it.
	Partitions int32
}

// AppendResult gives the positions of an append's first and last records.
type AppendResult struct {
	First, Last int64
}

// ReadParams reads a partition log, or one stream's records in it.
type ReadParams struct {
	Partition int32
	// After is the last position the reader has seen (0: from the start).
	After int64
	// Max is how many records to return at most.
	Max int
	// Namespace and Key, both set, read only the records of that stream
	// (the partition's other streams are passed over by an index, not
	// read). Both empty read the whole partition; one without the other
	// is refused with ErrInvalidArgument, and a namespace or key that no
	// record could have (see ValidateName, ValidateKey) with
	// ErrInvalidName.
	Namespace, Key string
	// Through, when positive, reads no record past it (the read returns
	// fewer than Max records when they end there).
	Through int64
}

// PartitionInfo describes a partition log.
type PartitionInfo struct {
	// Head is the last position appended (0: empty).
	Head int64
	// Trimmed is the position through which retention deleted records.
	Trimmed int64
}

// Evicter is a Store that runs eviction on demand. Leases evict on their
// own (once per eviction interval, a bounded batch each), so nothing in
// sluice needs it: the conformance suite calls it to test expiry without
// waiting for a lease to trigger it. The backends of this module
// implement it.
type Evicter interface {
	// Evict runs one bounded eviction batch now, whatever the control
	// row says.
	Evict(ctx context.Context, queue string) (EvictResult, error)
}
