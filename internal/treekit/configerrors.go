package treekit

import (
	"errors"
	"fmt"

	"github.com/watchtree/watchtree/internal/configcheck"
)

// ConfigErrors collects the broken rules of one tree actor's Config, in the order they are
// found: the Config's own, each rendered "<actor>: Config.<Field> <rule>", and those of the
// policies it embeds, as *configerr.Error values (Policies). Every actor's validate reports
// through one, so that their errors read alike and a policy's error stays matchable with
// errors.As whichever actor checked it.
type ConfigErrors struct {
	actor string
	errs  []error
}

// NewConfigErrors returns a collector for the Config of the actor named actor ("dispatcher")
// of the stream named stream (its Config.Stream). It records the first rule of every such
// Config: Stream must not be empty (it names the stream in every log line and event).
func NewConfigErrors(actor, stream string) *ConfigErrors {
	e := &ConfigErrors{actor: actor}
	if stream == "" {
		e.Add("Stream", "must not be empty")
	}
	return e
}

// Add records that field broke the rule fmt.Sprintf(format, args...); the rule should include
// the rejected value.
func (e *ConfigErrors) Add(field, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s: Config.%s %s", e.actor, field, fmt.Sprintf(format, args...)))
}

// Policies runs validate against a collector of the Config's policies (their fields named
// "Config.<Field>.<rule's field>") and records what it found at this place, in its order.
func (e *ConfigErrors) Policies(validate func(pe *configcheck.Errors)) {
	pe := configcheck.NewErrors("Config.")
	validate(pe)
	if err := pe.Err(); err != nil {
		e.errs = append(e.errs, err)
	}
}

// NotNegative records that field must be >= 0 when v, a count or a duration whose zero value
// stands for the default def, is negative; it reports whether v passed.
func NotNegative[T ~int | ~int64](e *ConfigErrors, field string, v, def T) bool {
	if v < 0 {
		e.Add(field, "must be >= 0 (0 means %v), got %v", def, v)
		return false
	}
	return true
}

// Err returns the recorded errors joined with errors.Join, or nil when there are none.
func (e *ConfigErrors) Err() error { return errors.Join(e.errs...) }
