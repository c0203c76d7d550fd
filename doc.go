// Package sluice is durable messaging for Go on the SQL database you
// already run: embedded SQLite with zero setup, PostgreSQL or MariaDB/MySQL
// when many nodes share the work.
//
// Queues follow Azure Service Bus: open a Client, create a queue, send
// with a Sender and receive with a Receiver or a Processor. A program
// links the database backends it imports, as database/sql links drivers:
//
//	import _ "github.com/sluicehq/sluice/store/sqlite" // or store/postgres, store/mysql
//
//	c, err := sluice.Open(ctx, "sqlite://./sluice-data/sluice.db", nil)
//	if err != nil { ... }
//	defer c.Close()
//	c.CreateQueue(ctx, "orders", nil)
//	s, _ := c.NewSender("orders")
//	s.Send(ctx, &sluice.Message{Body: []byte("one pizza")})
//	r, _ := c.NewReceiver("orders", nil)
//	msgs, err := r.Receive(ctx, 10) // waits until messages arrive
//	err = r.Complete(ctx, msgs[0])
//
// A message received in PeekLock mode (the default) is locked for the
// queue's lock duration: complete it, abandon it (delivered again),
// dead-letter it or defer it; if the lock ends first, it is delivered
// again with a higher delivery count, and the settle fails with
// ErrLockLost. After MaxDeliveryCount deliveries it is dead-lettered.
//
// Topics copy each message to the subscriptions whose rules match
// (CreateTopic, CreateSubscription, SubscriptionPath); sessions keep a
// session's messages in order under one receiver (AcceptSession,
// AcceptNextSession); every entity has a dead-letter queue
// (ReceiverOptions.SubQueue, ResubmitDeadLetters); and SendTx sends in the
// application's own database transaction (a *sql.Tx, or on PostgreSQL a
// pgx.Tx through postgres.WrapTx), as CompleteTx and the other *Tx
// calls settle in it.
//
// OpenDB runs a client on the application's own *sql.DB. Open migrates
// the schema unless Options.SkipMigrations; a Migrator (NewMigrator)
// applies and reports migrations as a step of its own.
//
// Underneath, package store holds the storage seam (durable queues and
// partition logs) with a backend per database; OpenBackend opens one for
// code that works at that level.
package sluice
