// Package mattn runs sluice's SQLite backend on github.com/mattn/go-sqlite3,
// the cgo driver (it needs a C compiler and CGO_ENABLED=1). sluice's own
// backend runs on modernc.org/sqlite; this driver is kept for measuring
// against it (docs/benchmarks.md in sluice's repository).
//
// Importing the package registers the DSN scheme sqlite-mattn://PATH
// (with the optional ?synchronous=FULL or NORMAL of sqlite://) and lets
// sluice.OpenDB take a pool opened on the driver. It cannot be linked
// beside package ncruces: both drivers register the database/sql name
// "sqlite3", and database/sql panics on the second.
package mattn

import (
	"net/url"

	_ "github.com/mattn/go-sqlite3" // registers "sqlite3"
	"github.com/sluicehq/sluice/store/sqlite"
)

// Scheme is the DSN scheme this package registers: sqlite-mattn://PATH.
const Scheme = "sqlite-mattn"

// Driver is github.com/mattn/go-sqlite3, for sqlite.Config.Driver and
// sqlite.DBConfig.Driver.
var Driver = &sqlite.Driver{Name: "sqlite3", Module: "github.com/mattn/go-sqlite3", DSN: dsn}

func init() {
	sqlite.Register([]string{Scheme}, Driver)
}

// dsn builds a mattn/go-sqlite3 connection string: the driver sets each
// pragma from an underscored parameter of its own.
func dsn(path string, o sqlite.ConnOptions) string {
	v := url.Values{}
	v.Set("_busy_timeout", "10000")
	v.Set("_journal_mode", "WAL")
	v.Set("_synchronous", o.Synchronous)
	v.Set("_foreign_keys", "1")
	if o.ReadOnly {
		v.Set("_query_only", "1")
	} else {
		v.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + v.Encode()
}
