package natssink_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/watchtree/watchtree/sink"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// TestMain fails the package if any goroutine (a connection's, a consumer's, a stream's)
// outlives the tests. Started as a drill worker by TestSIGKILLDrill, the binary runs the worker
// instead, until it is killed.
func TestMain(m *testing.M) {
	sinktest.DrillWorker(openDrillPublisher, sink.Options{})
	goleak.VerifyTestMain(m)
}
