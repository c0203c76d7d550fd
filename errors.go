package sluice

import "github.com/sluicehq/sluice/sluicetype"

// Errors of opening, migrating and storage that calls of this package
// return, besides those declared with the calls they concern (client.go,
// session.go, stream.go, topic.go); every sentinel of package sluicetype
// is here under the same name.
var (
	// ErrContention reports a transaction that kept failing with
	// deadlocks, serialization failures or busy errors after bounded
	// retries; nothing was written and the call may be retried.
	ErrContention = sluicetype.ErrContention
	// ErrSchemaTooNew reports a database migrated by a newer sluice than
	// this one; the error is a *SchemaVersionError naming both versions.
	ErrSchemaTooNew = sluicetype.ErrSchemaTooNew
	// ErrSchemaTooOld reports a database opened with
	// Options.SkipMigrations whose schema lacks migrations this sluice
	// needs; the error is a *SchemaVersionError naming both versions.
	ErrSchemaTooOld = sluicetype.ErrSchemaTooOld
	// ErrNoSessionAvailable reports an accept of the next session when no
	// session has messages and no live lock.
	ErrNoSessionAvailable = sluicetype.ErrNoSessionAvailable
	// ErrQueueNotFound is ErrEntityNotFound, by the name storage uses.
	ErrQueueNotFound = sluicetype.ErrQueueNotFound
	// ErrQueueExists is ErrEntityExists, by the name storage uses.
	ErrQueueExists = sluicetype.ErrQueueExists
)

// SchemaVersionError reports a database whose schema version differs
// from the one this sluice requires: errors.Is matches it to
// ErrSchemaTooOld or ErrSchemaTooNew, and its fields name both versions.
type SchemaVersionError = sluicetype.SchemaVersionError
