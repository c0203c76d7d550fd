package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
)

// maxList is the most names one listing call returns, the server's
// limit.
const maxList = 1000

// listMax checks a listing's max before any call: the server would take
// 0 as its default and cannot be sent more than an int32.
func listMax(op string, max int) (int32, error) {
	if max < 1 || max > maxList {
		return 0, fmt.Errorf("sluice: %s: max %d: must be between 1 and %d: %w", op, max, maxList, sluice.ErrInvalidArgument)
	}
	return int32(max), nil
}

// ListQueuesWithPrefix returns up to max (1 to 1,000) queues whose names
// start with prefix, in name order after the name after, as the
// library's does; the server reads only the names with the prefix that
// the key may see.
func (c *Client) ListQueuesWithPrefix(ctx context.Context, prefix, after string, max int) ([]sluice.QueueInfo, error) {
	n, err := listMax("list queues", max)
	if err != nil {
		return nil, err
	}
	res, err := call(ctx, c.entities.ListQueues, &sluicev1.ListQueuesRequest{Prefix: prefix, After: after, Max: n})
	if err != nil {
		return nil, err
	}
	out := make([]sluice.QueueInfo, len(res.Queues))
	for i, q := range res.Queues {
		out[i] = apiconv.FromQueue(q)
	}
	return out, nil
}

// ListTopicsWithPrefix returns up to max (1 to 1,000) topics whose names
// start with prefix, in name order after the name after, as the
// library's does.
func (c *Client) ListTopicsWithPrefix(ctx context.Context, prefix, after string, max int) ([]sluice.TopicInfo, error) {
	n, err := listMax("list topics", max)
	if err != nil {
		return nil, err
	}
	res, err := call(ctx, c.entities.ListTopics, &sluicev1.ListTopicsRequest{Prefix: prefix, After: after, Max: n})
	if err != nil {
		return nil, err
	}
	out := make([]sluice.TopicInfo, len(res.Topics))
	for i, t := range res.Topics {
		out[i] = apiconv.FromTopic(t)
	}
	return out, nil
}

// ListSubscriptionsWithPrefix returns up to max (1 to 1,000)
// subscriptions of a topic whose names start with prefix, in name order
// after the name after ("" for the first page). As the library's, it
// returns none, and no error, for a topic that does not exist.
func (c *Client) ListSubscriptionsWithPrefix(ctx context.Context, topic, prefix, after string, max int) ([]sluice.SubscriptionInfo, error) {
	n, err := listMax("list subscriptions", max)
	if err != nil {
		return nil, err
	}
	res, err := call(ctx, c.entities.ListSubscriptions, &sluicev1.ListSubscriptionsRequest{Topic: topic, Prefix: prefix, After: after, Max: n})
	if errors.Is(err, sluice.ErrEntityNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]sluice.SubscriptionInfo, len(res.Subscriptions))
	for i, s := range res.Subscriptions {
		out[i] = apiconv.FromSubscription(s)
	}
	return out, nil
}

// ListMessageEntities returns up to max (1 to 1,000) queues and
// subscriptions whose names (paths, for subscriptions) start with
// prefix, in name order after the name after, as the library's does.
// The server answers it with ListEntityStats, which also counts each
// entity's messages: a caller that wants the counts should call that.
func (c *Client) ListMessageEntities(ctx context.Context, prefix, after string, max int) ([]sluice.MessageEntity, error) {
	n, err := listMax("list message entities", max)
	if err != nil {
		return nil, err
	}
	res, err := call(ctx, c.entities.ListEntityStats, &sluicev1.ListEntityStatsRequest{Prefix: prefix, After: after, Max: n})
	if err != nil {
		return nil, err
	}
	out := make([]sluice.MessageEntity, len(res.Entities))
	for i, e := range res.Entities {
		out[i] = sluice.MessageEntity{Path: e.Entity, Topic: e.Topic}
	}
	return out, nil
}
