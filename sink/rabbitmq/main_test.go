package rabbitmqsink_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/watchtree/watchtree/sink"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// TestMain fails the package if any goroutine (a connection's, the publisher's owner, a
// consumer's, the test proxy's) outlives the tests. Started as a drill worker by
// TestSIGKILLDrill, the binary runs the worker instead, until it is killed.
func TestMain(m *testing.M) {
	sinktest.DrillWorker(openDrillPublisher, sink.Options{})
	goleak.VerifyTestMain(m)
}
