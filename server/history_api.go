package server

import (
	"context"
	"fmt"
	"time"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
	"github.com/sluicehq/sluice/store"
)

// Bounds of GetStreamLagHistory's consumer series.
const (
	defaultLagSeries = 10
	maxLagSeries     = maxHistoryConsumers
)

// GetEntityHistory returns the history of a queue or subscription; it
// needs manage on it, as GetEntityStats does. An entity without a ring
// is looked up: NOT_FOUND when it does not exist (or INVALID_NAME), else
// no samples.
func (h *stats) GetEntityHistory(ctx context.Context, req *sluicev1.GetEntityHistoryRequest) (*sluicev1.GetEntityHistoryResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Entity); err != nil {
		return nil, err
	}
	samples, ok := h.s.hist.entity(req.Entity)
	if !ok {
		if _, err := h.s.c.GetQueueStats(ctx, req.Entity); err != nil {
			return nil, h.s.fail("entity history", err)
		}
	}
	out := &sluicev1.GetEntityHistoryResponse{Interval: apiconv.DurationPB(h.s.hist.interval),
		Samples: make([]*sluicev1.EntitySample, len(samples))}
	for i, s := range samples {
		out.Samples[i] = &sluicev1.EntitySample{At: apiconv.Timestamp(time.Unix(0, s.at)), Active: s.active, InFlight: s.inFlight,
			Scheduled: s.scheduled, Deferred: s.deferred, DeadLettered: s.deadLettered, Expired: s.expired,
			Sent: float64(s.sent), Received: float64(s.received), Settled: float64(s.settled)}
	}
	return out, nil
}

// GetStreamLagHistory returns the lag history of the consumers in their
// namespaces, or of one stream subscription; it needs manage on
// ClusterEntity, as GetClusterStatus does (which shows every lag).
func (h *stats) GetStreamLagHistory(ctx context.Context, req *sluicev1.GetStreamLagHistoryRequest) (*sluicev1.GetStreamLagHistoryResponse, error) {
	if err := h.s.authorize(ctx, Manage, ClusterEntity); err != nil {
		return nil, err
	}
	const op = "stream lag history"
	if len(req.Subscription) > store.MaxNameLen {
		return nil, apierr.Invalid(fmt.Sprintf("%s: a subscription id is at most %d characters", op, store.MaxNameLen))
	}
	if req.Consumer != "" {
		if err := store.ValidateName("consumer", req.Consumer); err != nil {
			return nil, h.s.fail(op, err)
		}
	}
	if req.Consumer != "" && req.Subscription != "" {
		return nil, apierr.Invalid(op + ": a consumer and a subscription: name one or neither")
	}
	max := int(req.Max)
	switch {
	case req.Max == 0:
		max = defaultLagSeries
	case req.Max < 0 || req.Max > maxLagSeries:
		return nil, apierr.Invalid(fmt.Sprintf("%s: max %d: want 1 to %d", op, req.Max, maxLagSeries))
	}
	out := &sluicev1.GetStreamLagHistoryResponse{Interval: apiconv.DurationPB(h.s.hist.interval)}
	if req.Subscription != "" {
		sub, samples, ok := h.s.hist.subscription(req.Subscription)
		if !ok {
			found, err := h.s.c.GetStreamSubscription(ctx, req.Subscription)
			if err != nil {
				return nil, h.s.fail(op, err)
			}
			sub = streamSubscription{found.Consumer, found.Stream.Namespace, found.Stream.Key}
		}
		out.Subscription = &sluicev1.SubscriptionLagHistory{Id: req.Subscription, Consumer: sub.consumer, Namespace: sub.namespace,
			Key: sub.key, Samples: lagSamples(samples)}
		return out, nil
	}
	for _, c := range h.s.hist.consumerLags(req.Consumer, max) {
		out.Consumers = append(out.Consumers, &sluicev1.ConsumerLagHistory{Group: c.group, Consumer: c.consumer, Namespace: c.namespace,
			Samples: lagSamples(c.samples)})
	}
	return out, nil
}

func lagSamples(samples []lagSample) []*sluicev1.LagSample {
	out := make([]*sluicev1.LagSample, len(samples))
	for i, s := range samples {
		out[i] = &sluicev1.LagSample{At: apiconv.Timestamp(time.Unix(0, s.at)), Lag: s.lag}
	}
	return out
}
