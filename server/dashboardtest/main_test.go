// Package dashboardtest drives the dashboard of a running sluice server
// in a headless Chromium. It is a module of its own so that the browser
// driver (chromedp) is no dependency of sluice's.
package dashboardtest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/libtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := libtest.Shared.Close(); err != nil {
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
