package sluicetype

import "fmt"

// SchemaVersionError reports a database whose schema version is not the
// one this sluice requires. errors.Is matches it to ErrSchemaTooOld when
// the database is behind and to ErrSchemaTooNew when it is ahead;
// errors.As finds it to read both versions.
type SchemaVersionError struct {
	// Database is the highest migration version the database has applied
	// (0: none, an empty database).
	Database int
	// Required is the highest migration version this sluice knows: the one
	// it needs.
	Required int
}

// Error says which versions differ and how to resolve it.
func (e *SchemaVersionError) Error() string {
	if e.Database > e.Required {
		return fmt.Sprintf("%v: the database is at schema version %d, this sluice knows up to %d (upgrade sluice)",
			ErrSchemaTooNew, e.Database, e.Required)
	}
	return fmt.Sprintf("%v: the database is at schema version %d, this sluice requires %d (run `sluice migrate up` or Migrator.Up)",
		ErrSchemaTooOld, e.Database, e.Required)
}

// Is matches ErrSchemaTooNew or ErrSchemaTooOld, whichever applies.
func (e *SchemaVersionError) Is(target error) bool {
	if e.Database > e.Required {
		return target == ErrSchemaTooNew
	}
	return target == ErrSchemaTooOld
}
