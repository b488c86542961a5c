package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestClassifyPoolWait: the driver's pool checkout timeout with every connection in use, as a
// wrapped error or as the text a tree message keeps, is a transient failure reported with the
// client's pool and the remedy; a checkout that failed with room in the pool (its context had
// ended) is not.
func TestClassifyPoolWait(t *testing.T) {
	const full = "timed out while checking out a connection from connection pool: context deadline exceeded; " +
		"total connections: 2, maxPoolSize: 2, idle connections: 0, wait duration: 10s"
	for name, err := range map[string]error{
		"wrapped":   fmt.Errorf("load checkpoint: %w", errors.New(full)),
		"text only": errors.New("load checkpoint: " + full),
	} {
		terminal, cause := classifyFailure(err)
		if terminal {
			t.Errorf("%s: terminal", name)
		}
		if !errors.Is(cause, ErrPoolExhausted) || !strings.Contains(cause.Error(), "client's connection pool") ||
			!strings.Contains(cause.Error(), "maxPoolSize") || !strings.Contains(cause.Error(), "share a cursor") ||
			!strings.Contains(cause.Error(), full) {
			t.Errorf("%s: cause %q: want the pool, the remedy and the driver's text", name, cause)
		}
		if _, again := classifyFailure(cause); again.Error() != cause.Error() {
			t.Errorf("%s: explained twice: %q", name, again)
		}
	}
	for _, text := range []string{
		"other",
		"timed out while checking out a connection from connection pool: context deadline exceeded; " +
			"total connections: 1, maxPoolSize: 100, idle connections: 0, wait duration: 2µs",
	} {
		if _, cause := classifyFailure(errors.New(text)); errors.Is(cause, ErrPoolExhausted) {
			t.Errorf("%q is reported as an exhausted pool: %v", text, cause)
		}
	}
}
