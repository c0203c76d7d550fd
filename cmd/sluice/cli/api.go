package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/store"
)

// sluiceAPI is what the operator commands need of sluice. The library's
// *sluice.Client (on a database) and package client's *client.Client
// (through a server) have the same methods, so each command is written
// once: the adapters library and remote only return interfaces where the
// two return their own sender and receiver types, and list every
// entity's counts each its own way.
type sluiceAPI interface {
	CreateQueueForwarding(ctx context.Context, name string, props *sluice.QueueProperties, forwardTo string) (sluice.QueueInfo, error)
	GetQueue(ctx context.Context, name string) (sluice.QueueInfo, error)
	ListQueues(ctx context.Context, after string, max int) ([]sluice.QueueInfo, error)
	UpdateQueueForwarding(ctx context.Context, name string, props sluice.QueueProperties, forwardTo string) (sluice.QueueInfo, error)
	DeleteQueue(ctx context.Context, name string) error
	GetQueueStats(ctx context.Context, name string) (sluice.QueueStats, error)

	CreateTopic(ctx context.Context, name string, props *sluice.TopicProperties) (sluice.TopicInfo, error)
	GetTopic(ctx context.Context, name string) (sluice.TopicInfo, error)
	ListTopics(ctx context.Context, after string, max int) ([]sluice.TopicInfo, error)
	UpdateTopic(ctx context.Context, name string, props sluice.TopicProperties) (sluice.TopicInfo, error)
	DeleteTopic(ctx context.Context, name string) error

	CreateSubscription(ctx context.Context, topic, name string, props *sluice.SubscriptionProperties, rules ...sluice.Rule) (sluice.SubscriptionInfo, error)
	GetSubscription(ctx context.Context, topic, name string) (sluice.SubscriptionInfo, error)
	ListSubscriptions(ctx context.Context, topic string) ([]sluice.SubscriptionInfo, error)
	UpdateSubscriptionForwarding(ctx context.Context, topic, name string, props sluice.SubscriptionProperties) (sluice.SubscriptionInfo, error)
	DeleteSubscription(ctx context.Context, topic, name string) error
	CreateRule(ctx context.Context, topic, subscription string, r sluice.Rule) error
	DeleteRule(ctx context.Context, topic, subscription, rule string) error

	ResubmitDeadLetters(ctx context.Context, entity string, opts *sluice.ResubmitOptions) (int, error)
	PurgeDeadLetters(ctx context.Context, entity string) (int64, error)
	DeleteDeadLetters(ctx context.Context, entity string, seqs ...int64) (int64, error)
	DeadLetterReasons(ctx context.Context, entity string) (map[string]int64, error)
	DeleteMessages(ctx context.Context, entity string, opts *sluice.DeleteOptions) (int64, error)
	PurgeMessages(ctx context.Context, entity string, enqueuedBefore time.Time) (int64, error)
	ClusterStatus(ctx context.Context) (sluice.ClusterStatus, error)

	NewSender(entity string) (batchSender, error)
	NewReceiver(entity string, opts *sluice.ReceiverOptions) (peekReceiver, error)
	AcceptSession(ctx context.Context, queue, sessionID string, opts *sluice.ReceiverOptions) (sessionReceiver, error)
	AcceptNextSession(ctx context.Context, queue string, opts *sluice.ReceiverOptions) (sessionReceiver, error)
	ResumeSession(queue, sessionID, lockToken string, opts *sluice.ReceiverOptions) (sessionReceiver, error)

	// publish publishes events and returns the stream's partition and
	// their positions.
	publish(ctx context.Context, id sluice.StreamID, events ...sluice.Event) (int32, []int64, error)
	TailStream(ctx context.Context, namespace, key string, each func(*sluice.StreamEvent) error, opts *sluice.TailOptions) error
	Subscribe(ctx context.Context, id sluice.StreamID, consumer string, from sluice.StartPosition) (sluice.StreamSubscription, error)
	StreamSubscriptions(ctx context.Context, id sluice.StreamID) ([]sluice.StreamSubscription, error)
	GetStreamSubscription(ctx context.Context, subscription string) (sluice.StreamSubscription, error)
	Unsubscribe(ctx context.Context, subscription string) error
	ClearFault(ctx context.Context, subscription string) error
	ParkedEvents(ctx context.Context, subscription string, max int) ([]sluice.ParkedEvent, error)
	SetStreamRetention(ctx context.Context, namespace string, r sluice.StreamRetention) error
	RepositionStreamSubscription(ctx context.Context, subscription string, to sluice.StartPosition, opts *sluice.RepositionOptions) (sluice.StreamReposition, error)
	// consumerStats describes the partitions a server's node of a
	// consumer pulls (only through a server).
	consumerStats(ctx context.Context, consumer string) (string, []sluice.StreamPartitionStats, error)

	// newStreamProcessor returns a processor with default options.
	newStreamProcessor() streamProcessor
	// throughput is the server's rates of messages (only through a
	// server).
	throughput(ctx context.Context) (time.Duration, []client.ThroughputSample, error)
	// entityHistory, consumerLagHistory and subscriptionLagHistory are
	// what a server sampled over the last hour, with its interval (only
	// through a server).
	entityHistory(ctx context.Context, entity string) (time.Duration, []client.EntitySample, error)
	consumerLagHistory(ctx context.Context, consumer string, max int) (time.Duration, []client.ConsumerLagHistory, error)
	subscriptionLagHistory(ctx context.Context, subscription string) (time.Duration, client.SubscriptionLagHistory, error)

	// allStats lists every queue and subscription with its counts, in
	// the order of their paths.
	allStats(ctx context.Context) ([]client.EntityStats, error)
	Close() error
}

type batchSender interface {
	SendBatch(ctx context.Context, msgs []*sluice.Message) ([]int64, error)
	CancelScheduled(ctx context.Context, seqs ...int64) error
}

// messageSource receives and settles messages: a queue's or
// subscription's receiver, or a session's.
type messageSource interface {
	Receive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error)
	TryReceive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error)
	ReceiveDeferred(ctx context.Context, seqs ...int64) ([]*sluice.ReceivedMessage, error)
	Complete(ctx context.Context, m *sluice.ReceivedMessage) error
	CompleteBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error
	Abandon(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.AbandonOptions) error
	DeadLetter(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.DeadLetterOptions) error
	Defer(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.DeferOptions) error
}

type peekReceiver interface {
	messageSource
	Peek(ctx context.Context, max int, opts *sluice.PeekOptions) ([]*sluice.ReceivedMessage, error)
	Browse(ctx context.Context, max int, opts *sluice.BrowseOptions) (sluice.BrowsePage, error)
	RenewLock(ctx context.Context, m *sluice.ReceivedMessage) error
}

type sessionReceiver interface {
	messageSource
	SessionID() string
	LockToken() string
	LockedUntil() time.Time
	RenewSessionLock(ctx context.Context) error
	SessionState(ctx context.Context) ([]byte, error)
	SetSessionState(ctx context.Context, state []byte) error
	Close(ctx context.Context) error
}

// library is the library on a database the command opened.
type library struct {
	*sluice.Client
	backend    store.Backend
	st         store.Store // the tenant's, to follow partition logs
	partitions int32       // set for stream commands
}

// Close closes the database (the client does not own it).
func (l *library) Close() error { return l.backend.Close() }

func (l *library) NewSender(entity string) (batchSender, error) {
	s, err := l.Client.NewSender(entity)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (l *library) NewReceiver(entity string, opts *sluice.ReceiverOptions) (peekReceiver, error) {
	r, err := l.Client.NewReceiver(entity, opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (l *library) AcceptSession(ctx context.Context, queue, sessionID string, opts *sluice.ReceiverOptions) (sessionReceiver, error) {
	s, err := l.Client.AcceptSession(ctx, queue, sessionID, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (l *library) ResumeSession(queue, sessionID, lockToken string, opts *sluice.ReceiverOptions) (sessionReceiver, error) {
	s, err := l.Client.ResumeSession(queue, sessionID, lockToken, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (l *library) AcceptNextSession(ctx context.Context, queue string, opts *sluice.ReceiverOptions) (sessionReceiver, error) {
	s, err := l.Client.AcceptNextSession(ctx, queue, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// allStats lists the queues, then the topics' subscriptions, and counts
// each; one deleted meanwhile is left out.
func (l *library) allStats(ctx context.Context) ([]client.EntityStats, error) {
	var out []client.EntityStats
	add := func(path, topic string) error {
		st, err := l.GetQueueStats(ctx, path)
		switch {
		case errors.Is(err, sluice.ErrEntityNotFound):
			return nil
		case err != nil:
			return err
		}
		out = append(out, client.EntityStats{Entity: path, Topic: topic, QueueStats: st})
		return nil
	}
	queues, err := allQueues(ctx, l)
	if err != nil {
		return nil, err
	}
	for _, q := range queues {
		if err := add(q.Name, ""); err != nil {
			return nil, err
		}
	}
	topics, err := allTopics(ctx, l)
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		subs, err := l.ListSubscriptions(ctx, t.Name)
		if err != nil && !errors.Is(err, sluice.ErrEntityNotFound) {
			return nil, err
		}
		for _, s := range subs {
			if err := add(sluice.SubscriptionPath(t.Name, s.Name), t.Name); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(out, func(a, b client.EntityStats) int { return strings.Compare(a.Entity, b.Entity) })
	return out, nil
}

func (l *library) publish(ctx context.Context, id sluice.StreamID, events ...sluice.Event) (int32, []int64, error) {
	pos, err := l.Publish(ctx, id, events...)
	return sluice.PartitionOf(id, l.partitions), pos, err
}

// consumerStats is the server's: a library has no node of its own.
func (l *library) consumerStats(context.Context, string) (string, []sluice.StreamPartitionStats, error) {
	return "", nil, fmt.Errorf("a consumer's stats are those of a server's node of it: use --server: %w", sluice.ErrInvalidArgument)
}

func (l *library) newStreamProcessor() streamProcessor { return l.NewStreamProcessor(nil) }

// throughput is a server's: one command's process keeps no history of
// rates.
func (l *library) throughput(context.Context) (time.Duration, []client.ThroughputSample, error) {
	return 0, nil, fmt.Errorf("throughput is counted by a server: use --server: %w", sluice.ErrInvalidArgument)
}

// errHistory says where history is kept: a library samples nothing.
var errHistory = fmt.Errorf("history is kept by a server, which samples it while it runs: use --server: %w", sluice.ErrInvalidArgument)

func (l *library) entityHistory(context.Context, string) (time.Duration, []client.EntitySample, error) {
	return 0, nil, errHistory
}

func (l *library) consumerLagHistory(context.Context, string, int) (time.Duration, []client.ConsumerLagHistory, error) {
	return 0, nil, errHistory
}

func (l *library) subscriptionLagHistory(context.Context, string) (time.Duration, client.SubscriptionLagHistory, error) {
	return 0, client.SubscriptionLagHistory{}, errHistory
}

// remote is a server, through package client.
type remote struct{ *client.Client }

func (r remote) consumerStats(ctx context.Context, consumer string) (string, []sluice.StreamPartitionStats, error) {
	return r.ConsumerStats(ctx, consumer)
}

func (r remote) newStreamProcessor() streamProcessor { return r.NewStreamProcessor(nil) }

func (r remote) throughput(ctx context.Context) (time.Duration, []client.ThroughputSample, error) {
	return r.Throughput(ctx)
}

func (r remote) entityHistory(ctx context.Context, entity string) (time.Duration, []client.EntitySample, error) {
	return r.EntityHistory(ctx, entity)
}

func (r remote) consumerLagHistory(ctx context.Context, consumer string, max int) (time.Duration, []client.ConsumerLagHistory, error) {
	return r.ConsumerLagHistory(ctx, consumer, max)
}

func (r remote) subscriptionLagHistory(ctx context.Context, subscription string) (time.Duration, client.SubscriptionLagHistory, error) {
	return r.SubscriptionLagHistory(ctx, subscription)
}

func (r remote) publish(ctx context.Context, id sluice.StreamID, events ...sluice.Event) (int32, []int64, error) {
	return r.PublishPartition(ctx, id, events...)
}

func (r remote) NewSender(entity string) (batchSender, error) {
	s, err := r.Client.NewSender(entity)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (r remote) NewReceiver(entity string, opts *sluice.ReceiverOptions) (peekReceiver, error) {
	rc, err := r.Client.NewReceiver(entity, opts)
	if err != nil {
		return nil, err
	}
	return rc, nil
}

func (r remote) AcceptSession(ctx context.Context, queue, sessionID string, opts *sluice.ReceiverOptions) (sessionReceiver, error) {
	s, err := r.Client.AcceptSession(ctx, queue, sessionID, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (r remote) ResumeSession(queue, sessionID, lockToken string, opts *sluice.ReceiverOptions) (sessionReceiver, error) {
	s, err := r.Client.ResumeSession(queue, sessionID, lockToken, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (r remote) AcceptNextSession(ctx context.Context, queue string, opts *sluice.ReceiverOptions) (sessionReceiver, error) {
	s, err := r.Client.AcceptNextSession(ctx, queue, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// allStats pages through the server's listing.
func (r remote) allStats(ctx context.Context) ([]client.EntityStats, error) {
	return allPages(func(after string) ([]client.EntityStats, error) { return r.ListEntityStats(ctx, after, listPage) },
		func(e client.EntityStats) string { return e.Entity })
}

// listPage is how many entities one listing call asks for.
const listPage = 100

// allPages gathers the pages list returns, each after the key of the
// last item before, until an empty one.
func allPages[T any](list func(after string) ([]T, error), key func(T) string) ([]T, error) {
	var all []T
	after := ""
	for {
		page, err := list(after)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return all, nil
		}
		all, after = append(all, page...), key(page[len(page)-1])
	}
}

func allQueues(ctx context.Context, a sluiceAPI) ([]sluice.QueueInfo, error) {
	return allPages(func(after string) ([]sluice.QueueInfo, error) { return a.ListQueues(ctx, after, listPage) },
		func(q sluice.QueueInfo) string { return q.Name })
}

func allTopics(ctx context.Context, a sluiceAPI) ([]sluice.TopicInfo, error) {
	return allPages(func(after string) ([]sluice.TopicInfo, error) { return a.ListTopics(ctx, after, listPage) },
		func(t sluice.TopicInfo) string { return t.Name })
}
