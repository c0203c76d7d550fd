package sqlite

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net/url"
	"reflect"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
	_ "modernc.org/sqlite" // the default driver: pure Go, no cgo
)

// Driver is a database/sql SQLite driver the backend can run on, chosen
// at run time by Config.Driver (nil: modernc.org/sqlite, the one this
// package imports). The package of another driver supplies its own value;
// sluice's module keeps the others it was measured against in a module
// of their own, github.com/sluicehq/sluice/store/sqlite/sqlitedrivers,
// so that a program links only the drivers it imports.
//
// Errors are classified by their messages, which must say
// "database is locked" (or SQLITE_BUSY) when the database is busy and
// "UNIQUE constraint failed" on a unique-key violation, as the SQLite
// library's own messages do.
type Driver struct {
	// Name is the name the driver registered with database/sql
	// (sql.Open's first argument).
	Name string
	// Module is the driver's Go module path, for messages and for
	// store.Features.Driver.
	Module string
	// DSN returns the connection string, in the driver's syntax, that
	// opens the file at path with sluice's settings on every connection:
	// journal_mode=WAL, busy_timeout=10000 (ms), synchronous as o says,
	// foreign_keys=1, and either query_only=1 (o.ReadOnly: the readers'
	// pool) or write transactions that begin IMMEDIATE (the writer's).
	DSN func(path string, o ConnOptions) string
}

// ConnOptions are the settings of one of the pools a Driver's DSN opens.
type ConnOptions struct {
	// Synchronous is "FULL" or "NORMAL".
	Synchronous string
	// ReadOnly marks the readers' pool: query_only=1. The writer's pool
	// begins its transactions IMMEDIATE instead, so that a second
	// process's writer waits on busy_timeout rather than failing when a
	// read lock is upgraded to a write lock mid-transaction.
	ReadOnly bool
}

// moderncDriver is modernc.org/sqlite, the driver used when
// Config.Driver is nil.
var moderncDriver = &Driver{Name: "sqlite", Module: "modernc.org/sqlite", DSN: PragmaDSN}

// PragmaDSN is the DSN syntax of modernc.org/sqlite, which
// github.com/ncruces/go-sqlite3 reads too: a file: URI with each pragma
// in a _pragma parameter, and _txlock=immediate on the writer's pool.
func PragmaDSN(path string, o ConnOptions) string {
	v := url.Values{}
	v.Add("_pragma", "busy_timeout(10000)")
	v.Add("_pragma", "journal_mode(WAL)")
	v.Add("_pragma", "synchronous("+o.Synchronous+")")
	v.Add("_pragma", "foreign_keys(1)")
	if o.ReadOnly {
		v.Add("_pragma", "query_only(1)")
	} else {
		v.Add("_txlock", "immediate")
	}
	return "file:" + path + "?" + v.Encode()
}

// driverOr returns d, or the default driver when d is nil, after
// checking that d can be used.
func driverOr(d *Driver) (*Driver, error) {
	if d == nil {
		return moderncDriver, nil
	}
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("sluice: sqlite: %w", err)
	}
	return d, nil
}

// validate checks that every field of d is set and that its name is
// registered with database/sql.
func (d *Driver) validate() error {
	if d.Name == "" || d.Module == "" || d.DSN == nil {
		return fmt.Errorf("Driver{Name: %q, Module: %q} needs a Name, a Module and a DSN function: %w",
			d.Name, d.Module, sluicetype.ErrInvalidArgument)
	}
	if !slices.Contains(sql.Drivers(), d.Name) {
		return fmt.Errorf("driver %q (%s) is not registered with database/sql: import its package: %w",
			d.Name, d.Module, sluicetype.ErrInvalidArgument)
	}
	return nil
}

// owns reports whether drv is d's database/sql driver: of the type
// sql.Open gives d's name.
func (d *Driver) owns(drv driver.Driver) bool {
	db, err := sql.Open(d.Name, "")
	if err != nil {
		return false
	}
	defer db.Close()
	return reflect.TypeOf(db.Driver()) == reflect.TypeOf(drv)
}
