package supervisor

import (
	"strings"
	"testing"

	"github.com/watchtree/watchtree/internal/defaultcheck"
)

// TestActorDefaults checks that the actor applies no default of its own: New fills every zero
// value field of a Config with DefaultConfig's value and with nothing else, so DefaultConfig
// (which the runtime builds its configs from) is the one source of each default. A default
// added to withDefaults alone fails it.
func TestActorDefaults(t *testing.T) {
	if d := defaultcheck.Mismatches(Config{}.withDefaults(), DefaultConfig()); len(d) > 0 {
		t.Errorf("New fills a zero Config with values DefaultConfig does not hold:\n%s", strings.Join(d, "\n"))
	}
	// DefaultConfig holds resolved values only: filling it again changes nothing.
	if d := defaultcheck.Mismatches(DefaultConfig().withDefaults(), DefaultConfig()); len(d) > 0 {
		t.Errorf("New changes DefaultConfig's values:\n%s", strings.Join(d, "\n"))
	}
}
