package kafkasink_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a kgo client's, a kfake cluster's, a stream's)
// outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
