package sluicetype

import "errors"

// Sentinel errors. Every error sluice returns wraps one of these (with an
// operation prefix such as "sluice: lease: "), so callers test for them with
// errors.Is and never by comparing strings.
var (
	// ErrInvalidName reports a queue, tenant, consumer or namespace name that
	// is empty, too long or holds characters outside the allowed set.
	ErrInvalidName = errors.New("invalid name")

	// ErrInvalidArgument reports a parameter outside its allowed range, such
	// as a zero or negative timeout, a lease batch of zero, or a negative
	// position.
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrMessageTooLarge reports a message whose payload and properties
	// exceed the configured maximum message size.
	ErrMessageTooLarge = errors.New("message too large")

	// ErrBatchTooLarge reports a batch with more messages or records, or more
	// bytes, than one atomic write accepts.
	ErrBatchTooLarge = errors.New("batch too large")

	// ErrEntityNotFound reports an operation on a queue, topic or
	// subscription that does not exist.
	ErrEntityNotFound = errors.New("entity not found")

	// ErrQueueNotFound is ErrEntityNotFound, by the name storage uses.
	ErrQueueNotFound = ErrEntityNotFound

	// ErrMessageNotFound reports a sequence number that names no message in
	// the place the operation looked (the queue or its dead letters).
	ErrMessageNotFound = errors.New("message not found")

	// ErrLockLost reports a settle whose receipt no longer holds the message:
	// the lease expired, the message was leased again, or it was already
	// settled. The settle changed nothing.
	ErrLockLost = errors.New("lock lost")

	// ErrFenced reports a checkpoint write carrying an owner epoch older than
	// the one stored: a newer owner has taken over and the write was refused.
	ErrFenced = errors.New("fenced by a newer epoch")
	// ErrConsumerConflict reports a stream consumer that stream nodes of
	// another group handle already.
	ErrConsumerConflict = errors.New("consumer handled by another group")

	// ErrTrimmed reports a read of a partition log from a position whose
	// records retention has already removed.
	ErrTrimmed = errors.New("position trimmed by retention")

	// ErrContention reports a transaction that kept failing with deadlocks,
	// serialization failures or busy errors after the backend's bounded
	// retries. Nothing was written; the caller may retry.
	ErrContention = errors.New("database contention persisted")

	// ErrSchemaTooNew reports a database whose schema was migrated by a newer
	// sluice than this one. The error that wraps it is a
	// *SchemaVersionError naming both versions.
	ErrSchemaTooNew = errors.New("database schema is newer than this sluice")

	// ErrSchemaTooOld reports a database whose schema lacks migrations this
	// sluice needs, opened without migrating it. The error that wraps it is
	// a *SchemaVersionError naming both versions.
	ErrSchemaTooOld = errors.New("database schema is older than this sluice")

	// ErrClosed reports a call on a store that has been closed.
	ErrClosed = errors.New("store closed")

	// ErrOutcomeUnknown reports a write that may or may not have been
	// applied: the connection to the database broke after the write's
	// statement (or its COMMIT) was sent and before the reply was read.
	// It wraps the cause. Nothing the write did is undone or redone: look
	// before writing again, or retry where a retry is safe. A send retried
	// with the same MessageID to an entity with duplicate detection is
	// stored once; a settle retried either applies or fails with
	// ErrLockLost (the first one applied: the lock it named is gone); a
	// session state or checkpoint write retried writes the same value. A
	// send without duplicate detection, or a stream publish, retried may
	// be stored twice. (A call whose context ends before it returns may
	// also have been applied; it reports the context's error.)
	ErrOutcomeUnknown = errors.New("outcome unknown")
)

// ErrEntityExists reports a create of a queue, topic or subscription
// whose name is taken.
var ErrEntityExists = errors.New("entity already exists")

// ErrQueueExists is ErrEntityExists, by the name storage uses.
var ErrQueueExists = ErrEntityExists

// Session errors.
var (
	// ErrSessionRequired reports a message without a session id sent to a
	// queue that requires sessions, or a receive on such a queue that did
	// not accept a session.
	ErrSessionRequired = errors.New("session required")
	// ErrSessionCannotBeLocked reports an accept of a session that another
	// receiver holds.
	ErrSessionCannotBeLocked = errors.New("session cannot be locked")
	// ErrNoSessionAvailable reports an accept of the next session when no
	// session has messages and no live lock.
	ErrNoSessionAvailable = errors.New("no session available")
	// ErrSessionLockLost reports an operation under a session lock that
	// expired or was released: nothing was changed.
	ErrSessionLockLost = errors.New("session lock lost")
)

// Stream errors.
var (
	// ErrPartitionCount reports a node configured with a number of stream
	// partitions other than the one recorded in the database: streams
	// would map to other partitions, and their events would be stranded.
	ErrPartitionCount = errors.New("stream partition count differs from the database's")
	// ErrSubscriptionNotFound reports an operation on a stream
	// subscription that does not exist.
	ErrSubscriptionNotFound = errors.New("stream subscription not found")
	// ErrSingleNode reports a second stream node on a backend where one
	// node at a time pulls a tenant's partitions (SQLite).
	ErrSingleNode = errors.New("another stream node is running on this single-node backend")
	// ErrPartitionNotPulled reports work on a stream partition that this
	// node does not pull (another node holds its lease): do it there.
	ErrPartitionNotPulled = errors.New("stream partition not pulled by this node")
	// ErrWindowLimit reports a subscription a partition's stream cache
	// could not give a window of its own, at its limit of windows, under
	// the fault policy: the subscription is faulted with a reason that
	// names it.
	ErrWindowLimit = errors.New("stream cache window limit reached")
	// ErrRetentionGap reports records a stream subscription had not read
	// that retention deleted (a namespace's Expiry passed while the
	// subscription lagged, was faulted or was not served): it is faulted
	// with a reason that names it, or under the Park policy a marker of
	// the gap is parked and it reads on after it.
	ErrRetentionGap = errors.New("stream records deleted by retention before the subscription read them")

	// ErrInvalidFilter reports a subscription rule whose filter cannot be
	// parsed.
	ErrInvalidFilter = errors.New("invalid filter")

	// ErrHandlerTimeout is the cause of a handler's context that a
	// handler timeout ended, and is wrapped in the error of a handler
	// that failed after it.
	ErrHandlerTimeout = errors.New("handler timed out")
)
