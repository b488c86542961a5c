// Package configerr declares the error of a broken configuration rule, watchtree.ConfigError,
// in a leaf package: the root's Validate methods, the policies' validators and the actors'
// Config.Validate all return it, so errors.As(err, &ce) with a *watchtree.ConfigError (this
// package's *Error) finds the field whichever layer checked it.
package configerr

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched by every *Error with errors.Is: a configuration value broke a rule. The
// root package re-exports this very value as watchtree.ErrInvalidConfig.
var ErrInvalid = errors.New("watchtree: invalid configuration")

// Error reports one broken configuration rule (watchtree.ConfigError is this type). Every
// Validate method of watchtree and of its actors returns *Error values (joined with errors.Join
// when several rules are broken), so a caller can find the field with errors.As:
//
//	var ce *watchtree.ConfigError
//	if errors.As(err, &ce) { fmt.Println(ce.Field) } // "Retry.Multiplier"
//
// An Error matches ErrInvalid with errors.Is, and also its Err when set (for example
// watchtree.ErrNoHandler or watchtree.ErrDuplicateStream). Code of its own (a sink's
// constructor) may return one too: &configerr.Error{Field: "sink.Options.Subject", Rule: ...}.
type Error struct {
	// Stream is the Name of the stream being validated; empty for Config, for an actor's Config
	// and for a policy validated on its own.
	Stream string
	// Field is the dotted path of the offending field: relative to the Stream value when Stream
	// is set ("Lanes", "Retry.Multiplier"), otherwise starting with the type name
	// ("Config.ShutdownTimeout", "RetryPolicy.MaxAttempts").
	Field string
	// Rule is the broken rule, including the rejected value, e.g. "must be finite and >= 1, got NaN".
	Rule string
	// Err is an optional sentinel that classifies the error (ErrNoHandler, ErrDuplicateStream);
	// nil when the rule needs no class of its own.
	Err error

	inStream bool // render the Stream prefix even when the name is empty
}

// InStream returns the Error of a rule broken by field of the stream named stream. Unlike a
// literal Error, it renders the `Stream "<name>": ` prefix even when stream is empty (a Stream
// whose Name is missing is still reported as a stream's).
func InStream(stream, field, rule string, sentinel error) *Error {
	return &Error{Stream: stream, Field: field, Rule: rule, Err: sentinel, inStream: true}
}

// Error renders `watchtree: Stream "orders": Retry.Multiplier must be finite and >= 1, got NaN`,
// or `watchtree: Config.ShutdownTimeout must be >= 0, got -1s` outside a stream.
func (e *Error) Error() string {
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

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the classifying sentinel Err, or nil.
func (e *Error) Unwrap() error { return e.Err }
