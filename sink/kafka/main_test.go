package kafkasink_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/watchtree/watchtree/sink/sinktest"
)

// TestMain fails the package if any goroutine (a kgo client's, a kfake cluster's, a stream's)
// outlives the tests. Started as a drill worker by TestSIGKILLDrill, the binary runs the worker
// instead, until it is killed.
func TestMain(m *testing.M) {
	sinktest.DrillWorker(openDrillPublisher, drillOptions)
	goleak.VerifyTestMain(m)
}
