package sluiceotel_test

// The tests open databases of every kind; the package itself links no
// backend.
import (
	_ "github.com/sluicehq/sluice/store/mysql"
	_ "github.com/sluicehq/sluice/store/postgres"
	_ "github.com/sluicehq/sluice/store/sqlite"
)
