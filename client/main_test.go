package client_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/libtest"
)

// One backend of each kind serves the tests that need a database: each
// works in a tenant of its own on it.
var shared = &libtest.Shared

func TestMain(m *testing.M) { libtest.Main(m) }
