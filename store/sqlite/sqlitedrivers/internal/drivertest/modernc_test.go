package drivertest_test

import (
	"testing"

	"github.com/sluicehq/sluice/store/sqlite"
	"github.com/sluicehq/sluice/store/sqlite/sqlitedrivers/internal/drivertest"
)

// TestModerncBusyIsRetried checks the default driver's busy error the
// same way as the alternatives' (store/sqlite runs the rest on it).
func TestModerncBusyIsRetried(t *testing.T) {
	drivertest.BusyIsRetried(t, &sqlite.Driver{Name: "sqlite", Module: "modernc.org/sqlite", DSN: sqlite.PragmaDSN})
}
