package server

import (
	"context"
	"errors"
	"math"
	"strings"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
)

// entities serves EntityService.
type entities struct{ s *Server }

// Listings: at most maxList entities a call, defaultList when unset.
const (
	defaultList = 100
	maxList     = 1000
)

func listMax(n int32) (int, error) {
	switch {
	case n == 0:
		return defaultList, nil
	case n < 0 || n > maxList:
		return 0, apierr.Invalid("max must be between 1 and 1000")
	}
	return int(n), nil
}

// mayForward checks that the call's key may send to an entity's
// forwarding target: forwarding sends every message on.
func (h *entities) mayForward(ctx context.Context, to string) error {
	if to == "" {
		return nil
	}
	return h.s.authorize(ctx, Send, to)
}

func (h *entities) CreateQueue(ctx context.Context, req *sluicev1.CreateQueueRequest) (*sluicev1.CreateQueueResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Name); err != nil {
		return nil, err
	}
	if err := h.mayForward(ctx, req.ForwardTo); err != nil {
		return nil, err
	}
	props := apiconv.FromQueueProperties(req.Properties)
	var (
		q   sluice.QueueInfo
		err error
	)
	if req.ForwardTo != "" {
		q, err = h.s.c.CreateQueueForwarding(ctx, req.Name, &props, req.ForwardTo)
	} else {
		q, err = h.s.c.CreateQueue(ctx, req.Name, &props)
	}
	if err != nil {
		return nil, h.s.fail("create queue", err)
	}
	return &sluicev1.CreateQueueResponse{Queue: apiconv.Queue(q)}, nil
}

func (h *entities) GetQueue(ctx context.Context, req *sluicev1.GetQueueRequest) (*sluicev1.GetQueueResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Name); err != nil {
		return nil, err
	}
	q, err := h.s.c.GetQueue(ctx, req.Name)
	if err != nil {
		return nil, h.s.fail("get queue", err)
	}
	return &sluicev1.GetQueueResponse{Queue: apiconv.Queue(q)}, nil
}

func (h *entities) UpdateQueue(ctx context.Context, req *sluicev1.UpdateQueueRequest) (*sluicev1.UpdateQueueResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Name); err != nil {
		return nil, err
	}
	if err := h.mayForward(ctx, req.GetForwardTo()); err != nil {
		return nil, err
	}
	props := apiconv.FromQueueProperties(req.Properties)
	// An update that does not mention forwarding keeps it.
	update := h.s.c.UpdateQueue
	if req.ForwardTo != nil {
		update = func(ctx context.Context, name string, p sluice.QueueProperties) (sluice.QueueInfo, error) {
			return h.s.c.UpdateQueueForwarding(ctx, name, p, *req.ForwardTo)
		}
	}
	q, err := update(ctx, req.Name, props)
	if err != nil {
		return nil, h.s.fail("update queue", err)
	}
	return &sluicev1.UpdateQueueResponse{Queue: apiconv.Queue(q)}, nil
}

func (h *entities) DeleteQueue(ctx context.Context, req *sluicev1.DeleteQueueRequest) (*sluicev1.DeleteQueueResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Name); err != nil {
		return nil, err
	}
	if err := h.s.c.DeleteQueue(ctx, req.Name); err != nil {
		return nil, h.s.fail("delete queue", err)
	}
	h.s.m.forgetEntity(req.Name, "")
	return &sluicev1.DeleteQueueResponse{}, nil
}

func (h *entities) ListQueues(ctx context.Context, req *sluicev1.ListQueuesRequest) (*sluicev1.ListQueuesResponse, error) {
	n, err := listMax(req.Max)
	if err != nil {
		return nil, err
	}
	qs, err := listRanges(ctx, h.s.visibleRanges(ctx, 0, req.Prefix), req.After, n, h.s.c.ListQueuesWithPrefix,
		func(ctx context.Context, name string) (sluice.QueueInfo, bool, error) {
			return absent(h.s.c.GetQueue(ctx, name))
		},
		func(q sluice.QueueInfo) string { return q.Name })
	if err != nil {
		return nil, h.s.fail("list queues", err)
	}
	out := &sluicev1.ListQueuesResponse{}
	for _, q := range qs {
		out.Queues = append(out.Queues, apiconv.Queue(q))
	}
	return out, nil
}

func (h *entities) CreateTopic(ctx context.Context, req *sluicev1.CreateTopicRequest) (*sluicev1.CreateTopicResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Name); err != nil {
		return nil, err
	}
	props := apiconv.FromTopicProperties(req.Properties)
	t, err := h.s.c.CreateTopic(ctx, req.Name, &props)
	if err != nil {
		return nil, h.s.fail("create topic", err)
	}
	return &sluicev1.CreateTopicResponse{Topic: apiconv.Topic(t)}, nil
}

func (h *entities) GetTopic(ctx context.Context, req *sluicev1.GetTopicRequest) (*sluicev1.GetTopicResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Name); err != nil {
		return nil, err
	}
	t, err := h.s.c.GetTopic(ctx, req.Name)
	if err != nil {
		return nil, h.s.fail("get topic", err)
	}
	return &sluicev1.GetTopicResponse{Topic: apiconv.Topic(t)}, nil
}

func (h *entities) UpdateTopic(ctx context.Context, req *sluicev1.UpdateTopicRequest) (*sluicev1.UpdateTopicResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Name); err != nil {
		return nil, err
	}
	t, err := h.s.c.UpdateTopic(ctx, req.Name, apiconv.FromTopicProperties(req.Properties))
	if err != nil {
		return nil, h.s.fail("update topic", err)
	}
	return &sluicev1.UpdateTopicResponse{Topic: apiconv.Topic(t)}, nil
}

func (h *entities) DeleteTopic(ctx context.Context, req *sluicev1.DeleteTopicRequest) (*sluicev1.DeleteTopicResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Name); err != nil {
		return nil, err
	}
	if err := h.s.c.DeleteTopic(ctx, req.Name); err != nil {
		return nil, h.s.fail("delete topic", err)
	}
	h.s.m.forgetEntity(req.Name, sluice.SubscriptionPath(req.Name, ""))
	return &sluicev1.DeleteTopicResponse{}, nil
}

func (h *entities) ListTopics(ctx context.Context, req *sluicev1.ListTopicsRequest) (*sluicev1.ListTopicsResponse, error) {
	n, err := listMax(req.Max)
	if err != nil {
		return nil, err
	}
	ts, err := listRanges(ctx, h.s.visibleRanges(ctx, 0, req.Prefix), req.After, n, h.s.c.ListTopicsWithPrefix,
		func(ctx context.Context, name string) (sluice.TopicInfo, bool, error) {
			return absent(h.s.c.GetTopic(ctx, name))
		},
		func(t sluice.TopicInfo) string { return t.Name })
	if err != nil {
		return nil, h.s.fail("list topics", err)
	}
	out := &sluicev1.ListTopicsResponse{}
	for _, t := range ts {
		out.Topics = append(out.Topics, apiconv.Topic(t))
	}
	return out, nil
}

func (h *entities) subscription(s sluice.SubscriptionInfo) (*sluicev1.Subscription, error) {
	ps, err := apiconv.Subscription(s)
	if err != nil {
		return nil, h.s.fail("subscription", err)
	}
	return ps, nil
}

func (h *entities) CreateSubscription(ctx context.Context, req *sluicev1.CreateSubscriptionRequest) (*sluicev1.CreateSubscriptionResponse, error) {
	if err := h.s.authorize(ctx, Manage, sluice.SubscriptionPath(req.Topic, req.Name)); err != nil {
		return nil, err
	}
	if err := h.mayForward(ctx, req.Properties.GetForwardTo()); err != nil {
		return nil, err
	}
	props := apiconv.FromSubscriptionProperties(req.Properties)
	sub, err := h.s.c.CreateSubscription(ctx, req.Topic, req.Name, &props, apiconv.FromRules(req.Rules)...)
	if err != nil {
		return nil, h.s.fail("create subscription", err)
	}
	ps, err := h.subscription(sub)
	if err != nil {
		return nil, err
	}
	return &sluicev1.CreateSubscriptionResponse{Subscription: ps}, nil
}

func (h *entities) GetSubscription(ctx context.Context, req *sluicev1.GetSubscriptionRequest) (*sluicev1.GetSubscriptionResponse, error) {
	if err := h.s.authorize(ctx, Manage, sluice.SubscriptionPath(req.Topic, req.Name)); err != nil {
		return nil, err
	}
	sub, err := h.s.c.GetSubscription(ctx, req.Topic, req.Name)
	if err != nil {
		return nil, h.s.fail("get subscription", err)
	}
	ps, err := h.subscription(sub)
	if err != nil {
		return nil, err
	}
	return &sluicev1.GetSubscriptionResponse{Subscription: ps}, nil
}

func (h *entities) UpdateSubscription(ctx context.Context, req *sluicev1.UpdateSubscriptionRequest) (*sluicev1.UpdateSubscriptionResponse, error) {
	if err := h.s.authorize(ctx, Manage, sluice.SubscriptionPath(req.Topic, req.Name)); err != nil {
		return nil, err
	}
	props := apiconv.FromSubscriptionProperties(req.Properties)
	update := h.s.c.UpdateSubscription
	if req.ForwardTo != nil {
		props.ForwardTo, update = *req.ForwardTo, h.s.c.UpdateSubscriptionForwarding
	}
	if err := h.mayForward(ctx, props.ForwardTo); err != nil {
		return nil, err
	}
	sub, err := update(ctx, req.Topic, req.Name, props)
	if err != nil {
		return nil, h.s.fail("update subscription", err)
	}
	ps, err := h.subscription(sub)
	if err != nil {
		return nil, err
	}
	return &sluicev1.UpdateSubscriptionResponse{Subscription: ps}, nil
}

func (h *entities) DeleteSubscription(ctx context.Context, req *sluicev1.DeleteSubscriptionRequest) (*sluicev1.DeleteSubscriptionResponse, error) {
	if err := h.s.authorize(ctx, Manage, sluice.SubscriptionPath(req.Topic, req.Name)); err != nil {
		return nil, err
	}
	if err := h.s.c.DeleteSubscription(ctx, req.Topic, req.Name); err != nil {
		return nil, h.s.fail("delete subscription", err)
	}
	h.s.m.forgetEntity(sluice.SubscriptionPath(req.Topic, req.Name), "")
	return &sluicev1.DeleteSubscriptionResponse{}, nil
}

func (h *entities) ListSubscriptions(ctx context.Context, req *sluicev1.ListSubscriptionsRequest) (*sluicev1.ListSubscriptionsResponse, error) {
	if err := h.s.authorizeUnder(ctx, "list the subscriptions of", req.Topic, sluice.SubscriptionPath(req.Topic, "")); err != nil {
		return nil, err
	}
	if _, err := h.s.c.GetTopic(ctx, req.Topic); err != nil {
		return nil, h.s.fail("list subscriptions", err)
	}
	topic := sluice.CanonicalName(req.Topic)
	under := sluice.SubscriptionPath(topic, "")
	path := func(sub sluice.SubscriptionInfo) string { return sluice.SubscriptionPath(sub.Topic, sub.Name) }
	list := func(ctx context.Context, prefix, after string, max int) ([]sluice.SubscriptionInfo, error) {
		return h.s.c.ListSubscriptionsWithPrefix(ctx, topic, strings.TrimPrefix(prefix, under), strings.TrimPrefix(after, under), max)
	}
	get := func(ctx context.Context, p string) (sluice.SubscriptionInfo, bool, error) {
		return absent(h.s.c.GetSubscription(ctx, topic, strings.TrimPrefix(p, under)))
	}
	n := math.MaxInt // unset: all of them
	if req.Max != 0 {
		var err error
		if n, err = listMax(req.Max); err != nil {
			return nil, err
		}
	}
	after := ""
	if req.After != "" {
		after = under + sluice.CanonicalName(req.After)
	}
	subs, err := listRanges(ctx, h.s.visibleRanges(ctx, 0, under+req.Prefix), after, n, list, get, path)
	if err != nil {
		return nil, h.s.fail("list subscriptions", err)
	}
	out := &sluicev1.ListSubscriptionsResponse{}
	for _, sub := range subs {
		ps, err := h.subscription(sub)
		if err != nil {
			return nil, err
		}
		out.Subscriptions = append(out.Subscriptions, ps)
	}
	return out, nil
}

func (h *entities) CreateRule(ctx context.Context, req *sluicev1.CreateRuleRequest) (*sluicev1.CreateRuleResponse, error) {
	if err := h.s.authorize(ctx, Manage, sluice.SubscriptionPath(req.Topic, req.Subscription)); err != nil {
		return nil, err
	}
	if req.Rule == nil {
		return nil, apierr.Invalid("no rule")
	}
	if err := h.s.c.CreateRule(ctx, req.Topic, req.Subscription, apiconv.FromRule(req.Rule)); err != nil {
		return nil, h.s.fail("create rule", err)
	}
	return &sluicev1.CreateRuleResponse{}, nil
}

func (h *entities) DeleteRule(ctx context.Context, req *sluicev1.DeleteRuleRequest) (*sluicev1.DeleteRuleResponse, error) {
	if err := h.s.authorize(ctx, Manage, sluice.SubscriptionPath(req.Topic, req.Subscription)); err != nil {
		return nil, err
	}
	if err := h.s.c.DeleteRule(ctx, req.Topic, req.Subscription, req.Name); err != nil {
		return nil, h.s.fail("delete rule", err)
	}
	return &sluicev1.DeleteRuleResponse{}, nil
}

func (h *entities) GetEntityStats(ctx context.Context, req *sluicev1.GetEntityStatsRequest) (*sluicev1.GetEntityStatsResponse, error) {
	if err := h.s.authorize(ctx, Manage, req.Entity); err != nil {
		return nil, err
	}
	st, err := h.s.c.GetQueueStats(ctx, req.Entity)
	if err != nil {
		return nil, h.s.fail("entity stats", err)
	}
	return &sluicev1.GetEntityStatsResponse{Stats: apiconv.Stats(st)}, nil
}

func (h *entities) ListEntityStats(ctx context.Context, req *sluicev1.ListEntityStatsRequest) (*sluicev1.ListEntityStatsResponse, error) {
	n, err := listMax(req.Max)
	if err != nil {
		return nil, err
	}
	if len(h.s.visibleRanges(ctx, 0, "")) == 0 {
		k, _ := ctx.Value(keyCtx{}).(*authKey)
		return nil, denied(k, "list the statistics of any entity (it has no grant)")
	}
	ranges := h.s.visibleRanges(ctx, 0, req.Prefix)
	es, err := listRanges(ctx, ranges, req.After, n, h.s.c.ListMessageEntities, h.messageEntity,
		func(e sluice.MessageEntity) string { return e.Path })
	if err != nil {
		return nil, h.s.fail("list entity stats", err)
	}
	out := &sluicev1.ListEntityStatsResponse{}
	for _, e := range es {
		st, err := h.s.c.GetQueueStats(ctx, e.Path)
		if errors.Is(err, sluice.ErrEntityNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, h.s.fail("list entity stats", err)
		}
		out.Entities = append(out.Entities, &sluicev1.EntityStatsEntry{Entity: e.Path, Topic: e.Topic, Stats: apiconv.Stats(st)})
	}
	return out, nil
}

// messageEntity looks up the queue or subscription of a path.
func (h *entities) messageEntity(ctx context.Context, path string) (sluice.MessageEntity, bool, error) {
	if i := strings.LastIndex(path, sluice.SubscriptionPath("", "")); i >= 0 {
		topic := path[:i]
		_, ok, err := absent(h.s.c.GetSubscription(ctx, topic, path[i+len(sluice.SubscriptionPath("", "")):]))
		return sluice.MessageEntity{Path: path, Topic: topic}, ok, err
	}
	_, ok, err := absent(h.s.c.GetQueue(ctx, path))
	return sluice.MessageEntity{Path: path}, ok, err
}
