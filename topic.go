package sluice

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Topics and subscriptions. A topic holds no messages: a send to it
// copies the message, in one transaction, to every subscription with a
// rule that matches. A subscription is a queue of its own, named by its
// path, "topic/Subscriptions/name": receive from it, accept its sessions,
// peek it, as from a queue.

// subscriptionsSegment is the part of a path that names a subscription
// (compared in lower case).
const subscriptionsSegment = "/subscriptions/"

// SubscriptionPath is the entity path of a subscription, to receive from
// it with NewReceiver, AcceptSession and the like.
func SubscriptionPath(topic, subscription string) string {
	return topic + "/Subscriptions/" + subscription
}

// DefaultRuleName names the rule a subscription created without rules
// gets: a TrueFilter, as in Service Bus.
const DefaultRuleName = "$Default"

// ReasonFilterEvaluation is the dead-letter reason of a copy whose
// subscription's filter failed to evaluate on it (unless the subscription
// ignores filter errors).
const ReasonFilterEvaluation = "FilterEvaluationException"

// TopicProperties are a topic's settings. Zero values take the defaults.
type TopicProperties struct {
	// DefaultTTL is the time-to-live of messages that set none, and caps
	// those that set a longer one (0 or Forever: unlimited, read back as
	// Forever; negative is refused).
	DefaultTTL time.Duration
	// MaxMessageSize bounds a message (default 1 MiB).
	MaxMessageSize int
	// RequiresDuplicateDetection drops a message whose MessageID (with its
	// PartitionKey) was sent to the topic within DuplicateDetectionWindow
	// (default 10 min), as Service Bus does: the topic checks it once,
	// before its fan-out, so a duplicate reaches no subscription, not even
	// one created since the first send. Fixed when the topic is created;
	// the window may change.
	RequiresDuplicateDetection bool
	// DuplicateDetectionWindow is 20 s to 7 days (default 10 min).
	DuplicateDetectionWindow time.Duration
	// PartitionCount partitions every subscription of the topic (0 or 1:
	// none; at most MaxPartitionCount), as Service Bus's
	// EnablePartitioning does: each subscription is then a partitioned
	// queue (see QueueProperties.PartitionCount), and a message's copies
	// go to the partition its key picks in each. Fixed when the topic is
	// created.
	PartitionCount int
}

// TopicInfo is a topic's name with its settings.
type TopicInfo struct {
	Name string
	TopicProperties
}

// SubscriptionProperties are a subscription's settings. Zero values take
// the defaults, which are a queue's, and the durations follow a queue's
// rules (see QueueProperties).
type SubscriptionProperties struct {
	// LockDuration is 1 s to 5 min (default 60 s).
	LockDuration     time.Duration
	MaxDeliveryCount int
	// DefaultTTL: 0 or Forever is unlimited, read back as Forever;
	// negative is refused.
	DefaultTTL         time.Duration
	DeadLetterOnExpiry bool
	// DeadLetterRetention: 0 or Forever keeps dead letters until purged
	// or received, read back as Forever; negative is refused.
	DeadLetterRetention time.Duration
	// RequiresSession makes the subscription session-aware (fixed when it
	// is created).
	RequiresSession bool
	// ForwardTo names a queue or topic that the subscription's messages
	// go to instead ("": none).
	ForwardTo string
	// IgnoreFilterErrors makes a filter that fails to evaluate count as
	// not matching; otherwise (the default) the copy is dead-lettered
	// with reason FilterEvaluationException.
	IgnoreFilterErrors bool
}

// SubscriptionInfo is a subscription with its settings and rules.
type SubscriptionInfo struct {
	Topic, Name string
	SubscriptionProperties
	Rules []Rule
}

// Rule selects the messages a subscription gets: a message matches a
// subscription when any of its rules' filters matches.
type Rule struct {
	Name   string
	Filter Filter
}

// Filter is TrueFilter, FalseFilter, CorrelationFilter or SQLFilter.
type Filter interface{ isFilter() }

// TrueFilter matches every message.
type TrueFilter struct{}

// FalseFilter matches none.
type FalseFilter struct{}

// CorrelationFilter matches a message whose system and application
// properties equal every field set here (empty fields are not tested).
type CorrelationFilter struct {
	CorrelationID, MessageID, To, ReplyTo, Subject, SessionID, ReplyToSessionID, ContentType string
	// Properties are application properties that must be equal.
	Properties map[string]string
}

// SQLFilter matches a message for which a SQL-like expression over its
// properties is true: comparisons, IN, LIKE, IS NULL, AND, OR, NOT and
// parentheses; sys.Name reaches a system property, a bare name or
// user.name an application property. See package internal/filter for
// the grammar and semantics. A malformed expression is refused with an
// error wrapping ErrInvalidFilter.
type SQLFilter struct {
	Expression string
}

func (TrueFilter) isFilter()        {}
func (FalseFilter) isFilter()       {}
func (CorrelationFilter) isFilter() {}
func (SQLFilter) isFilter()         {}

// ErrInvalidFilter reports a rule whose filter cannot be parsed.
var ErrInvalidFilter = sluicetype.ErrInvalidFilter

// storedRule is a rule as a subscription's attributes hold it.
type storedRule struct {
	Name        string             `json:"name"`
	Kind        string             `json:"kind"` // true, false, correlation, sql
	SQL         string             `json:"sql,omitempty"`
	Correlation *CorrelationFilter `json:"correlation,omitempty"`
}

// compiledRule evaluates a rule's filter.
type compiledRule func(m *Message) (bool, error)

func storeRule(r Rule) (storedRule, error) {
	if err := validateRuleName(r.Name); err != nil {
		return storedRule{}, err
	}
	sr := storedRule{Name: r.Name}
	switch f := r.Filter.(type) {
	case TrueFilter, *TrueFilter:
		sr.Kind = "true"
	case FalseFilter, *FalseFilter:
		sr.Kind = "false"
	case CorrelationFilter:
		sr.Kind, sr.Correlation = "correlation", &f
	case *CorrelationFilter:
		sr.Kind, sr.Correlation = "correlation", f
	case SQLFilter:
		sr.Kind, sr.SQL = "sql", f.Expression
	case *SQLFilter:
		sr.Kind, sr.SQL = "sql", f.Expression
	default:
		return storedRule{}, fmt.Errorf("rule %q: unknown filter %T: %w", r.Name, r.Filter, ErrInvalidFilter)
	}
	if _, _, err := loadRule(sr); err != nil {
		return storedRule{}, err
	}
	return sr, nil
}

func loadRule(sr storedRule) (Rule, compiledRule, error) {
	switch sr.Kind {
	case "true":
		return Rule{sr.Name, TrueFilter{}}, func(*Message) (bool, error) { return true, nil }, nil
	case "false":
		return Rule{sr.Name, FalseFilter{}}, func(*Message) (bool, error) { return false, nil }, nil
	case "correlation":
		if sr.Correlation == nil {
			return Rule{}, nil, fmt.Errorf("rule %q: empty correlation filter: %w", sr.Name, ErrInvalidFilter)
		}
		cf := *sr.Correlation
		return Rule{sr.Name, cf}, cf.match, nil
	case "sql":
		e, err := filter.Parse(sr.SQL)
		if err != nil {
			return Rule{}, nil, fmt.Errorf("rule %q: %w: %w", sr.Name, ErrInvalidFilter, err)
		}
		return Rule{sr.Name, SQLFilter{sr.SQL}}, func(m *Message) (bool, error) {
			return e.Match(filterProperties(m))
		}, nil
	}
	return Rule{}, nil, fmt.Errorf("rule %q: unknown filter kind %q: %w", sr.Name, sr.Kind, ErrInvalidFilter)
}

func (f CorrelationFilter) match(m *Message) (bool, error) {
	for _, p := range [...][2]string{
		{f.CorrelationID, m.CorrelationID}, {f.MessageID, m.MessageID}, {f.To, m.To}, {f.ReplyTo, m.ReplyTo},
		{f.Subject, m.Subject}, {f.SessionID, m.SessionID}, {f.ReplyToSessionID, m.ReplyToSessionID},
		{f.ContentType, m.ContentType},
	} {
		if p[0] != "" && p[0] != p[1] {
			return false, nil
		}
	}
	for k, v := range f.Properties {
		if got, ok := m.ApplicationProperties[k]; !ok || got != v {
			return false, nil
		}
	}
	return true, nil
}

func filterProperties(m *Message) filter.Properties {
	return filter.Properties{
		System: filter.SystemProperties{
			MessageID: m.MessageID, CorrelationID: m.CorrelationID, Subject: m.Subject, To: m.To,
			ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID, SessionID: m.SessionID,
			PartitionKey: m.PartitionKey, ContentType: m.ContentType,
		},
		App: m.ApplicationProperties,
	}
}

// matches says whether a subscription takes m: nil error and true when a
// rule matches; an evaluation error when no rule matched and one failed.
func (e *entity) matches(m *Message) (bool, error) {
	var failed error
	for i, match := range e.match {
		ok, err := match(m)
		if err != nil {
			failed = fmt.Errorf("rule %q: %w", e.rules[i].Name, err)
			continue
		}
		if ok {
			return true, nil
		}
	}
	return false, failed
}

// CreateTopic creates a topic; nil props take the defaults (a pointer,
// where UpdateTopic takes a value: see CreateQueue and UpdateQueue).
func (c *Client) CreateTopic(ctx context.Context, name string, props *TopicProperties) (TopicInfo, error) {
	if err := validateEntityName("topic", name); err != nil {
		return TopicInfo{}, fmt.Errorf("sluice: create topic: %w", err)
	}
	e := topicEntity(name, props)
	if err := c.createEntity(ctx, &e); err != nil {
		return TopicInfo{}, err
	}
	return topicInfo(e), nil
}

func topicEntity(name string, props *TopicProperties) entity {
	e := entity{name: name, kind: kindTopic}
	if props != nil {
		e.props = QueueProperties{
			DefaultTTL: props.DefaultTTL, MaxMessageSize: props.MaxMessageSize,
			RequiresDuplicateDetection: props.RequiresDuplicateDetection,
			DuplicateDetectionWindow:   props.DuplicateDetectionWindow,
			PartitionCount:             props.PartitionCount,
		}
	}
	return e
}

func topicInfo(e entity) TopicInfo {
	p := e.props.withDefaults()
	return TopicInfo{Name: e.name, TopicProperties: TopicProperties{
		DefaultTTL: p.DefaultTTL, MaxMessageSize: p.MaxMessageSize,
		RequiresDuplicateDetection: p.RequiresDuplicateDetection, DuplicateDetectionWindow: p.DuplicateDetectionWindow,
		PartitionCount: p.PartitionCount,
	}}
}

// UpdateTopic changes a topic's settings, merged with the current ones
// as UpdateQueue merges them (duplicate detection is fixed at creation;
// its window may change). props is a value, as UpdateQueue's is.
func (c *Client) UpdateTopic(ctx context.Context, name string, props TopicProperties) (TopicInfo, error) {
	e := topicEntity(name, &props)
	if err := c.updateEntity(ctx, &e, false); err != nil {
		return TopicInfo{}, err
	}
	return topicInfo(e), nil
}

// GetTopic returns a topic's settings. ErrEntityNotFound if absent.
func (c *Client) GetTopic(ctx context.Context, name string) (TopicInfo, error) {
	e, err := c.getEntity(ctx, name, kindTopic)
	if err != nil {
		return TopicInfo{}, err
	}
	return topicInfo(e), nil
}

// ListTopics returns up to max topics in name order after the name after.
func (c *Client) ListTopics(ctx context.Context, after string, max int) ([]TopicInfo, error) {
	return c.ListTopicsWithPrefix(ctx, "", after, max)
}

// ListTopicsWithPrefix returns up to max topics whose names start with
// prefix, in name order after the name after; it reads only the names
// with the prefix.
func (c *Client) ListTopicsWithPrefix(ctx context.Context, prefix, after string, max int) ([]TopicInfo, error) {
	es, err := c.listEntities(ctx, kindTopic.is, prefix, after, max)
	if err != nil {
		return nil, err
	}
	out := make([]TopicInfo, len(es))
	for i, e := range es {
		out[i] = topicInfo(e)
	}
	return out, nil
}

// DeleteTopic deletes a topic and its subscriptions with their messages.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	if _, err := c.getEntity(ctx, name, kindTopic); err != nil {
		return err
	}
	subs, err := c.subscriptions(ctx, name)
	if err != nil {
		return err
	}
	for _, s := range subs {
		c.forget(s.name)
		if err := c.st.DeleteQueue(ctx, s.name); err != nil && !errors.Is(err, ErrEntityNotFound) {
			return err
		}
		if err := c.deletePartitions(ctx, s.name); err != nil {
			return err
		}
	}
	name = canonical(name)
	c.forget(name)
	return c.st.DeleteQueue(ctx, name)
}

// subscriptions reads a topic's subscriptions, as they are now.
func (c *Client) subscriptions(ctx context.Context, topic string) ([]entity, error) {
	prefix := canonical(SubscriptionPath(topic, ""))
	if len(prefix) >= store.MaxNameLen {
		return nil, nil // no subscription's path fits in a name
	}
	var out []entity
	after := ""
	for {
		page, err := c.listEntities(ctx, kindSubscription.is, prefix, after, c.limits.MaxBatch)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < c.limits.MaxBatch {
			return out, nil
		}
		after = page[len(page)-1].name
	}
}

// CreateSubscription creates a subscription of a topic with the given
// rules, or with the rule $Default (a TrueFilter) when none is given;
// nil props take the defaults (a pointer, where UpdateSubscription takes
// a value: see CreateQueue and UpdateQueue).
func (c *Client) CreateSubscription(ctx context.Context, topic, name string, props *SubscriptionProperties, rules ...Rule) (SubscriptionInfo, error) {
	t, err := c.getEntity(ctx, topic, kindTopic)
	if err != nil {
		return SubscriptionInfo{}, err
	}
	if err := validateSubscriptionName(name); err != nil {
		return SubscriptionInfo{}, fmt.Errorf("sluice: create subscription: %w", err)
	}
	if len(rules) == 0 {
		rules = []Rule{{Name: DefaultRuleName, Filter: TrueFilter{}}}
	}
	if err := uniqueRules(rules); err != nil {
		return SubscriptionInfo{}, fmt.Errorf("sluice: create subscription: %w", err)
	}
	var p SubscriptionProperties
	if props != nil {
		p = *props
	}
	e := subscriptionEntity(topic, name, p, rules)
	e.props.PartitionCount = t.props.PartitionCount // a partitioned topic's subscriptions are partitioned
	if err := c.createEntity(ctx, &e); err != nil {
		return SubscriptionInfo{}, err
	}
	return subscriptionInfo(e), nil
}

func validateSubscriptionName(name string) error {
	if err := store.ValidateName("subscription", name); err != nil {
		return err
	}
	if err := validateShortName("subscription", name, MaxSubscriptionNameLength); err != nil {
		return err
	}
	if strings.Contains(name, "/") {
		return fmt.Errorf("subscription name %q holds '/': %w", name, ErrInvalidName)
	}
	return nil
}

// validateRuleName checks a rule's name: a valid name (after a leading
// '$', which $Default has) of at most MaxRuleNameLength characters.
func validateRuleName(name string) error {
	if err := store.ValidateName("rule", strings.TrimPrefix(name, "$")); err != nil {
		return err
	}
	return validateShortName("rule", name, MaxRuleNameLength)
}

func uniqueRules(rules []Rule) error {
	seen := make(map[string]bool, len(rules))
	for _, r := range rules {
		if seen[r.Name] {
			return fmt.Errorf("rule %q given twice: %w", r.Name, ErrInvalidArgument)
		}
		seen[r.Name] = true
	}
	return nil
}

func subscriptionEntity(topic, name string, p SubscriptionProperties, rules []Rule) entity {
	return entity{
		name: SubscriptionPath(topic, name), kind: kindSubscription,
		props: QueueProperties{
			LockDuration: p.LockDuration, MaxDeliveryCount: p.MaxDeliveryCount, DefaultTTL: p.DefaultTTL,
			DeadLetterOnExpiry: p.DeadLetterOnExpiry, DeadLetterRetention: p.DeadLetterRetention,
			RequiresSession: p.RequiresSession,
		},
		forwardTo: p.ForwardTo, ignoreFilterErrors: p.IgnoreFilterErrors, rules: rules,
	}
}

func subscriptionInfo(e entity) SubscriptionInfo {
	p := e.props.withDefaults()
	topic, name, _ := strings.Cut(e.name, "/Subscriptions/")
	return SubscriptionInfo{
		Topic: topic, Name: name,
		SubscriptionProperties: SubscriptionProperties{
			LockDuration: p.LockDuration, MaxDeliveryCount: p.MaxDeliveryCount, DefaultTTL: p.DefaultTTL,
			DeadLetterOnExpiry: p.DeadLetterOnExpiry, DeadLetterRetention: p.DeadLetterRetention,
			RequiresSession: p.RequiresSession, ForwardTo: e.forwardTo, IgnoreFilterErrors: e.ignoreFilterErrors,
		},
		Rules: slices.Clone(e.rules),
	}
}

// GetSubscription returns a subscription with its rules.
func (c *Client) GetSubscription(ctx context.Context, topic, name string) (SubscriptionInfo, error) {
	e, err := c.getEntity(ctx, SubscriptionPath(topic, name), kindSubscription)
	if err != nil {
		return SubscriptionInfo{}, err
	}
	return subscriptionInfo(e), nil
}

// ListSubscriptions returns a topic's subscriptions in name order.
func (c *Client) ListSubscriptions(ctx context.Context, topic string) ([]SubscriptionInfo, error) {
	if _, err := c.getEntity(ctx, topic, kindTopic); err != nil {
		return nil, err
	}
	es, err := c.subscriptions(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([]SubscriptionInfo, len(es))
	for i, e := range es {
		out[i] = subscriptionInfo(e)
	}
	return out, nil
}

// ListSubscriptionsWithPrefix returns up to max subscriptions of a topic
// whose names start with prefix, in name order after the name after
// ("" for the first page); it reads only the names with the prefix, and
// does not check that the topic exists (it has none, then).
func (c *Client) ListSubscriptionsWithPrefix(ctx context.Context, topic, prefix, after string, max int) ([]SubscriptionInfo, error) {
	under := canonical(SubscriptionPath(topic, ""))
	if after != "" {
		after = under + after
	}
	es, err := c.listEntities(ctx, kindSubscription.is, under+prefix, after, max)
	if err != nil {
		return nil, err
	}
	out := make([]SubscriptionInfo, len(es))
	for i, e := range es {
		out[i] = subscriptionInfo(e)
	}
	return out, nil
}

// MessageEntity is a queue or a subscription: an entity that holds
// messages, whose statistics GetQueueStats reads.
type MessageEntity struct {
	// Path is the queue's name or the subscription's path
	// (SubscriptionPath).
	Path string
	// Topic is the subscription's topic, "" for a queue.
	Topic string
}

// ListMessageEntities returns up to max queues and subscriptions whose
// names (paths, for subscriptions) start with prefix, in name order
// after the name after, in one walk of the names with the prefix.
func (c *Client) ListMessageEntities(ctx context.Context, prefix, after string, max int) ([]MessageEntity, error) {
	es, err := c.listEntities(ctx, func(k entityKind) bool { return k == kindQueue || k == kindSubscription }, prefix, after, max)
	if err != nil {
		return nil, err
	}
	out := make([]MessageEntity, len(es))
	for i, e := range es {
		out[i] = MessageEntity{Path: e.name}
		if e.kind == kindSubscription {
			out[i].Topic = e.name[:strings.LastIndex(e.name, SubscriptionPath("", ""))]
		}
	}
	return out, nil
}

// UpdateSubscription changes a subscription's settings, merged with the
// current ones as UpdateQueue merges them; its rules stay, and so does
// its forwarding unless props.ForwardTo names a new target
// (UpdateSubscriptionForwarding also stops it). props is a value, as
// UpdateQueue's is.
func (c *Client) UpdateSubscription(ctx context.Context, topic, name string, props SubscriptionProperties) (SubscriptionInfo, error) {
	return c.updateSubscription(ctx, topic, name, props, props.ForwardTo != "")
}

// UpdateSubscriptionForwarding is UpdateSubscription that sets where the
// subscription forwards its messages to props.ForwardTo, "" for nowhere.
func (c *Client) UpdateSubscriptionForwarding(ctx context.Context, topic, name string, props SubscriptionProperties) (SubscriptionInfo, error) {
	return c.updateSubscription(ctx, topic, name, props, true)
}

func (c *Client) updateSubscription(ctx context.Context, topic, name string, props SubscriptionProperties, setForward bool) (SubscriptionInfo, error) {
	e := subscriptionEntity(topic, name, props, nil)
	if err := c.updateEntity(ctx, &e, setForward); err != nil {
		return SubscriptionInfo{}, err
	}
	return subscriptionInfo(e), nil
}

// DeleteSubscription deletes a subscription with its messages.
func (c *Client) DeleteSubscription(ctx context.Context, topic, name string) error {
	path := canonical(SubscriptionPath(topic, name))
	if _, err := c.getEntity(ctx, path, kindSubscription); err != nil {
		return err
	}
	c.forget(path)
	if err := c.st.DeleteQueue(ctx, path); err != nil {
		return err
	}
	return c.deletePartitions(ctx, path)
}

// CreateRule adds a rule to a subscription. ErrEntityExists if it has a
// rule of that name.
func (c *Client) CreateRule(ctx context.Context, topic, subscription string, r Rule) error {
	return c.changeRules(ctx, topic, subscription, func(rules []Rule) ([]Rule, error) {
		if slices.ContainsFunc(rules, func(x Rule) bool { return x.Name == r.Name }) {
			return nil, fmt.Errorf("sluice: create rule %q: %w", r.Name, ErrEntityExists)
		}
		return append(rules, r), nil
	})
}

// DeleteRule removes a rule of a subscription. ErrEntityNotFound if it
// has none of that name. A subscription without rules gets no messages.
func (c *Client) DeleteRule(ctx context.Context, topic, subscription, rule string) error {
	if err := validateRuleName(rule); err != nil {
		return fmt.Errorf("sluice: delete rule: %w", err)
	}
	return c.changeRules(ctx, topic, subscription, func(rules []Rule) ([]Rule, error) {
		i := slices.IndexFunc(rules, func(x Rule) bool { return x.Name == rule })
		if i < 0 {
			return nil, fmt.Errorf("sluice: delete rule %q: %w", rule, ErrEntityNotFound)
		}
		return slices.Delete(rules, i, i+1), nil
	})
}

func (c *Client) changeRules(ctx context.Context, topic, subscription string, change func([]Rule) ([]Rule, error)) error {
	cur, err := c.getEntity(ctx, SubscriptionPath(topic, subscription), kindSubscription)
	if err != nil {
		return err
	}
	rules, err := change(slices.Clone(cur.rules))
	if err != nil {
		return err
	}
	cur.rules = rules
	s, err := cur.settings(c.limits)
	if err != nil {
		return fmt.Errorf("sluice: rule: %w", err)
	}
	if err := c.st.UpdateQueue(ctx, &s); err != nil {
		return err
	}
	c.forget(cur.name)
	return nil
}
