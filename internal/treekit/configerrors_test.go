package treekit

import (
	"errors"
	"testing"
	"time"

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

// TestNotNegative: a negative count or duration is recorded with its default, and reported
// false; zero and positive values pass.
func TestNotNegative(t *testing.T) {
	e := NewConfigErrors("snapshot", "orders")
	if NotNegative(e, "IOTimeout", -time.Second, 10*time.Second) {
		t.Error("NotNegative(-1s) = true, want false")
	}
	if !NotNegative(e, "WindowCheckEvery", 0, 30) || !NotNegative(e, "IOTimeout", time.Second, 10*time.Second) {
		t.Error("NotNegative(0 or 1s) = false, want true")
	}
	want := "snapshot: Config.IOTimeout must be >= 0 (0 means 10s), got -1s"
	if err := e.Err(); err == nil || err.Error() != want {
		t.Errorf("Err() = %v, want %q", err, want)
	}
}
