// Package sluicetype holds the lowest shared types of sluice: messages,
// receipts, partition log records, dead-letter reasons and the sentinel
// errors every layer wraps. It imports nothing of sluice, so storage
// backends, the engine and the public API can all depend on it.
package sluicetype
