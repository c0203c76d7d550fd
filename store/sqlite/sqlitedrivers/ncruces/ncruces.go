// Package ncruces runs sluice's SQLite backend on
// github.com/ncruces/go-sqlite3, SQLite compiled to WebAssembly and
// translated to Go by wasm2go (pure Go, no cgo). sluice's own backend runs on
// modernc.org/sqlite; this driver is kept for measuring against it
// (docs/benchmarks.md in sluice's repository).
//
// Importing the package registers the DSN scheme sqlite-ncruces://PATH
// (with the optional ?synchronous=FULL or NORMAL of sqlite://) and lets
// sluice.OpenDB take a pool opened on the driver. It cannot be linked
// beside package mattn: both drivers register the database/sql name
// "sqlite3", and database/sql panics on the second.
package ncruces

import (
	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3"
	"github.com/sluicehq/sluice/store/sqlite"
)

// Scheme is the DSN scheme this package registers: sqlite-ncruces://PATH.
const Scheme = "sqlite-ncruces"

// Driver is github.com/ncruces/go-sqlite3, for sqlite.Config.Driver and
// sqlite.DBConfig.Driver. It reads modernc.org/sqlite's DSN syntax.
var Driver = &sqlite.Driver{Name: "sqlite3", Module: "github.com/ncruces/go-sqlite3", DSN: sqlite.PragmaDSN}

func init() {
	sqlite.Register([]string{Scheme}, Driver)
}
