package main

import (
	"context"
	"errors"
	"time"
)

// errSkip says that a system has no counterpart of a case: its row shows
// "-" with the reason.
var errSkip = errors.New("no counterpart")

// env is what every system may use: the PostgreSQL DSN (empty: the
// PostgreSQL systems are skipped), a directory for files, and the SQLite
// synchronous setting.
type env struct {
	pg         string
	dir        string
	sqliteSync string
}

// queuePeer is one queue system, opened fresh (its own tables, schema or
// directory) for one run of one case.
type queuePeer interface {
	// send sends bodies in one call: one message a call for a single body,
	// the system's batch call for more.
	send(ctx context.Context, bodies [][]byte) error
	// consume runs consumers that receive, hand each body to handle and
	// complete (delete, acknowledge) what they received, until ctx ends.
	consume(ctx context.Context, consumers int, handle func(body []byte)) error
	// close stops the system and removes what open made.
	close(ctx context.Context) error
}

// lockingPeer is a queue system with messages a receive locks without
// settling them: the "receive 32 with 50,000 locked" case.
type lockingPeer interface {
	queuePeer
	// lock receives n messages, 1,000 a call, and leaves them locked.
	lock(ctx context.Context, n int) error
	// receive32 receives up to 32 messages and returns how long the
	// receive took, then completes them (not timed).
	receive32(ctx context.Context) (time.Duration, error)
}

// processorPeer is a queue system whose library runs handlers itself
// beside the receive-and-complete loop of consume: sluice's Processor.
type processorPeer interface {
	queuePeer
	// process runs processors of 32 handlers each until ctx ends.
	process(ctx context.Context, processors int, handle func(body []byte)) error
}

// streamPeer is one stream system, opened fresh for one run of one case.
type streamPeer interface {
	// publish appends bodies to the stream named key in one call.
	publish(ctx context.Context, key string, bodies [][]byte) error
	// consume runs consumers that deliver every event published, before
	// or after the call, to handle, until ctx ends.
	consume(ctx context.Context, consumers int, handle func(body []byte)) error
	// close stops the system and removes what open made.
	close(ctx context.Context) error
}

// system names a system and opens it. A system has a queue side, a
// stream side or both; raw is the database's own limit, a table of the
// same shape with nothing but inserts.
type system struct {
	name    string
	backend string // "postgres", "sqlite" or "jetstream": ratios compare with sluice on the same backend
	queue   func(ctx context.Context, e *env) (queuePeer, error)
	stream  func(ctx context.Context, e *env) (streamPeer, error)
	raw     bool
	// processor says that the queue side is a processorPeer.
	processor bool
}

// systems are every system the harness knows, in the order of the tables.
var systems = []system{
	{name: "sluice", backend: "postgres", queue: openSluiceQueuePG, stream: openSluiceStreamPG, processor: true},
	{name: "river", backend: "postgres", queue: openRiver},
	{name: "watermill", backend: "postgres", stream: openWatermill},
	{name: "raw-postgres", backend: "postgres", queue: openRawPG, stream: rawAsStream(openRawPG), raw: true},
	{name: "sluice-sqlite", backend: "sqlite", queue: openSluiceQueueSQLite, stream: openSluiceStreamSQLite, processor: true},
	{name: "goqite", backend: "sqlite", queue: openGoqite},
	{name: "raw-sqlite", backend: "sqlite", queue: openRawSQLite, stream: rawAsStream(openRawSQLite), raw: true},
	{name: "jetstream-fsync", backend: "jetstream", queue: openJetStreamQueue(true), stream: openJetStreamStream(true)},
	{name: "jetstream", backend: "jetstream", queue: openJetStreamQueue(false), stream: openJetStreamStream(false)},
}

// rawAsStream lets the raw limit stand in the stream tables' publish
// rows: an append is an insert.
func rawAsStream(open func(ctx context.Context, e *env) (queuePeer, error)) func(ctx context.Context, e *env) (streamPeer, error) {
	return func(ctx context.Context, e *env) (streamPeer, error) {
		q, err := open(ctx, e)
		if err != nil {
			return nil, err
		}
		return rawStream{q}, nil
	}
}

// rawStream is a raw table seen as a stream.
type rawStream struct{ queuePeer }

func (r rawStream) publish(ctx context.Context, _ string, bodies [][]byte) error {
	return r.send(ctx, bodies)
}
