package sluice

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Errors that calls of this package return, wrapped with the operation;
// test for them with errors.Is. They are the values of package sluicetype,
// so storage errors match them too.
var (
	// ErrEntityNotFound reports a queue, topic, subscription or rule that
	// does not exist.
	ErrEntityNotFound = sluicetype.ErrEntityNotFound
	// ErrEntityExists reports a create of a name that is taken.
	ErrEntityExists = sluicetype.ErrEntityExists
	// ErrLockLost reports a settle or renewal of a message whose lock
	// expired or was settled already; the message may be delivered again.
	ErrLockLost = sluicetype.ErrLockLost
	// ErrMessageNotFound reports a sequence number that names no message
	// in the place asked (deferred, scheduled).
	ErrMessageNotFound = sluicetype.ErrMessageNotFound
	// ErrMessageTooLarge reports a message larger than its entity's
	// maximum message size.
	ErrMessageTooLarge = sluicetype.ErrMessageTooLarge
	// ErrBatchTooLarge reports a send of more messages or bytes than one
	// batch may hold (the copies a topic makes do not count).
	ErrBatchTooLarge = sluicetype.ErrBatchTooLarge
	// ErrInvalidName reports an entity name outside the allowed set.
	ErrInvalidName = sluicetype.ErrInvalidName
	// ErrInvalidArgument reports a parameter out of range, or an operation
	// that does not apply (settling a message received and deleted).
	ErrInvalidArgument = sluicetype.ErrInvalidArgument
	// ErrClosed reports a call on a closed client.
	ErrClosed = sluicetype.ErrClosed
	// ErrOutcomeUnknown reports a write that may or may not have been
	// applied: the database connection broke before its reply was read.
	// A send retried with the same MessageID to an entity with duplicate
	// detection is stored once, a settle retried applies or fails with
	// ErrLockLost; a send without duplicate detection, or a publish, may
	// be stored twice (see sluicetype.ErrOutcomeUnknown).
	ErrOutcomeUnknown = sluicetype.ErrOutcomeUnknown
)

// Client is the entry point of the queue API: it manages entities and
// hands out senders, receivers and processors. It is safe for concurrent
// use; open one per process and share it.
type Client struct {
	st      store.Store
	limits  store.Limits
	log     *slog.Logger
	closeFn func() error

	// partitions is the number of stream partitions; partitionsChecked
	// once it matched the database's.
	partitions int32
	// sharedStreams: several processes may pull the tenant's partitions.
	sharedStreams bool
	// positionedReads: stream caches may keep several windows.
	positionedReads bool

	// observers are the observers of message events (ObserveMessages),
	// copied on change; nil: none. obsMu serialises changes.
	observers atomic.Pointer[[]*messageObserver]
	obsMu     sync.Mutex

	// instr intercepts operations (Instrument); nil: none.
	instr atomic.Pointer[instrumentation]

	// spreadFrom is where this client's unkeyed messages begin their
	// turns over the partitions of partitioned queues (random, so that
	// clients write to different partitions at once).
	spreadFrom uint32
	// acceptNext is the partition where the next AcceptNextSession of a
	// partitioned queue begins.
	acceptNext atomic.Uint32

	mu                sync.Mutex
	entities          map[string]cachedEntity
	partitionsChecked bool
	processors        map[*stream.Node]struct{}
	// closed is set, and closing closed, by Close: a processor's Start
	// after it fails, and one in progress is cut short.
	closed  bool
	closing chan struct{}
	// starting counts the processor Starts in progress, which Close
	// waits for; closeMu makes a second Close wait for the first.
	starting sync.WaitGroup
	closeMu  sync.Mutex
}

// entityCacheTTL is how long a client trusts the entity settings it read:
// a change another process makes shows within this time.
const entityCacheTTL = 5 * time.Second

type cachedEntity struct {
	e  entity
	at time.Time
}

// Open opens the database a DSN names (see OpenBackend, and import the
// DSN's backend package) and returns a client for the tenant that opts
// names. Close releases the database.
func Open(ctx context.Context, dsn string, opts *Options) (*Client, error) {
	opts = opts.orDefault()
	b, err := OpenBackend(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	return clientClosing(b, opts)
}

// OpenDB returns a client, for the tenant that opts names, on the
// application's pool (see OpenBackendDB), migrating it unless
// opts.SkipMigrations. Close stops the client and leaves db open.
func OpenDB(ctx context.Context, db *sql.DB, opts *Options) (*Client, error) {
	opts = opts.orDefault()
	b, err := OpenBackendDB(ctx, db, opts)
	if err != nil {
		return nil, err
	}
	return clientClosing(b, opts)
}

// clientClosing returns a client on a backend Open or OpenDB opened,
// which the client's Close closes.
func clientClosing(b store.Backend, opts *Options) (*Client, error) {
	c, err := NewClient(b, opts)
	if err != nil {
		b.Close()
		return nil, err
	}
	c.closeFn = b.Close
	return c, nil
}

// NewClient returns a client over a backend the caller opened (and
// closes), for the tenant that opts names; several clients may share one
// backend.
func NewClient(b store.Backend, opts *Options) (*Client, error) {
	opts = opts.orDefault()
	t := store.Tenant{Service: opts.Service, Provider: opts.Provider}
	if t.Service == "" {
		t.Service = DefaultService
	}
	if t.Provider == "" {
		t.Provider = DefaultProvider
	}
	st, err := b.Store(t)
	if err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	partitions := opts.StreamPartitions
	if partitions <= 0 {
		partitions = stream.DefaultPartitions
	}
	return &Client{
		st: st, limits: opts.Limits.WithDefaults(), log: log, partitions: partitions, spreadFrom: rand.Uint32(),
		sharedStreams:   b.Features().SharedStreams,
		positionedReads: b.Features().PositionedReads,
		closeFn:         func() error { return nil },
		entities:        make(map[string]cachedEntity),
		processors:      make(map[*stream.Node]struct{}),
		closing:         make(chan struct{}),
	}, nil
}

// Tenant names used when Options leaves them empty.
const (
	DefaultService  = "default"
	DefaultProvider = "default"
)

// StreamPartitions is the number of partitions the client hashes streams
// onto (Options.StreamPartitions; see PartitionOf).
func (c *Client) StreamPartitions() int32 { return c.partitions }

// Close stops the stream processors of the client still running (and
// cuts short those starting), as their Stop does with a context that has
// ended (the deliveries in progress are cut short and come again, and
// each processor stores its progress and gives back its partitions),
// then releases the database if Open opened it. Calls after Close fail
// with ErrClosed. Do not call it from a stream handler of the client's:
// it waits for the handler's processor to stop.
func (c *Client) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	c.mu.Lock()
	if !c.closed && c.closing != nil { // nil in a zero Client
		close(c.closing)
	}
	c.closed = true
	c.mu.Unlock()
	c.starting.Wait()
	c.mu.Lock()
	nodes := slices.Collect(maps.Keys(c.processors))
	clear(c.processors)
	c.mu.Unlock()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, n := range nodes {
		_ = n.Stop(ended) // it reports nothing it has not logged
	}
	return c.closeFn()
}

// entity returns an entity of any kind, from the cache when fresh.
func (c *Client) entity(ctx context.Context, name string) (entity, error) {
	name = canonical(name)
	c.mu.Lock()
	ce, ok := c.entities[name]
	c.mu.Unlock()
	if ok && time.Since(ce.at) < entityCacheTTL {
		return ce.e, nil
	}
	s, err := c.st.GetQueue(ctx, name)
	if err != nil {
		return entity{}, err
	}
	e, err := decodeEntity(s)
	if err != nil {
		return entity{}, err
	}
	if e.kind == kindPartition {
		// A partitioned queue's partition is reached through its queue.
		return entity{}, fmt.Errorf("sluice: %q: %w", name, errPartitionName)
	}
	c.remember(e)
	return e, nil
}

// remember caches settings of an entity just read (a partition's are
// never asked for by name, so never cached).
func (c *Client) remember(e entity) {
	if e.kind == kindPartition {
		return
	}
	c.mu.Lock()
	c.entities[e.name] = cachedEntity{e: e, at: time.Now()}
	c.mu.Unlock()
}

// properties returns the settings of an entity messages can be received
// from (a queue or subscription), from the cache when fresh.
func (c *Client) properties(ctx context.Context, name string) (QueueProperties, error) {
	e, err := c.entity(ctx, name)
	if err != nil {
		return QueueProperties{}, err
	}
	if e.kind == kindTopic {
		return QueueProperties{}, fmt.Errorf("%q is a topic: receive from one of its subscriptions (SubscriptionPath): %w", name, ErrInvalidArgument)
	}
	return e.props, nil
}

func (c *Client) forget(name string) {
	c.mu.Lock()
	delete(c.entities, canonical(name))
	c.mu.Unlock()
}

// forgetAll empties the cache of entity settings.
func (c *Client) forgetAll() {
	c.mu.Lock()
	clear(c.entities)
	c.mu.Unlock()
}

// settleErr turns a settle's per-message result into the call's error.
func settleErr(op string, res []store.SettleResult, err error) error {
	if err != nil {
		return fmt.Errorf("sluice: %s: %w", op, err)
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("sluice: %s: %w", op, r.Err)
		}
	}
	return nil
}

// errInvalid returns an ErrInvalidArgument with an operation prefix.
func errInvalid(op, format string, args ...any) error {
	return fmt.Errorf("sluice: %s: %s: %w", op, fmt.Sprintf(format, args...), ErrInvalidArgument)
}
