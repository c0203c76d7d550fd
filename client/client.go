// Package client is the Go client of a sluice server's network API. It is
// shaped like the library (package sluice): the same method names,
// arguments and types, so that code written against a small interface of
// its own runs on an embedded sluice.Client or a remote client.Client
// alike, and the same sentinel errors (errors.Is(err, sluice.ErrLockLost)
// holds for a lock lost on the server).
//
//	c, err := client.New("http://127.0.0.1:7070", &client.Options{Token: token})
//	s, _ := c.NewSender("orders")
//	s.Send(ctx, &sluice.Message{Body: []byte("one pizza")})
//	r, _ := c.NewReceiver("orders", nil)
//	msgs, err := r.Receive(ctx, 10) // waits until messages arrive
//	err = r.Complete(ctx, msgs[0])
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
	"github.com/sluicehq/sluice/internal/apiconv"
	"github.com/sluicehq/sluice/internal/apierr"
)

// Options tune a client. The zero value talks the Connect protocol in
// protobuf, without credentials, through an HTTP client of its own.
type Options struct {
	// Token is the API key sent as "Authorization: Bearer <token>".
	Token string
	// HTTPClient carries the calls (default: a client of its own, over a
	// clone of http.DefaultTransport, that pings HTTP/2 connections gone
	// quiet and closes those that do not answer; for gRPC without TLS it
	// speaks HTTP/2 cleartext, straight to the server, with no proxy).
	// One given here must speak HTTP/2 cleartext for gRPC without TLS
	// (see GRPC).
	HTTPClient *http.Client
	// GRPC talks gRPC instead of the Connect protocol; JSON the Connect
	// protocol in JSON instead of protobuf.
	GRPC bool
	JSON bool
	// Instrumentation, when set, intercepts the client's sends, receives,
	// settlements and publishes, as sluice.Client.Instrument does the
	// library's: with sluiceotel's, a send carries its trace context to
	// the consumer, through the server, in the message's properties.
	Instrumentation sluice.Instrumentation
}

// Client calls a sluice server. It is safe for concurrent use.
type Client struct {
	hc    *http.Client // carries the calls
	own   bool         // New made hc
	instr sluice.Instrumentation

	entities  sluicev1connect.EntityServiceClient
	messaging sluicev1connect.MessagingServiceClient
	cluster   sluicev1connect.ClusterServiceClient
	stats     sluicev1connect.StatsServiceClient
	streams   sluicev1connect.StreamServiceClient
}

// New returns a client of the server at baseURL (http://host:port or
// https://host:port).
func New(baseURL string, opts *Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sluice: client: server address %q: want http://host:port or https://host:port: %w",
			baseURL, sluice.ErrInvalidArgument)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	hc, own := o.HTTPClient, false
	if hc == nil {
		hc, own = httpClient(o.GRPC && u.Scheme == "http"), true
	}
	hc = noteReads(hc)
	var topts []connecthttp.Option
	switch {
	case o.GRPC:
		topts = append(topts, connecthttp.WithGRPC())
	case o.JSON:
		topts = append(topts, connecthttp.WithProtoJSON())
	}
	var interceptors []connect.ClientInterceptor
	if o.Token != "" {
		interceptors = append(interceptors, bearer(o.Token))
	}
	cc := connect.NewClient(connecthttp.NewTransport(hc, baseURL, topts...), interceptors...)
	return &Client{
		hc:        hc,
		own:       own,
		instr:     o.Instrumentation,
		entities:  sluicev1connect.NewEntityServiceClient(cc),
		messaging: sluicev1connect.NewMessagingServiceClient(cc),
		cluster:   sluicev1connect.NewClusterServiceClient(cc),
		stats:     sluicev1connect.NewStatsServiceClient(cc),
		streams:   sluicev1connect.NewStreamServiceClient(cc),
	}, nil
}

// httpClient returns the default HTTP client: HTTP/2 without TLS when
// h2c is set, as gRPC needs. It pings an HTTP/2 connection that has been
// quiet for 30 s and closes it if the ping goes unanswered for 15 s, so
// that a connection whose peer vanished fails its streams.
func httpClient(h2c bool) *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		t = t.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second}
	if h2c {
		protocols := new(http.Protocols)
		protocols.SetUnencryptedHTTP2(true)
		t.Protocols = protocols
		t.Proxy = nil // HTTP/2 with prior knowledge goes to the server itself
	}
	return &http.Client{Transport: t}
}

// bearer sends the API key with every call.
func bearer(token string) connect.ClientInterceptor {
	return func(next connect.ClientFunc) connect.ClientFunc {
		return func(ctx context.Context, spec connect.Spec) (connect.ClientStream, error) {
			info, ok := connect.CallInfoForClientContext(ctx)
			if !ok {
				ctx, info = connect.NewClientContext(ctx)
			}
			info.RequestHeader().Set("Authorization", "Bearer "+token)
			return next(ctx, spec)
		}
	}
}

// Close closes the idle connections of the HTTP client New made (not
// those of Options.HTTPClient). Calls in progress run on. (A stream
// processor whose stream falls silent closes the idle connections of
// whichever client carries its calls: they are likely broken too.)
func (c *Client) Close() error {
	if c.own {
		c.hc.CloseIdleConnections()
	}
	return nil
}

// call runs a call and turns the server's errors into the library's.
func call[Req, Res any](ctx context.Context, f func(context.Context, *Req) (*Res, error), req *Req) (*Res, error) {
	res, err := f(ctx, req)
	if err != nil {
		return nil, apierr.ToLibrary(err)
	}
	return res, nil
}

// CreateQueue creates a queue; nil props take the defaults. props is a
// pointer, UpdateQueue's a value, for the reasons the library's
// CreateQueue and UpdateQueue give.
func (c *Client) CreateQueue(ctx context.Context, name string, props *sluice.QueueProperties) (sluice.QueueInfo, error) {
	return c.CreateQueueForwarding(ctx, name, props, "")
}

// CreateQueueForwarding creates a queue whose messages go to forwardTo.
func (c *Client) CreateQueueForwarding(ctx context.Context, name string, props *sluice.QueueProperties, forwardTo string) (sluice.QueueInfo, error) {
	var p sluice.QueueProperties
	if props != nil {
		p = *props
	}
	res, err := call(ctx, c.entities.CreateQueue, &sluicev1.CreateQueueRequest{Name: name, Properties: apiconv.QueueProperties(p), ForwardTo: forwardTo})
	if err != nil {
		return sluice.QueueInfo{}, err
	}
	return apiconv.FromQueue(res.Queue), nil
}

// GetQueue returns a queue's settings.
func (c *Client) GetQueue(ctx context.Context, name string) (sluice.QueueInfo, error) {
	res, err := call(ctx, c.entities.GetQueue, &sluicev1.GetQueueRequest{Name: name})
	if err != nil {
		return sluice.QueueInfo{}, err
	}
	return apiconv.FromQueue(res.Queue), nil
}

// UpdateQueue changes a queue's settings as the library's UpdateQueue
// does, and keeps its forwarding. props is a value, as the library's is:
// an update states the settings it applies.
func (c *Client) UpdateQueue(ctx context.Context, name string, props sluice.QueueProperties) (sluice.QueueInfo, error) {
	return c.updateQueue(ctx, &sluicev1.UpdateQueueRequest{Name: name, Properties: apiconv.QueueProperties(props)})
}

// UpdateQueueForwarding is UpdateQueue that also sets the queue's
// forwarding ("" for none).
func (c *Client) UpdateQueueForwarding(ctx context.Context, name string, props sluice.QueueProperties, forwardTo string) (sluice.QueueInfo, error) {
	return c.updateQueue(ctx, &sluicev1.UpdateQueueRequest{Name: name, Properties: apiconv.QueueProperties(props), ForwardTo: &forwardTo})
}

func (c *Client) updateQueue(ctx context.Context, req *sluicev1.UpdateQueueRequest) (sluice.QueueInfo, error) {
	res, err := call(ctx, c.entities.UpdateQueue, req)
	if err != nil {
		return sluice.QueueInfo{}, err
	}
	return apiconv.FromQueue(res.Queue), nil
}

// DeleteQueue deletes a queue with its messages.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	_, err := call(ctx, c.entities.DeleteQueue, &sluicev1.DeleteQueueRequest{Name: name})
	return err
}

// ListQueues returns up to max (1 to 1,000) queues after a name, in
// name order.
func (c *Client) ListQueues(ctx context.Context, after string, max int) ([]sluice.QueueInfo, error) {
	return c.ListQueuesWithPrefix(ctx, "", after, max)
}

// GetQueueStats counts a queue's or subscription's messages by state.
func (c *Client) GetQueueStats(ctx context.Context, name string) (sluice.QueueStats, error) {
	res, err := call(ctx, c.entities.GetEntityStats, &sluicev1.GetEntityStatsRequest{Entity: name})
	if err != nil {
		return sluice.QueueStats{}, err
	}
	return apiconv.FromStats(res.Stats), nil
}

// CreateTopic creates a topic; nil props take the defaults (a pointer,
// where UpdateTopic takes a value, as in the library).
func (c *Client) CreateTopic(ctx context.Context, name string, props *sluice.TopicProperties) (sluice.TopicInfo, error) {
	var p sluice.TopicProperties
	if props != nil {
		p = *props
	}
	res, err := call(ctx, c.entities.CreateTopic, &sluicev1.CreateTopicRequest{Name: name, Properties: apiconv.TopicProperties(p)})
	if err != nil {
		return sluice.TopicInfo{}, err
	}
	return apiconv.FromTopic(res.Topic), nil
}

// GetTopic returns a topic's settings.
func (c *Client) GetTopic(ctx context.Context, name string) (sluice.TopicInfo, error) {
	res, err := call(ctx, c.entities.GetTopic, &sluicev1.GetTopicRequest{Name: name})
	if err != nil {
		return sluice.TopicInfo{}, err
	}
	return apiconv.FromTopic(res.Topic), nil
}

// UpdateTopic changes a topic's settings as the library's UpdateTopic
// does. props is a value, as the library's is: an update states the
// settings it applies.
func (c *Client) UpdateTopic(ctx context.Context, name string, props sluice.TopicProperties) (sluice.TopicInfo, error) {
	res, err := call(ctx, c.entities.UpdateTopic, &sluicev1.UpdateTopicRequest{Name: name, Properties: apiconv.TopicProperties(props)})
	if err != nil {
		return sluice.TopicInfo{}, err
	}
	return apiconv.FromTopic(res.Topic), nil
}

// DeleteTopic deletes a topic with its subscriptions.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	_, err := call(ctx, c.entities.DeleteTopic, &sluicev1.DeleteTopicRequest{Name: name})
	return err
}

// ListTopics returns up to max (1 to 1,000) topics after a name, in
// name order.
func (c *Client) ListTopics(ctx context.Context, after string, max int) ([]sluice.TopicInfo, error) {
	return c.ListTopicsWithPrefix(ctx, "", after, max)
}

// CreateSubscription creates a subscription of a topic with its rules;
// nil props take the defaults (a pointer, where UpdateSubscription takes
// a value, as in the library).
func (c *Client) CreateSubscription(ctx context.Context, topic, name string, props *sluice.SubscriptionProperties, rules ...sluice.Rule) (sluice.SubscriptionInfo, error) {
	var p sluice.SubscriptionProperties
	if props != nil {
		p = *props
	}
	req := &sluicev1.CreateSubscriptionRequest{Topic: topic, Name: name, Properties: apiconv.SubscriptionProperties(p)}
	for _, r := range rules {
		pr, err := apiconv.Rule(r)
		if err != nil {
			return sluice.SubscriptionInfo{}, fmt.Errorf("sluice: create subscription: %w", err)
		}
		req.Rules = append(req.Rules, pr)
	}
	res, err := call(ctx, c.entities.CreateSubscription, req)
	if err != nil {
		return sluice.SubscriptionInfo{}, err
	}
	return apiconv.FromSubscription(res.Subscription), nil
}

// GetSubscription returns a subscription with its settings and rules.
func (c *Client) GetSubscription(ctx context.Context, topic, name string) (sluice.SubscriptionInfo, error) {
	res, err := call(ctx, c.entities.GetSubscription, &sluicev1.GetSubscriptionRequest{Topic: topic, Name: name})
	if err != nil {
		return sluice.SubscriptionInfo{}, err
	}
	return apiconv.FromSubscription(res.Subscription), nil
}

// UpdateSubscription changes a subscription's settings as the library's
// UpdateSubscription does: forwarding is kept unless props.ForwardTo is
// set. props is a value, as the library's is.
func (c *Client) UpdateSubscription(ctx context.Context, topic, name string, props sluice.SubscriptionProperties) (sluice.SubscriptionInfo, error) {
	return c.updateSubscription(ctx, &sluicev1.UpdateSubscriptionRequest{Topic: topic, Name: name,
		Properties: apiconv.SubscriptionProperties(props)})
}

// UpdateSubscriptionForwarding is UpdateSubscription that sets where the
// subscription forwards to props.ForwardTo, "" for nowhere.
func (c *Client) UpdateSubscriptionForwarding(ctx context.Context, topic, name string, props sluice.SubscriptionProperties) (sluice.SubscriptionInfo, error) {
	return c.updateSubscription(ctx, &sluicev1.UpdateSubscriptionRequest{Topic: topic, Name: name,
		Properties: apiconv.SubscriptionProperties(props), ForwardTo: &props.ForwardTo})
}

func (c *Client) updateSubscription(ctx context.Context, req *sluicev1.UpdateSubscriptionRequest) (sluice.SubscriptionInfo, error) {
	res, err := call(ctx, c.entities.UpdateSubscription, req)
	if err != nil {
		return sluice.SubscriptionInfo{}, err
	}
	return apiconv.FromSubscription(res.Subscription), nil
}

// DeleteSubscription deletes a subscription with its messages.
func (c *Client) DeleteSubscription(ctx context.Context, topic, name string) error {
	_, err := call(ctx, c.entities.DeleteSubscription, &sluicev1.DeleteSubscriptionRequest{Topic: topic, Name: name})
	return err
}

// ListSubscriptions lists a topic's subscriptions in name order.
func (c *Client) ListSubscriptions(ctx context.Context, topic string) ([]sluice.SubscriptionInfo, error) {
	res, err := call(ctx, c.entities.ListSubscriptions, &sluicev1.ListSubscriptionsRequest{Topic: topic})
	if err != nil {
		return nil, err
	}
	out := make([]sluice.SubscriptionInfo, len(res.Subscriptions))
	for i, s := range res.Subscriptions {
		out[i] = apiconv.FromSubscription(s)
	}
	return out, nil
}

// CreateRule adds a rule to a subscription.
func (c *Client) CreateRule(ctx context.Context, topic, subscription string, r sluice.Rule) error {
	pr, err := apiconv.Rule(r)
	if err != nil {
		return fmt.Errorf("sluice: create rule: %w", err)
	}
	_, err = call(ctx, c.entities.CreateRule, &sluicev1.CreateRuleRequest{Topic: topic, Subscription: subscription, Rule: pr})
	return err
}

// DeleteRule removes a subscription's rule.
func (c *Client) DeleteRule(ctx context.Context, topic, subscription, rule string) error {
	_, err := call(ctx, c.entities.DeleteRule, &sluicev1.DeleteRuleRequest{Topic: topic, Subscription: subscription, Name: rule})
	return err
}

// ResubmitDeadLetters moves dead letters of an entity back to it, in
// atomic batches, reporting progress through opts.Progress; it returns
// how many moved.
// Under an Instrumentation it is one OperationResubmit without Received:
// the server, which moves the dead letters, sees them.
func (c *Client) ResubmitDeadLetters(ctx context.Context, entity string, opts *sluice.ResubmitOptions) (int, error) {
	if c.instr == nil {
		return c.resubmit(ctx, entity, opts)
	}
	var n int
	err := c.trace(ctx, &sluice.Operation{Kind: sluice.OperationResubmit, Entity: sluice.CanonicalName(entity), SubQueue: sluice.SubQueueDeadLetter},
		func(ctx context.Context) error {
			var err error
			n, err = c.resubmit(ctx, entity, opts)
			return err
		})
	return n, err
}

// resubmit does ResubmitDeadLetters' work.
func (c *Client) resubmit(ctx context.Context, entity string, opts *sluice.ResubmitOptions) (int, error) {
	req := &sluicev1.ResubmitDeadLettersRequest{Entity: entity}
	var progress func(done, total int)
	if opts != nil {
		req.SequenceNumbers, progress = opts.SequenceNumbers, opts.Progress
	}
	stream, err := c.messaging.ResubmitDeadLetters(ctx, req)
	if err != nil {
		return 0, apierr.ToLibrary(err)
	}
	defer stream.Close()
	done := 0
	for {
		msg, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return done, nil
		}
		if err != nil {
			return done, apierr.ToLibrary(err)
		}
		done = int(msg.Done)
		if progress != nil {
			progress(done, int(msg.Total))
		}
	}
}

// DeleteDeadLetters deletes the dead letters of an entity that seqs name,
// in one transaction, as sluice.Client.DeleteDeadLetters does, and
// returns how many it deleted.
func (c *Client) DeleteDeadLetters(ctx context.Context, entity string, seqs ...int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, fmt.Errorf("sluice: delete dead letters: no sequence numbers: %w", sluice.ErrInvalidArgument)
	}
	res, err := call(ctx, c.messaging.PurgeDeadLetters, &sluicev1.PurgeDeadLettersRequest{Entity: entity, SequenceNumbers: seqs})
	if err != nil {
		return 0, err
	}
	return res.Purged, nil
}

// PurgeDeadLetters deletes an entity's dead letters and returns how many.
func (c *Client) PurgeDeadLetters(ctx context.Context, entity string) (int64, error) {
	res, err := call(ctx, c.messaging.PurgeDeadLetters, &sluicev1.PurgeDeadLettersRequest{Entity: entity})
	if err != nil {
		return 0, err
	}
	return res.Purged, nil
}

// DeadLetterReasons counts an entity's dead letters by reason.
func (c *Client) DeadLetterReasons(ctx context.Context, entity string) (map[string]int64, error) {
	res, err := call(ctx, c.messaging.ListDeadLetterReasons, &sluicev1.ListDeadLetterReasonsRequest{Entity: entity})
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(res.Reasons))
	for _, r := range res.Reasons {
		out[r.Reason] = r.Count
	}
	return out, nil
}

// DeleteMessages deletes messages of a queue or subscription that no
// lock holds, without receiving them, as the library's does.
func (c *Client) DeleteMessages(ctx context.Context, entity string, opts *sluice.DeleteOptions) (int64, error) {
	if opts == nil {
		return 0, fmt.Errorf("sluice: delete messages: no options: name sequence numbers or a count: %w", sluice.ErrInvalidArgument)
	}
	if opts.Max > math.MaxInt32 {
		return 0, fmt.Errorf("sluice: delete messages: max %d: too many: %w", opts.Max, sluice.ErrInvalidArgument)
	}
	res, err := call(ctx, c.messaging.DeleteMessages, &sluicev1.DeleteMessagesRequest{Entity: entity, SequenceNumbers: opts.SequenceNumbers,
		MaxMessages: int32(opts.Max), EnqueuedBefore: apiconv.Timestamp(opts.EnqueuedBefore)})
	if err != nil {
		return 0, err
	}
	return res.Deleted, nil
}

// PurgeMessages deletes every message of a queue or subscription that no
// lock holds (only those enqueued before enqueuedBefore, when it is not
// zero), as the library's does, and returns how many.
func (c *Client) PurgeMessages(ctx context.Context, entity string, enqueuedBefore time.Time) (int64, error) {
	res, err := call(ctx, c.messaging.PurgeMessages, &sluicev1.PurgeMessagesRequest{Entity: entity,
		EnqueuedBefore: apiconv.Timestamp(enqueuedBefore)})
	if err != nil {
		return 0, err
	}
	return res.Purged, nil
}

// ClusterStatus describes the server's stream nodes and partitions.
func (c *Client) ClusterStatus(ctx context.Context) (sluice.ClusterStatus, error) {
	res, err := call(ctx, c.cluster.GetClusterStatus, &sluicev1.GetClusterStatusRequest{})
	if err != nil {
		return sluice.ClusterStatus{}, err
	}
	return apiconv.FromClusterStatus(res), nil
}

// EntityStats is an entity's counts, as ListEntityStats lists them.
type EntityStats struct {
	// Entity is a queue's name or a subscription's path; Topic the
	// subscription's topic ("" for a queue).
	Entity, Topic string
	sluice.QueueStats
}

// ListEntityStats pages through the queues and subscriptions the key may
// see, in the order of their paths, with their counts: up to max after
// the path after.
func (c *Client) ListEntityStats(ctx context.Context, after string, max int) ([]EntityStats, error) {
	res, err := call(ctx, c.entities.ListEntityStats, &sluicev1.ListEntityStatsRequest{After: after, Max: int32(max)})
	if err != nil {
		return nil, err
	}
	out := make([]EntityStats, len(res.Entities))
	for i, e := range res.Entities {
		out[i] = EntityStats{Entity: e.Entity, Topic: e.Topic, QueueStats: apiconv.FromStats(e.Stats)}
	}
	return out, nil
}

// ThroughputSample is one bucket of the server's rates, per second,
// ending at At.
type ThroughputSample struct {
	At                      time.Time
	Sent, Received, Settled float64
}

// Throughput returns the server's rates of messages sent, received and
// settled over the last minutes, oldest first, and the bucket each
// sample spans.
func (c *Client) Throughput(ctx context.Context) (time.Duration, []ThroughputSample, error) {
	res, err := call(ctx, c.stats.GetThroughput, &sluicev1.GetThroughputRequest{})
	if err != nil {
		return 0, nil, err
	}
	out := make([]ThroughputSample, len(res.Samples))
	for i, s := range res.Samples {
		out[i] = ThroughputSample{At: apiconv.Time(s.At), Sent: s.Sent, Received: s.Received, Settled: s.Settled}
	}
	return apiconv.Duration(res.Bucket), out, nil
}

// EntitySample is what a server sampled of a queue or subscription at
// At: its messages by state, and that server's rates since the sample
// before, in messages per second, of messages sent to it, received from
// it and settled (completed, abandoned, dead-lettered or deferred)
// through its API.
type EntitySample struct {
	At                                                           time.Time
	Active, InFlight, Scheduled, Deferred, DeadLettered, Expired int64
	Sent, Received, Settled                                      float64
}

// EntityHistory returns what the server sampled of a queue or a
// subscription (its path) over the last hour, oldest first, and how
// often it samples. Each server keeps its own history, from its start:
// its rates count its own calls. An entity that does not exist is
// sluice.ErrEntityNotFound; one the server has not sampled (new since
// its last sample, or past the first 1,000 entities) has no samples.
func (c *Client) EntityHistory(ctx context.Context, entity string) (time.Duration, []EntitySample, error) {
	res, err := call(ctx, c.stats.GetEntityHistory, &sluicev1.GetEntityHistoryRequest{Entity: entity})
	if err != nil {
		return 0, nil, err
	}
	out := make([]EntitySample, len(res.Samples))
	for i, s := range res.Samples {
		out[i] = EntitySample{At: apiconv.Time(s.At), Active: s.Active, InFlight: s.InFlight, Scheduled: s.Scheduled,
			Deferred: s.Deferred, DeadLettered: s.DeadLettered, Expired: s.Expired, Sent: s.Sent, Received: s.Received, Settled: s.Settled}
	}
	return apiconv.Duration(res.Interval), out, nil
}

// LagSample is a stream lag a server sampled at At: records past the
// stored positions.
type LagSample struct {
	At  time.Time
	Lag int64
}

// ConsumerLagHistory is a consumer's lag in a namespace over time,
// summed over its subscriptions there and their partitions; Group is
// that of the live processors serving it at the last sample ("" for the
// default group, or none).
type ConsumerLagHistory struct {
	Group, Consumer, Namespace string
	Samples                    []LagSample
}

// SubscriptionLagHistory is a stream subscription's lag over time,
// summed over its partitions; Key is "" for a subscription to a whole
// namespace.
type SubscriptionLagHistory struct {
	ID, Consumer, Namespace, Key string
	Samples                      []LagSample
}

// ConsumerLagHistory returns the lag the server sampled over the last
// hour, oldest first, of a consumer in each of its namespaces ("": of
// every consumer), up to max series (0: 10; at most 1,000), those
// lagging most at the last sample first, and how often it samples.
func (c *Client) ConsumerLagHistory(ctx context.Context, consumer string, max int) (time.Duration, []ConsumerLagHistory, error) {
	if max < 0 || max > math.MaxInt32 {
		return 0, nil, fmt.Errorf("sluice: consumer lag history: max %d: %w", max, sluice.ErrInvalidArgument)
	}
	res, err := call(ctx, c.stats.GetStreamLagHistory, &sluicev1.GetStreamLagHistoryRequest{Consumer: consumer, Max: int32(max)})
	if err != nil {
		return 0, nil, err
	}
	out := make([]ConsumerLagHistory, len(res.Consumers))
	for i, h := range res.Consumers {
		out[i] = ConsumerLagHistory{Group: h.Group, Consumer: h.Consumer, Namespace: h.Namespace, Samples: lagSamples(h.Samples)}
	}
	return apiconv.Duration(res.Interval), out, nil
}

// SubscriptionLagHistory returns the lag the server sampled of a stream
// subscription over the last hour, oldest first, and how often it
// samples. A subscription that does not exist is
// sluice.ErrSubscriptionNotFound; the server samples the 1,000 lagging
// most, so one past them has no samples.
func (c *Client) SubscriptionLagHistory(ctx context.Context, subscription string) (time.Duration, SubscriptionLagHistory, error) {
	if subscription == "" {
		return 0, SubscriptionLagHistory{}, fmt.Errorf("sluice: subscription lag history: no subscription: %w", sluice.ErrInvalidArgument)
	}
	res, err := call(ctx, c.stats.GetStreamLagHistory, &sluicev1.GetStreamLagHistoryRequest{Subscription: subscription})
	if err != nil {
		return 0, SubscriptionLagHistory{}, err
	}
	h := res.Subscription
	return apiconv.Duration(res.Interval), SubscriptionLagHistory{ID: h.GetId(), Consumer: h.GetConsumer(), Namespace: h.GetNamespace(),
		Key: h.GetKey(), Samples: lagSamples(h.GetSamples())}, nil
}

func lagSamples(in []*sluicev1.LagSample) []LagSample {
	out := make([]LagSample, len(in))
	for i, s := range in {
		out[i] = LagSample{At: apiconv.Time(s.At), Lag: s.Lag}
	}
	return out
}

// maxWait is the longest wait one receive call asks the server for; a
// Receive waits longer by calling again.
const maxWait = 50 * time.Second
