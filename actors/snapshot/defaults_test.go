package snapshot

import (
	"testing"

	"github.com/watchtree/watchtree/internal/defaultcheck"
)

// TestActorDefaults: New and NewOnDemand fill every zero value field of their Config with
// DefaultConfig's (DefaultOnDemandConfig's) value and nothing else, so those are the one source
// of each default.
func TestActorDefaults(t *testing.T) {
	defaultcheck.Check(t, Config.withDefaults, DefaultConfig())
	defaultcheck.Check(t, OnDemandConfig.withDefaults, DefaultOnDemandConfig())
}
