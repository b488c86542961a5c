package redisstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a watch, a client's pool) outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
