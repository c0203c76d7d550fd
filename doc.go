// Package sluice is durable messaging for Go on the SQL database you
// already run: embedded SQLite with zero setup, PostgreSQL or MariaDB/MySQL
// when many nodes share the work.
//
// This release holds the storage foundation: durable queues (leases with
// receipts, settles, dead letters, eviction) and partition logs (gap-free
// positions, checkpoints with fencing, retention) behind the seam in
// package store, with a backend per database. Open one by DSN:
//
//	b, err := sluice.OpenBackend(ctx, "sqlite://./sluice-data/sluice.db", sluice.Options{})
//	if err != nil { ... }
//	defer b.Close()
//	s, err := b.Store(store.Tenant{Service: "shop", Provider: "default"})
//
// The Service Bus style queue API, Orleans style streams, the cluster and
// the server build on it (see the roadmap in README.md).
package sluice
