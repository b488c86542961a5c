package stream

import (
	"testing"

	"github.com/watchtree/watchtree/store"
)

// TestStartedPosition: the source of a cursor's start position names observe.Started.Position.
func TestStartedPosition(t *testing.T) {
	for source, want := range map[string]string{
		store.SourceInitial: "initial", store.SourceResumeFromNow: "after-gap", store.SourceRebuild: "after-gap",
		"latest": "latest", "at": "at", "invalidate": "after-invalidate", store.SourceMigrated: "migrated",
		store.SourceEvent: "checkpoint", store.SourcePBRT: "checkpoint", "": "checkpoint",
	} {
		if got := startedPosition(source); got != want {
			t.Errorf("startedPosition(%q) = %q, want %q", source, got, want)
		}
	}
}
