package sluiceotel_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/libtest"
)

var (
	forEachBackend = libtest.ForEachBackend
	randHex        = libtest.RandHex
)

func TestMain(m *testing.M) { libtest.Main(m) }
