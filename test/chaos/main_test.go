package chaos

import (
	"testing"

	"go.uber.org/goleak"
)

// The soak's goroutines (proxies, process waiters, the load) all end with Run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
