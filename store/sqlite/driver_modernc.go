//go:build !sluice_mattn && !sluice_ncruces

package sqlite

import (
	"net/url"

	_ "modernc.org/sqlite" // the default driver: pure Go, no cgo
)

const (
	driverName   = "sqlite"
	driverModule = "modernc.org/sqlite"
)

// dsn builds a modernc.org/sqlite connection string. Write connections
// start transactions with BEGIN IMMEDIATE so a second process's writer
// waits on busy_timeout instead of failing an upgrade mid-transaction.
func dsn(path, sync string, readOnly bool) string {
	v := url.Values{}
	v.Add("_pragma", "busy_timeout(10000)")
	v.Add("_pragma", "journal_mode(WAL)")
	v.Add("_pragma", "synchronous("+sync+")")
	v.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		v.Add("_pragma", "query_only(1)")
	} else {
		v.Add("_txlock", "immediate")
	}
	return "file:" + path + "?" + v.Encode()
}
