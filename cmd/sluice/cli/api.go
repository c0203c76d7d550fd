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

// sluiceAPI is what the operator commands need of sluice: the shape the
// library's *sluice.Client (on a database) and package client's
// *client.Client (through a server) share, and the few operations where
// they differ. The adapters library and remote add only those.
type sluiceAPI interface {
	sluice.API

	// publish publishes events and returns the stream's partition and
	// their positions.
	publish(ctx context.Context, id sluice.StreamID, events ...sluice.Event) (int32, []int64, error)
	// consumerStats describes the partitions a server's node of a
	// consumer pulls (only through a server).
	consumerStats(ctx context.Context, consumer string) (string, []sluice.StreamPartitionStats, error)
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
}

// library is the library on a database the command opened.
type library struct {
	*sluice.Client
	backend store.Backend
}

// Close closes the database (the client does not own it).
func (l *library) Close() error { return l.backend.Close() }

// allStats pages through the queues and subscriptions and counts each;
// one deleted meanwhile is left out.
func (l *library) allStats(ctx context.Context) ([]client.EntityStats, error) {
	entities, err := allPages(func(after string) ([]sluice.MessageEntity, error) {
		return l.ListMessageEntities(ctx, "", after, listPage)
	}, func(e sluice.MessageEntity) string { return e.Path })
	if err != nil {
		return nil, err
	}
	var out []client.EntityStats
	for _, e := range entities {
		st, err := l.GetQueueStats(ctx, e.Path)
		switch {
		case errors.Is(err, sluice.ErrEntityNotFound):
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, client.EntityStats{Entity: e.Path, Topic: e.Topic, QueueStats: st})
	}
	slices.SortFunc(out, func(a, b client.EntityStats) int { return strings.Compare(a.Entity, b.Entity) })
	return out, nil
}

func (l *library) publish(ctx context.Context, id sluice.StreamID, events ...sluice.Event) (int32, []int64, error) {
	pos, err := l.Publish(ctx, id, events...)
	return sluice.PartitionOf(id, l.StreamPartitions()), pos, err
}

// consumerStats is the server's: a library has no node of its own.
func (l *library) consumerStats(context.Context, string) (string, []sluice.StreamPartitionStats, error) {
	return "", nil, fmt.Errorf("a consumer's stats are those of a server's node of it: use --server: %w", sluice.ErrInvalidArgument)
}

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
