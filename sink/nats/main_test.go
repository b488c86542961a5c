package natssink_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a connection's, a consumer's, a stream's)
// outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
