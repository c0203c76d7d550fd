package sluice

import (
	"context"
	"time"
)

// API is what the library's *Client (on a database) and package client's
// *client.Client (through a server) both offer, so that code written
// against API runs on either by changing the constructor. Each client
// keeps its own concrete types for what only it can do (the library's
// transactional twins, the server's history); the factories of API
// return interfaces, the New* methods of each client its concrete types.
type API interface {
	EntityManager
	Messaging
	Streaming
	// Close releases the client.
	Close() error
}

// EntityManager creates, reads, changes and deletes queues, topics,
// subscriptions and their rules, counts and purges their messages, and
// manages dead letters.
type EntityManager interface {
	CreateQueue(ctx context.Context, name string, props *QueueProperties) (QueueInfo, error)
	CreateQueueForwarding(ctx context.Context, name string, props *QueueProperties, forwardTo string) (QueueInfo, error)
	GetQueue(ctx context.Context, name string) (QueueInfo, error)
	ListQueues(ctx context.Context, after string, max int) ([]QueueInfo, error)
	ListQueuesWithPrefix(ctx context.Context, prefix, after string, max int) ([]QueueInfo, error)
	UpdateQueue(ctx context.Context, name string, props QueueProperties) (QueueInfo, error)
	UpdateQueueForwarding(ctx context.Context, name string, props QueueProperties, forwardTo string) (QueueInfo, error)
	DeleteQueue(ctx context.Context, name string) error
	GetQueueStats(ctx context.Context, name string) (QueueStats, error)

	CreateTopic(ctx context.Context, name string, props *TopicProperties) (TopicInfo, error)
	GetTopic(ctx context.Context, name string) (TopicInfo, error)
	ListTopics(ctx context.Context, after string, max int) ([]TopicInfo, error)
	ListTopicsWithPrefix(ctx context.Context, prefix, after string, max int) ([]TopicInfo, error)
	UpdateTopic(ctx context.Context, name string, props TopicProperties) (TopicInfo, error)
	DeleteTopic(ctx context.Context, name string) error

	CreateSubscription(ctx context.Context, topic, name string, props *SubscriptionProperties, rules ...Rule) (SubscriptionInfo, error)
	GetSubscription(ctx context.Context, topic, name string) (SubscriptionInfo, error)
	ListSubscriptions(ctx context.Context, topic string) ([]SubscriptionInfo, error)
	ListSubscriptionsWithPrefix(ctx context.Context, topic, prefix, after string, max int) ([]SubscriptionInfo, error)
	UpdateSubscription(ctx context.Context, topic, name string, props SubscriptionProperties) (SubscriptionInfo, error)
	UpdateSubscriptionForwarding(ctx context.Context, topic, name string, props SubscriptionProperties) (SubscriptionInfo, error)
	DeleteSubscription(ctx context.Context, topic, name string) error
	CreateRule(ctx context.Context, topic, subscription string, r Rule) error
	DeleteRule(ctx context.Context, topic, subscription, rule string) error
	ListMessageEntities(ctx context.Context, prefix, after string, max int) ([]MessageEntity, error)

	ResubmitDeadLetters(ctx context.Context, entity string, opts *ResubmitOptions) (int, error)
	PurgeDeadLetters(ctx context.Context, entity string) (int64, error)
	DeleteDeadLetters(ctx context.Context, entity string, seqs ...int64) (int64, error)
	DeadLetterReasons(ctx context.Context, entity string) (map[string]int64, error)
	DeleteMessages(ctx context.Context, entity string, opts *DeleteOptions) (int64, error)
	PurgeMessages(ctx context.Context, entity string, enqueuedBefore time.Time) (int64, error)

	ClusterStatus(ctx context.Context) (ClusterStatus, error)
}

// Messaging opens senders, receivers and session receivers of queues and
// subscriptions, and runs processors over them. Its methods are the New* and Accept* ones of each
// client, returning interfaces: Go has no covariant results, so
// *Client.NewSender, which returns *Sender, cannot be the method of an
// interface whose other implementation returns another type.
type Messaging interface {
	// MessageSender is NewSender's sender.
	MessageSender(entity string) (MessageSender, error)
	// MessageReceiver is NewReceiver's receiver.
	MessageReceiver(entity string, opts *ReceiverOptions) (MessageReceiver, error)
	// AcceptMessageSession is AcceptSession's session receiver.
	AcceptMessageSession(ctx context.Context, queue, sessionID string, opts *ReceiverOptions) (MessageSessionReceiver, error)
	// AcceptNextMessageSession is AcceptNextSession's session receiver.
	AcceptNextMessageSession(ctx context.Context, queue string, opts *ReceiverOptions) (MessageSessionReceiver, error)
	// ResumeMessageSession is ResumeSession's session receiver.
	ResumeMessageSession(queue, sessionID, lockToken string, opts *ReceiverOptions) (MessageSessionReceiver, error)
	// MessageProcessor is a processor of the entity's messages that runs
	// a MessageHandler: the same concrete *Processor on either client.
	MessageProcessor(entity string, h MessageHandler, opts *ProcessorOptions) (*Processor, error)
}

// Streaming publishes to streams, manages their subscriptions and
// retention, follows them, and runs stream processors.
type Streaming interface {
	Publish(ctx context.Context, id StreamID, events ...Event) ([]int64, error)
	TailStream(ctx context.Context, namespace, key string, each func(*StreamEvent) error, opts *TailOptions) error
	Subscribe(ctx context.Context, id StreamID, consumer string, from StartPosition) (StreamSubscription, error)
	Unsubscribe(ctx context.Context, subscription string) error
	StreamSubscriptions(ctx context.Context, id StreamID) ([]StreamSubscription, error)
	ListStreamSubscriptions(ctx context.Context, id StreamID, opts *StreamSubscriptionListOptions) ([]StreamSubscription, error)
	GetStreamSubscription(ctx context.Context, subscription string) (StreamSubscription, error)
	ClearFault(ctx context.Context, subscription string) error
	ParkedEvents(ctx context.Context, subscription string, max int) ([]ParkedEvent, error)
	RepositionStreamSubscription(ctx context.Context, subscription string, to StartPosition, opts *RepositionOptions) (StreamReposition, error)
	SetStreamRetention(ctx context.Context, namespace string, r StreamRetention) error
	// StreamEventProcessor is NewStreamProcessor's processor.
	StreamEventProcessor(opts *StreamProcessorOptions) StreamEventProcessor
}

// MessageSender sends messages to a queue or a topic.
type MessageSender interface {
	Send(ctx context.Context, m *Message) (int64, error)
	SendBatch(ctx context.Context, msgs []*Message) ([]int64, error)
	CancelScheduled(ctx context.Context, seqs ...int64) error
}

// MessageSource receives and settles messages: what a receiver of a
// queue or subscription and a session's receiver share.
type MessageSource interface {
	Receive(ctx context.Context, max int) ([]*ReceivedMessage, error)
	TryReceive(ctx context.Context, max int) ([]*ReceivedMessage, error)
	ReceiveDeferred(ctx context.Context, seqs ...int64) ([]*ReceivedMessage, error)
	Complete(ctx context.Context, m *ReceivedMessage) error
	CompleteBatch(ctx context.Context, msgs []*ReceivedMessage) error
	Abandon(ctx context.Context, m *ReceivedMessage, opts *AbandonOptions) error
	DeadLetter(ctx context.Context, m *ReceivedMessage, opts *DeadLetterOptions) error
	Defer(ctx context.Context, m *ReceivedMessage, opts *DeferOptions) error
}

// MessageReceiver receives, settles and inspects the messages of a queue
// or a subscription (or of its dead-letter queue).
type MessageReceiver interface {
	MessageSource
	Entity() string
	Peek(ctx context.Context, max int, opts *PeekOptions) ([]*ReceivedMessage, error)
	Browse(ctx context.Context, max int, opts *BrowseOptions) (BrowsePage, error)
	RenewLock(ctx context.Context, m *ReceivedMessage) error
}

// MessageSessionReceiver receives and settles the messages of one
// session it holds the lock of, and keeps the session's state.
type MessageSessionReceiver interface {
	MessageSource
	SessionID() string
	LockToken() string
	LockedUntil() time.Time
	RenewSessionLock(ctx context.Context) error
	SessionState(ctx context.Context) ([]byte, error)
	SetSessionState(ctx context.Context, state []byte) error
	Close(ctx context.Context) error
}

// StreamEventProcessor runs stream handlers for consumers.
type StreamEventProcessor interface {
	Handle(consumer string, h StreamHandler, opts *ConsumerOptions) error
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	Replay(ctx context.Context, subscription string, max int) (int, error)
}

// MessageSender returns NewSender's sender as a MessageSender.
func (c *Client) MessageSender(entity string) (MessageSender, error) {
	s, err := c.NewSender(entity)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// MessageReceiver returns NewReceiver's receiver as a MessageReceiver.
func (c *Client) MessageReceiver(entity string, opts *ReceiverOptions) (MessageReceiver, error) {
	r, err := c.NewReceiver(entity, opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// AcceptMessageSession returns AcceptSession's session receiver as a
// MessageSessionReceiver.
func (c *Client) AcceptMessageSession(ctx context.Context, queue, sessionID string, opts *ReceiverOptions) (MessageSessionReceiver, error) {
	s, err := c.AcceptSession(ctx, queue, sessionID, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// AcceptNextMessageSession returns AcceptNextSession's session receiver
// as a MessageSessionReceiver.
func (c *Client) AcceptNextMessageSession(ctx context.Context, queue string, opts *ReceiverOptions) (MessageSessionReceiver, error) {
	s, err := c.AcceptNextSession(ctx, queue, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ResumeMessageSession returns ResumeSession's session receiver as a
// MessageSessionReceiver.
func (c *Client) ResumeMessageSession(queue, sessionID, lockToken string, opts *ReceiverOptions) (MessageSessionReceiver, error) {
	s, err := c.ResumeSession(queue, sessionID, lockToken, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// StreamEventProcessor returns NewStreamProcessor's processor as a
// StreamEventProcessor.
func (c *Client) StreamEventProcessor(opts *StreamProcessorOptions) StreamEventProcessor {
	return c.NewStreamProcessor(opts)
}

// The library implements the shared shape.
var (
	_ API                    = (*Client)(nil)
	_ MessageSender          = (*Sender)(nil)
	_ MessageReceiver        = (*Receiver)(nil)
	_ MessageSessionReceiver = (*SessionReceiver)(nil)
	_ StreamEventProcessor   = (*StreamProcessor)(nil)
)
