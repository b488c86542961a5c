package configerr

import (
	"errors"
	"testing"
)

// TestConfigError: the rendering with and without a stream (InStream keeps the prefix for a
// stream whose name is empty), and the sentinels an Error matches.
func TestConfigError(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"stream field", &Error{Stream: "orders", Field: "Retry.Multiplier", Rule: "must be finite and >= 1, got NaN"},
			`watchtree: Stream "orders": Retry.Multiplier must be finite and >= 1, got NaN`},
		{"config field", &Error{Field: "Config.Client", Rule: "is required, got nil"},
			"watchtree: Config.Client is required, got nil"},
		{"empty stream name in a stream", InStream("", "Name", "must be set", nil),
			`watchtree: Stream "": Name must be set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.err, ErrInvalid) {
				t.Error("must match ErrInvalid")
			}
		})
	}
}

// TestUnwrapMatchesTheSentinel: errors.Is matches both ErrInvalid and the classifying Err.
func TestUnwrapMatchesTheSentinel(t *testing.T) {
	sentinel := errors.New("no handler")
	err := error(InStream("orders", "OnChange", "must be set", sentinel))
	if !errors.Is(err, sentinel) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("%v matches neither its sentinel nor ErrInvalid", err)
	}
	if errors.Is(&Error{Field: "F", Rule: "r"}, sentinel) {
		t.Fatal("an Error without Err matches an unrelated sentinel")
	}
}
