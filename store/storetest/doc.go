// Package storetest is the conformance suite every sluice storage backend
// passes, in the manner of watermill's tests.TestPubSub and River's
// riverdrivertest: one entry point, Run, exercises every semantic of the
// storage seam (package store) against a backend, and a backend that cannot
// do something declares it in store.Features so the suite skips that part
// with a stated reason.
//
// A backend's test wires it in a few lines:
//
//	func TestConformance(t *testing.T) {
//		path := filepath.Join(t.TempDir(), "sluice.db")
//		storetest.Run(t, func(t *testing.T) store.Backend {
//			b, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// Every call of open must return a Backend on the same database, with the
// default store.Limits: the suite opens it once for all its tests, and
// again in the tests that need a Backend of their own (one that they close,
// or one that plays another process for cross-process wake-ups). Each
// Backend's Close is called by the test that closes it and again by the
// cleanup that open registered, so Close must tolerate a second call. Each
// test isolates itself in a tenant of its
// own, so the tests run in parallel against the one database and never need
// it to be empty.
//
// The suite's groups follow the seam: Queue (queue CRUD, enqueue
// round trips and sequence numbers, leases, peek, stats, wake-ups, closed
// backends), Settle (complete, abandon, dead-letter, extend, stale
// receipts), Expiry (lease expiry, delivery counts, TTL, eviction,
// retention), DeadLetters, Log (positions, reads, trims, checkpoints),
// Concurrency (concurrent enqueuers, exclusive leases, gap-safe tailing,
// no loss), Isolation (tenants), Validation (every bad input refused with
// a typed error and nothing written) and Model (random operation
// sequences checked against an in-memory model with pgregory.net/rapid).
//
// The package also holds CrashTest, which kills a child process writing to
// the backend and checks that every acknowledged write survived, and Bench,
// the benchmarks every backend runs so that they are measured the same way.
package storetest
