package mysql_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine (a committer, a pool's opener,
// a listener) outlives the backends the tests closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
