package stream

import (
	"testing"

	"github.com/watchtree/watchtree/internal/defaultcheck"
)

// TestActorDefaults: New fills every zero value field of a Config with DefaultConfig's value
// and nothing else, so DefaultConfig (which the runtime builds its configs from) is the one
// source of each default.
func TestActorDefaults(t *testing.T) {
	defaultcheck.Check(t, Config.withDefaults, DefaultConfig())
}
