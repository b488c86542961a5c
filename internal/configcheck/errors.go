// Package configcheck collects the broken rules of a configuration value as *configerr.Error
// values: the policies' validators, the actors' Config validators and the root's Config and
// Stream validators all report into one Errors, so that a Stream's error lists every broken rule,
// its own and its policies'. It is internal because no user or outside implementer of an actor's
// Config calls it: they call Validate, which returns the joined errors.
package configcheck

import (
	"errors"
	"fmt"

	"github.com/watchtree/watchtree/configerr"
)

// Errors collects the broken rules found while validating one configuration value, as
// *configerr.Error values, in the order they are added. It lets a configuration that embeds these
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
// configerr.Error.Stream and renders as `Stream "<name>": <field> <rule>`, even when name is empty.
func StreamErrors(name string) *Errors { return &Errors{stream: name, inStream: true} }

// Add records that field broke the rule fmt.Sprintf(format, args...); the rule should include the
// rejected value.
func (c *Errors) Add(field, format string, args ...any) { c.AddErr(field, nil, format, args...) }

// AddErr is Add with a classifying sentinel, matched by the error with errors.Is.
func (c *Errors) AddErr(field string, sentinel error, format string, args ...any) {
	rule := fmt.Sprintf(format, args...)
	if c.inStream {
		c.list = append(c.list, configerr.InStream(c.stream, c.prefix+field, rule, sentinel))
		return
	}
	c.list = append(c.list, &configerr.Error{Field: c.prefix + field, Rule: rule, Err: sentinel})
}

// Err returns the recorded errors joined with errors.Join, or nil when there are none.
func (c *Errors) Err() error { return errors.Join(c.list...) }
