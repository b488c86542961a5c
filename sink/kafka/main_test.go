package kafkasink_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a kgo client's, a kfake cluster's, a stream's)
// outlives the tests. Started as a drill worker (TestSIGKILLDrill sets drillEnv), the binary
// runs the worker instead, until it is killed.
func TestMain(m *testing.M) {
	if os.Getenv(drillEnv) != "" {
		os.Exit(drillWorker())
	}
	goleak.VerifyTestMain(m)
}
