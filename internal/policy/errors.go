package policy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidConfig is matched by every *ConfigError: a configuration value broke a rule. The root
// package re-exports this very value as watchtree.ErrInvalidConfig.
var ErrInvalidConfig = errors.New("watchtree: invalid configuration")

// ConfigError reports one broken configuration rule. Every Validate method of watchtree and of
// this package returns *ConfigError values (joined with errors.Join when several rules are
// broken), so a caller can find the field with errors.As:
//
//	var ce *watchtree.ConfigError
//	if errors.As(err, &ce) { fmt.Println(ce.Field) } // "Retry.Multiplier"
//
// A ConfigError matches ErrInvalidConfig with errors.Is, and also its Err when set (for example
// watchtree.ErrNoHandler or watchtree.ErrDuplicateStream).
type ConfigError struct {
	// Stream is the Name of the stream being validated; empty for Config and for a policy
	// validated on its own.
	Stream string
	// Field is the dotted path of the offending field: relative to the Stream value when Stream
	// is set ("Lanes", "Retry.Multiplier"), otherwise starting with the type name
	// ("Config.ShutdownTimeout", "RetryPolicy.MaxAttempts").
	Field string
	// Rule is the broken rule, including the rejected value, e.g. "must be finite and >= 1, got NaN".
	Rule string
	// Err is an optional sentinel that classifies the error (ErrNoHandler, ErrDuplicateStream).
	Err error

	inStream bool // render the Stream prefix even when the name is empty
}

// Error renders `watchtree: Stream "orders": Retry.Multiplier must be finite and >= 1, got NaN`,
// or `watchtree: Config.ShutdownTimeout must be >= 0, got -1s` outside a stream.
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("watchtree: ")
	if e.Stream != "" || e.inStream {
		fmt.Fprintf(&b, "Stream %q: ", e.Stream)
	}
	b.WriteString(e.Field)
	b.WriteByte(' ')
	b.WriteString(e.Rule)
	return b.String()
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the classifying sentinel, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// Errors collects the broken rules found while validating one configuration value, as
// *ConfigError values, in the order they are added. It lets a configuration that embeds these
// policies (a watchtree.Stream, an actor's Config) report every broken rule, its own and its
// policies', in one joined error.
type Errors struct {
	stream   string
	inStream bool
	prefix   string
	list     []error
}

// NewErrors returns a collector for a value validated on its own: every field name is prefixed
// with prefix, e.g. "Config." gives "Config.ShutdownTimeout".
func NewErrors(prefix string) *Errors { return &Errors{prefix: prefix} }

// StreamErrors returns a collector for the stream named name: every error carries the name in
// ConfigError.Stream and renders as `Stream "<name>": <field> <rule>`, even when name is empty.
func StreamErrors(name string) *Errors { return &Errors{stream: name, inStream: true} }

// Add records that field broke the rule fmt.Sprintf(format, args...); the rule should include the
// rejected value.
func (c *Errors) Add(field, format string, args ...any) { c.AddErr(field, nil, format, args...) }

// AddErr is Add with a classifying sentinel, matched by the error with errors.Is.
func (c *Errors) AddErr(field string, sentinel error, format string, args ...any) {
	c.list = append(c.list, &ConfigError{Stream: c.stream, Field: c.prefix + field,
		Rule: fmt.Sprintf(format, args...), Err: sentinel, inStream: c.inStream})
}

// Err returns the recorded errors joined with errors.Join, or nil when there are none.
func (c *Errors) Err() error { return errors.Join(c.list...) }
