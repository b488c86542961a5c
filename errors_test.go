package watchtree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/store"
)

// userPermanent is a user error type that marks itself permanent.
type userPermanent struct{ perm bool }

func (e userPermanent) Error() string   { return "user" }
func (e userPermanent) Permanent() bool { return e.perm }

func TestPermanentAndSkip(t *testing.T) {
	base := io.ErrUnexpectedEOF
	tests := []struct {
		name      string
		err       error
		permanent bool
		skip      bool
		class     dispatcher.ErrorClass
	}{
		{"plain", base, false, false, dispatcher.Retryable},
		{"context canceled", context.Canceled, false, false, dispatcher.Retryable},
		{"Permanent", Permanent(base), true, false, dispatcher.Permanent},
		{"Permanent wrapped", fmt.Errorf("charge: %w", Permanent(base)), true, false, dispatcher.Permanent},
		{"Permanent joined", errors.Join(io.EOF, Permanent(base)), true, false, dispatcher.Permanent},
		{"DecodeError", &DecodeError{Stream: "s", Field: "fullDocument", Err: base}, true, false, dispatcher.Permanent},
		{"DecodeError wrapped", fmt.Errorf("x: %w", &DecodeError{Err: base}), true, false, dispatcher.Permanent},
		{"user type permanent", userPermanent{perm: true}, true, false, dispatcher.Permanent},
		{"user type not permanent", userPermanent{perm: false}, false, false, dispatcher.Retryable},
		{"Skip", Skip("test order"), false, true, dispatcher.Skipped},
		{"Skip wrapped", fmt.Errorf("h: %w", Skip("dup")), false, true, dispatcher.Skipped},
		{"Skip wins over Permanent", Permanent(Skip("both")), true, true, dispatcher.Skipped},
		{"nil", nil, false, false, dispatcher.Retryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPermanent(tt.err); got != tt.permanent {
				t.Errorf("IsPermanent = %v, want %v", got, tt.permanent)
			}
			if got := IsSkip(tt.err); got != tt.skip {
				t.Errorf("IsSkip = %v, want %v", got, tt.skip)
			}
			if got := classify(tt.err); got != tt.class {
				t.Errorf("classify = %v, want %v", got, tt.class)
			}
		})
	}
}

func TestPermanentKeepsCause(t *testing.T) {
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) must be nil")
	}
	err := fmt.Errorf("outer: %w", Permanent(io.EOF))
	if !errors.Is(err, io.EOF) {
		t.Error("errors.Is through Permanent lost the cause")
	}
	if got, want := err.Error(), "outer: permanent: EOF"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var p interface{ Permanent() bool }
	if !errors.As(err, &p) || !p.Permanent() {
		t.Error("errors.As to the Permanent() interface failed")
	}
}

func TestSkipReason(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", Skip("already charged"))
	reason, ok := skipReason(err)
	if !ok || reason != "already charged" {
		t.Fatalf("skipReason = %q, %v", reason, ok)
	}
	if got, want := Skip("r").Error(), "watchtree: skipped: r"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if _, ok := skipReason(io.EOF); ok {
		t.Error("skipReason of a plain error must be false")
	}
}

func TestConfigError(t *testing.T) {
	tests := []struct {
		name string
		err  *ConfigError
		want string
	}{
		{"stream field", &ConfigError{Stream: "orders", Field: "Retry.Multiplier", Rule: "must be finite and >= 1, got NaN"},
			`watchtree: Stream "orders": Retry.Multiplier must be finite and >= 1, got NaN`},
		{"config field", &ConfigError{Field: "Config.Client", Rule: "is required, got nil"},
			"watchtree: Config.Client is required, got nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.err, ErrInvalidConfig) {
				t.Error("must match ErrInvalidConfig")
			}
		})
	}
	withSentinel := fmt.Errorf("spawn: %w", &ConfigError{Stream: "s", Field: "Name", Rule: "r", Err: ErrDuplicateStream})
	if !errors.Is(withSentinel, ErrDuplicateStream) || !errors.Is(withSentinel, ErrInvalidConfig) {
		t.Error("a ConfigError with Err must match both its Err and ErrInvalidConfig")
	}
	if errors.Is(withSentinel, ErrNoHandler) {
		t.Error("must not match an unrelated sentinel")
	}
}

func TestSentinelsAreDistinctAndDocumented(t *testing.T) {
	all := []error{ErrInvalidConfig, ErrDuplicateStream, ErrNoHandler, ErrUnknownStream, ErrNotStarted,
		ErrAlreadyStarted, ErrStopped, ErrHistoryLost, ErrGaveUp, ErrInvalidated, ErrFenced, ErrUnreachable, ErrObserverNotDrained}
	seen := map[string]bool{}
	for _, e := range all {
		msg := e.Error()
		if seen[msg] {
			t.Errorf("duplicate sentinel message %q", msg)
		}
		seen[msg] = true
		if len(msg) < len("watchtree: ") || msg[:len("watchtree: ")] != "watchtree: " {
			t.Errorf("sentinel %q lacks the package prefix", msg)
		}
		for _, other := range all {
			if other != e && errors.Is(e, other) {
				t.Errorf("%v matches %v", e, other)
			}
		}
	}
}

// TestTerminalSentinelsAreTheRaisersOwn: the root's terminal sentinels are the values the actors
// and the stores raise, so an error from inside a stream tree matches them with no translation.
func TestTerminalSentinelsAreTheRaisersOwn(t *testing.T) {
	for _, tc := range []struct {
		name        string
		root, raise error
	}{
		{"ErrHistoryLost", ErrHistoryLost, streamtree.ErrHistoryLost},
		{"ErrInvalidated", ErrInvalidated, streamtree.ErrInvalidated},
		{"ErrFenced", ErrFenced, store.ErrFenced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root != tc.raise {
				t.Fatalf("%v is not the raised value %v", tc.root, tc.raise)
			}
			if err := fmt.Errorf("deep: %w", fmt.Errorf("inner: %w", tc.raise)); !errors.Is(err, tc.root) {
				t.Fatalf("errors.Is(%v, %v) = false", err, tc.root)
			}
		})
	}
}
