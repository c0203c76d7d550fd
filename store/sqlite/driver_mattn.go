//go:build sluice_mattn

package sqlite

import (
	"net/url"

	_ "github.com/mattn/go-sqlite3" // cgo driver, for measurement (-tags sluice_mattn)
)

const (
	driverName   = "sqlite3"
	driverModule = "github.com/mattn/go-sqlite3"
)

func dsn(path, sync string, readOnly bool) string {
	v := url.Values{}
	v.Set("_busy_timeout", "10000")
	v.Set("_journal_mode", "WAL")
	v.Set("_synchronous", sync)
	v.Set("_foreign_keys", "1")
	if readOnly {
		v.Set("_query_only", "1")
	} else {
		v.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + v.Encode()
}
