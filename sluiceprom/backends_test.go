package sluiceprom_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/libtest"
)

// One backend of each kind serves the package: every test works in a
// tenant of its own on it.
var forEachBackend = libtest.ForEachBackend

func TestMain(m *testing.M) { libtest.Main(m) }
