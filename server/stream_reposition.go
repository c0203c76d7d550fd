package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"connectrpc.com/connect/v2"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/store"
)

// RepositionStreamSubscription moves a subscription, which needs manage
// on its namespace; the reposition records the key's name.
func (h *streams) RepositionStreamSubscription(ctx context.Context, req *sluicev1.RepositionStreamSubscriptionRequest) (*sluicev1.RepositionStreamSubscriptionResponse, error) {
	const op = "reposition stream subscription"
	sub, err := h.subscriptionInNamespace(ctx, Manage, op, req.Subscription)
	if err != nil {
		return nil, err
	}
	to, err := apiconv.RepositionTarget(req.Target, req.Position)
	if err != nil {
		return nil, h.s.fail(op, err)
	}
	if req.Target != sluicev1.RepositionTarget_REPOSITION_TARGET_POSITION && req.Partition != 0 {
		return nil, apierr.Invalid(op + ": a partition needs REPOSITION_TARGET_POSITION")
	}
	if sub.Stream.Key != "" && req.Partition != 0 && req.Partition != sub.Partition {
		return nil, apierr.Invalid(fmt.Sprintf("%s: the subscription reads partition %d only", op, sub.Partition))
	}
	var by string
	if k, _ := ctx.Value(keyCtx{}).(*authKey); k != nil {
		by = k.Name
	}
	r, err := h.s.c.RepositionStreamSubscription(ctx, req.Subscription, to, &sluice.RepositionOptions{Partition: req.Partition, By: by})
	if err != nil {
		return nil, h.s.fail(op, err)
	}
	return &sluicev1.RepositionStreamSubscriptionResponse{Reposition: apiconv.StreamReposition(&r)}, nil
}

// subscriptionInNamespace returns a subscription after checking that the
// call may act on its namespace. A namespace subscription's guessable
// handle is refused before the lookup when the key may act on no
// namespace it could name.
func (h *streams) subscriptionInNamespace(ctx context.Context, a Action, op, id string) (sluice.StreamSubscription, error) {
	if id == "" {
		return sluice.StreamSubscription{}, apierr.Invalid(op + ": no subscription")
	}
	if len(id) > store.MaxNameLen {
		return sluice.StreamSubscription{}, apierr.Invalid(fmt.Sprintf("%s: a subscription id is at most %d characters", op, store.MaxNameLen))
	}
	var namespaces []string
	for _, c := range stream.ImplicitConsumers(id) {
		namespaces = append(namespaces, strings.TrimSuffix(strings.TrimPrefix(id, "ns/"), "/"+c))
	}
	if namespaces != nil {
		if err := h.s.authorizeAny(ctx, a, namespaces, "the namespace of "+strconv.Quote(id)); err != nil {
			return sluice.StreamSubscription{}, err
		}
	}
	sub, err := h.s.c.GetStreamSubscription(ctx, id)
	if err != nil {
		return sluice.StreamSubscription{}, h.s.fail(op, err)
	}
	if err := h.s.authorize(ctx, a, sub.Stream.Namespace); err != nil {
		if namespaces != nil {
			return sluice.StreamSubscription{}, h.s.fail(op, fmt.Errorf("sluice: subscription %q: %w", id, sluice.ErrSubscriptionNotFound))
		}
		return sluice.StreamSubscription{}, err
	}
	return sub, nil
}

// GetConsumerStats describes the partitions the server's node of a
// consumer pulls; it needs manage on the consumer.
func (h *streams) GetConsumerStats(ctx context.Context, req *sluicev1.GetConsumerStatsRequest) (*sluicev1.GetConsumerStatsResponse, error) {
	if err := store.ValidateName("consumer", req.Consumer); err != nil {
		return nil, h.s.fail("get consumer stats", err)
	}
	if err := h.s.authorize(ctx, Manage, req.Consumer); err != nil {
		return nil, err
	}
	h.mu.Lock()
	rc := h.consumers[req.Consumer]
	running := rc != nil && !rc.stopping && isClosed(rc.started) && rc.startErr == nil
	h.mu.Unlock()
	if !running {
		return nil, apierr.New(connect.CodeFailedPrecondition, "NO_CONSUMER",
			fmt.Sprintf("get consumer stats: no Consume stream of consumer %q is open on this server", req.Consumer))
	}
	out := &sluicev1.GetConsumerStatsResponse{Node: rc.proc.NodeID()}
	for _, ps := range rc.proc.Stats() {
		out.Partitions = append(out.Partitions, apiconv.ConsumerPartitionStats(ps))
	}
	return out, nil
}
