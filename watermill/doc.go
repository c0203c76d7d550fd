// Package watermill runs code written against Watermill
// (github.com/ThreeDotsLabs/watermill) on sluice: a Publisher and a
// Subscriber that implement Watermill's message.Publisher and
// message.Subscriber over sluice's queues, topics or streams, on either
// client (the library's, or the network client's).
//
// A Watermill topic names a sluice entity of the kind the Config says:
//
//   - Queues (the default): the topic is a queue. Every subscriber of a
//     topic competes for its messages: each message goes to one of them.
//   - Topics: the topic is a sluice topic and a subscriber's consumer
//     group one of its subscriptions. Every group gets every message
//     published after the group's subscription was created
//     (SubscribeInitialize creates it); the subscribers of one group
//     compete, as Watermill's consumer groups do.
//   - Streams: the topic is a stream namespace, and a message's stream
//     the key its metadata field Config.StreamKey names. A subscriber's
//     consumer group is the stream consumer "TOPIC/GROUP", subscribed to
//     the whole namespace (SubscribeInitialize stores its subscription);
//     each stream's events come in order, one at a time across the
//     group's subscribers (unless one comes again while its first copy
//     is still being handled), and different streams' in parallel. See
//     "Streams" below.
//
// A message's UUID travels as its MessageID, so duplicate detection
// applies where the entity has it, and its metadata as application
// properties. A subscriber hands out one message at a time and waits for
// its Ack or Nack before the next, as Watermill's subscribers do. Ack has
// the message completed, in batches behind the subscription: the
// completion is durable when its batch commits, not when Ack returns (at
// least once: a crash in between delivers the message again). Nack
// abandons it, after the Config's retry delay if any, which counts a
// delivery, so that a message nacked MaxDeliveryCount times is
// dead-lettered, as Service Bus does (raise the entity's MaxDeliveryCount
// where Watermill's own middleware, such as its poison queue, bounds
// retries instead). With one subscriber, and no retry delay, messages
// come in the order they were sent, also across a Nack. The lock of a message handed out is renewed until it is acked or
// nacked, up to MaxLockRenewal. A message's context ends when it is acked
// or nacked, or when its subscription ends.
//
// With Config.AutoCreate, a missing queue, topic or subscription is
// created, with the Config's properties, by SubscribeInitialize, by
// Subscribe and by Publish. Without it, they must exist (sluice's CLI,
// dashboard or API create them).
//
// On an entity that requires sessions, a Publisher sends each message in
// the session its metadata field Config.SessionKey names, and a
// Subscriber receives session by session, each session's messages in
// order, across competing subscribers and Nacks.
//
// Transactions, as Watermill's SQL Pub/Sub has them, on the library's
// client: NewTxPublisher publishes in the application's transaction (the
// transactional outbox), and a Subscriber with a Config.DB hands each
// message out with a transaction of its own (TxFromContext) that an Ack
// commits with the message's completion and a Nack rolls back, so that
// the handler's writes there happen once for each message completed.
//
// # Streams
//
// On Streams, a message's UUID rides in the event's property
// UUIDProperty and its metadata in the others. The subscriptions of one
// consumer on one client in a process share a stream processor, in a
// group of stream nodes of the consumer's own, started with the first
// subscription and stopped with the last. Its handler hands each event
// to a subscription ready for its next message and returns as the
// message's Ack or Nack says: a Nack, or no Ack within the consumer's
// DeliveryTimeout of the message going out, fails the attempt, and the
// event comes again after
// the consumer's RetryBackoff, up to its MaxAttempts, then is parked (or
// its subscription faulted) so that its stream goes on
// (Config.ConsumerOptions). A subscription that ends with a message out
// hands it back without counting an attempt. The settings of queues are
// refused on Streams, and so is a Config.DB: a subscriber of streams has
// no transaction of its own yet. NewTxPublisher appends in the
// application's transaction.
package watermill
