package rabbitmqsink_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a connection's, the publisher's owner, a
// consumer's, the test proxy's) outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
