//go:build !sluice_mattn && !sluice_ncruces

package sqlite

import (
	_ "modernc.org/sqlite" // the default driver: pure Go, no cgo
)

const (
	driverName   = "sqlite"
	driverModule = "modernc.org/sqlite"
)

// dsn builds a modernc.org/sqlite connection string.
func dsn(path, sync string, readOnly bool) string { return pragmaDSN(path, sync, readOnly) }
