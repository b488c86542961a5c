package memstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a store call, a driver monitor, a simulator)
// outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
