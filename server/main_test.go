package server_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/libtest"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/server/internal/servertest"
)

// The helpers of package servertest, by the names these tests use.
type env = servertest.Env

var (
	shared      = &libtest.Shared
	start       = servertest.Start
	serve       = servertest.Serve
	randHex     = libtest.RandHex
	waitFor     = servertest.WaitFor
	streamNodes = servertest.StreamNodes
	newEvents   = servertest.NewEvents
	firstSeen   = servertest.FirstSeen
	startRemote = servertest.StartRemote
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "cleanup:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// forEachKind runs f in parallel on each backend.
func forEachKind(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, kind)
		})
	}
}
