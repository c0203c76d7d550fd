// Package store is the storage seam of sluice: the small set of semantic
// operations that every database backend implements, their parameter
// structs, the limits and validation they share, and the Features a backend
// declares to the conformance suite.
//
// Two primitives live behind the seam:
//
//   - Queue entities: batches of messages enqueued atomically, each with a
//     gap-free sequence number assigned in commit order; leases with a
//     visibility timeout and a receipt; settles by receipt (complete,
//     abandon, dead-letter, extend); dead letters with reasons; opportunistic
//     eviction driven by a control row per queue.
//   - Partition logs: records appended atomically at gap-free positions in
//     commit order, read after a position, checkpointed per consumer behind
//     an owner epoch, and trimmed by retention.
//
// Every operation is scoped to a Tenant (service, provider), takes a
// context first and a *Params struct second, and returns errors that wrap
// the sentinels of package sluicetype. Backends live in the sqlite,
// postgres and mysql subpackages, each of which registers a store.Opener
// for its DSN schemes when imported (Register, Lookup), so that a program
// links only the backends it imports; storetest holds the suite they all
// pass. Migrator applies and reports a backend's schema migrations.
package store
