package client

import (
	"context"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
)

// RepositionStreamSubscription moves a subscription to the head
// (sluice.FromNow), to the oldest event retention kept (FromBeginning)
// or to a position (FromPosition; opts.Partition names the partition of
// a namespace subscription), clears its fault and records the move, as
// sluice.Client.RepositionStreamSubscription does. The server records
// its API key's name as who repositioned it (opts.By is not sent). It
// needs manage on the subscription's namespace.
func (c *Client) RepositionStreamSubscription(ctx context.Context, subscription string, to sluice.StartPosition, opts *sluice.RepositionOptions) (sluice.StreamReposition, error) {
	target, position := apiconv.ToRepositionTarget(to)
	req := &sluicev1.RepositionStreamSubscriptionRequest{Subscription: subscription, Target: target, Position: position}
	if opts != nil && target == sluicev1.RepositionTarget_REPOSITION_TARGET_POSITION {
		req.Partition = opts.Partition
	}
	res, err := call(ctx, c.streams.RepositionStreamSubscription, req)
	if err != nil {
		return sluice.StreamReposition{}, err
	}
	if r := apiconv.FromStreamReposition(res.GetReposition()); r != nil {
		return *r, nil
	}
	return sluice.StreamReposition{}, nil
}

// ConsumerStats describes the partitions the server's stream node of a
// consumer pulls while a Consume stream of it is open there: for each,
// the checkpoint the node proposes and the one stored, the cache's
// windows with each one's room and wanted records, their splits,
// merges, resets and rehydration reads, the reads avoided and
// duplicated, the records reclaimed and the retention gaps met, and the
// subscriptions with the window each reads (Window -1: none) and its
// cursor, as sluice.StreamProcessor.Stats shows them. It returns the
// node's id. It needs manage on the consumer.
func (c *Client) ConsumerStats(ctx context.Context, consumer string) (string, []sluice.StreamPartitionStats, error) {
	res, err := call(ctx, c.streams.GetConsumerStats, &sluicev1.GetConsumerStatsRequest{Consumer: consumer})
	if err != nil {
		return "", nil, err
	}
	out := make([]sluice.StreamPartitionStats, len(res.Partitions))
	for i, ps := range res.Partitions {
		out[i] = apiconv.FromConsumerPartitionStats(ps)
	}
	return res.Node, out, nil
}
