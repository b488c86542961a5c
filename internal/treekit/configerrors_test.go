package treekit

import (
	"errors"
	"testing"

	"github.com/watchtree/watchtree/configerr"
	"github.com/watchtree/watchtree/internal/configcheck"
)

// TestConfigErrors: the Stream rule comes first, the Config's rules read
// "<actor>: Config.<Field> <rule>", the policies' errors stay *configerr.Error values at the
// place they were found, and a Config that breaks nothing gives nil.
func TestConfigErrors(t *testing.T) {
	e := NewConfigErrors("snapshot", "")
	e.Add("Store", "must not be nil")
	e.Policies(func(pe *configcheck.Errors) { pe.Add("Policy.Mode", "must be known, got %d", 9) })
	e.Add("IOTimeout", "must be >= 0, got %v", -1)
	err := e.Err()
	want := "snapshot: Config.Stream must not be empty\nsnapshot: Config.Store must not be nil\n" +
		"watchtree: Config.Policy.Mode must be known, got 9\nsnapshot: Config.IOTimeout must be >= 0, got -1"
	if err == nil || err.Error() != want {
		t.Fatalf("Err() = %v, want %q", err, want)
	}
	var ce *configerr.Error
	if !errors.As(err, &ce) || ce.Field != "Config.Policy.Mode" {
		t.Errorf("errors.As(*configerr.Error) = %v, want the policy's rule", ce)
	}
	ok := NewConfigErrors("stream", "orders")
	ok.Policies(func(*configcheck.Errors) {})
	if err := ok.Err(); err != nil {
		t.Errorf("Err() of a valid Config = %v, want nil", err)
	}
}
