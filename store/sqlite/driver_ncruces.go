//go:build sluice_ncruces

package sqlite

import (
	_ "github.com/ncruces/go-sqlite3/driver" // WebAssembly driver, for measurement (-tags sluice_ncruces)
)

const (
	driverName   = "sqlite3"
	driverModule = "github.com/ncruces/go-sqlite3"
)

// dsn builds a ncruces/go-sqlite3 connection string; it reads the same
// parameters as modernc.org/sqlite.
func dsn(path, sync string, readOnly bool) string { return pragmaDSN(path, sync, readOnly) }
