//go:build sluice_ncruces

package sqlite

import (
	"net/url"

	_ "github.com/ncruces/go-sqlite3/driver" // WebAssembly driver, for measurement (-tags sluice_ncruces)
)

const (
	driverName   = "sqlite3"
	driverModule = "github.com/ncruces/go-sqlite3"
)

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
