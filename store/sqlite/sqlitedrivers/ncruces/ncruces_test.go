package ncruces_test

import (
	"testing"

	"github.com/sluicehq/sluice/store/sqlite/sqlitedrivers/internal/drivertest"
	"github.com/sluicehq/sluice/store/sqlite/sqlitedrivers/ncruces"
	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the backends the
// tests closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestDriver runs sluice's SQLite backend on ncruces: the conformance suite,
// its DSN scheme, an application's pool and busy errors.
func TestDriver(t *testing.T) {
	drivertest.Run(t, ncruces.Driver, ncruces.Scheme)
}
