package otel

import (
	"testing"

	"go.uber.org/goleak"
)

// The adapter starts no goroutine; the runtime, the driver and mongosim of the tests stop theirs.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
