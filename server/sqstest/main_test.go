// Package sqstest runs the SQS endpoint of a sluice server against the
// real AWS SDK for Go (aws-sdk-go-v2's service/sqs). It is a module of its
// own so that the SDK stays out of sluice's dependencies.
package sqstest

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
