package server

import (
	"context"
	"errors"
	"slices"
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

// pages lists up to n entities after a name that keep keeps, reading
// pages of the library's listing until it has them or the listing ends:
// a page of the entities a key may see is full unless it is the last.
func pages[E any](ctx context.Context, after string, n int, list func(context.Context, string, int) ([]E, error),
	name func(E) string, keep func(string) bool, add func(E)) error {
	page := min(n, maxList)
	for added := 0; added < n; {
		es, err := list(ctx, after, page)
		if err != nil {
			return err
		}
		for _, e := range es {
			if added < n && keep(name(e)) {
				add(e)
				added++
			}
		}
		if len(es) < page {
			return nil
		}
		after = name(es[len(es)-1])
	}
	return nil
}

// visible keeps the entities the call's key may see.
func (h *entities) visible(ctx context.Context) func(string) bool {
	return func(name string) bool { return h.s.permitted(ctx, name) }
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
	return &sluicev1.DeleteQueueResponse{}, nil
}

func (h *entities) ListQueues(ctx context.Context, req *sluicev1.ListQueuesRequest) (*sluicev1.ListQueuesResponse, error) {
	n, err := listMax(req.Max)
	if err != nil {
		return nil, err
	}
	out := &sluicev1.ListQueuesResponse{}
	err = pages(ctx, req.After, n, h.s.c.ListQueues, func(q sluice.QueueInfo) string { return q.Name }, h.visible(ctx),
		func(q sluice.QueueInfo) { out.Queues = append(out.Queues, apiconv.Queue(q)) })
	if err != nil {
		return nil, h.s.fail("list queues", err)
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
	return &sluicev1.DeleteTopicResponse{}, nil
}

func (h *entities) ListTopics(ctx context.Context, req *sluicev1.ListTopicsRequest) (*sluicev1.ListTopicsResponse, error) {
	n, err := listMax(req.Max)
	if err != nil {
		return nil, err
	}
	out := &sluicev1.ListTopicsResponse{}
	err = pages(ctx, req.After, n, h.s.c.ListTopics, func(t sluice.TopicInfo) string { return t.Name }, h.visible(ctx),
		func(t sluice.TopicInfo) { out.Topics = append(out.Topics, apiconv.Topic(t)) })
	if err != nil {
		return nil, h.s.fail("list topics", err)
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
	if err := h.mayForward(ctx, req.Properties.GetForwardTo()); err != nil {
		return nil, err
	}
	sub, err := h.s.c.UpdateSubscription(ctx, req.Topic, req.Name, apiconv.FromSubscriptionProperties(req.Properties))
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
	return &sluicev1.DeleteSubscriptionResponse{}, nil
}

func (h *entities) ListSubscriptions(ctx context.Context, req *sluicev1.ListSubscriptionsRequest) (*sluicev1.ListSubscriptionsResponse, error) {
	if err := h.s.authorizeUnder(ctx, "list the subscriptions of", req.Topic, sluice.SubscriptionPath(req.Topic, "")); err != nil {
		return nil, err
	}
	subs, err := h.s.c.ListSubscriptions(ctx, req.Topic)
	if err != nil {
		return nil, h.s.fail("list subscriptions", err)
	}
	out := &sluicev1.ListSubscriptionsResponse{}
	for _, sub := range subs {
		if !h.s.permitted(ctx, sluice.SubscriptionPath(sub.Topic, sub.Name)) {
			continue
		}
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

// maxStatsEntities bounds the entities ListEntityStats sorts through.
const maxStatsEntities = 10000

func (h *entities) ListEntityStats(ctx context.Context, req *sluicev1.ListEntityStatsRequest) (*sluicev1.ListEntityStatsResponse, error) {
	n, err := listMax(req.Max)
	if err != nil {
		return nil, err
	}
	type entry struct{ path, topic string }
	var all []entry
	err = pages(ctx, "", maxStatsEntities, h.s.c.ListQueues, func(q sluice.QueueInfo) string { return q.Name }, h.visible(ctx),
		func(q sluice.QueueInfo) { all = append(all, entry{path: q.Name}) })
	if err != nil {
		return nil, h.s.fail("list entity stats", err)
	}
	var topics []sluice.TopicInfo
	every := func(string) bool { return true } // each subscription is checked on its own
	err = pages(ctx, "", maxStatsEntities, h.s.c.ListTopics, func(t sluice.TopicInfo) string { return t.Name }, every,
		func(t sluice.TopicInfo) { topics = append(topics, t) })
	if err != nil {
		return nil, h.s.fail("list entity stats", err)
	}
	for _, t := range topics {
		subs, err := h.s.c.ListSubscriptions(ctx, t.Name)
		if err != nil {
			return nil, h.s.fail("list entity stats", err)
		}
		for _, sub := range subs {
			if p := sluice.SubscriptionPath(t.Name, sub.Name); h.s.permitted(ctx, p) {
				all = append(all, entry{path: p, topic: t.Name})
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	out := &sluicev1.ListEntityStatsResponse{}
	for _, e := range all {
		if e.path <= req.After {
			continue
		}
		if len(out.Entities) == n {
			break
		}
		st, err := h.s.c.GetQueueStats(ctx, e.path)
		if errors.Is(err, sluice.ErrEntityNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, h.s.fail("list entity stats", err)
		}
		out.Entities = append(out.Entities, &sluicev1.EntityStatsEntry{Entity: e.path, Topic: e.topic, Stats: apiconv.Stats(st)})
	}
	return out, nil
}
