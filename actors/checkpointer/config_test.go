package checkpointer

import (
	"context"
	"errors"
	"github.com/watchtree/watchtree/internal/policyx"
	"strings"
	"testing"
	"time"

	"github.com/watchtree/watchtree/configerr"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store/memstore"
)

func validConfig() Config {
	ms := memstore.New(memstore.Options{})
	return Config{Stream: "orders", Store: ms, Gaps: ms, Positions: &fakePositions{}}
}

func TestConfigValidate(t *testing.T) {
	if err := validConfig().validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"stream", func(c *Config) { c.Stream = "" }, "Config.Stream must not be empty"},
		{"store", func(c *Config) { c.Store = nil }, "Config.Store must not be nil"},
		{"positions", func(c *Config) { c.Positions = nil }, "Config.Positions must not be nil"},
		{"gaps resumeFromNow", func(c *Config) { c.Gaps = nil; c.OnHistoryLost = policy.ResumeFromNow }, "Config.Gaps must not be nil when OnHistoryLost is ResumeFromNow"},
		{"gaps rebuild", func(c *Config) {
			c.Gaps = nil
			c.OnHistoryLost = policy.Rebuild(func(context.Context) error { return nil })
		}, "Config.Gaps must not be nil when OnHistoryLost is Rebuild"},
		{"retry initial", func(c *Config) { c.RetryInitialDelay = -1 }, "Config.RetryInitialDelay must be >= 0"},
		{"io timeout", func(c *Config) { c.IOTimeout = -time.Second }, "Config.IOTimeout must be >= 0 (0 means 10s), got -1s"},
		{"retry max", func(c *Config) { c.RetryMaxDelay = -1 }, "Config.RetryMaxDelay must be >= 0"},
		{"retry max below initial", func(c *Config) { c.RetryInitialDelay = time.Second; c.RetryMaxDelay = time.Millisecond }, "Config.RetryMaxDelay must be >= RetryInitialDelay (1s), got 1ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			err := c.validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
			if _, err := New(c); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
	// Several broken rules are all named.
	err := Config{Checkpoint: policy.Checkpoint{SaveEvery: -1}}.validate()
	for _, f := range []string{"Stream", "Store", "Positions", "Checkpoint.SaveEvery"} {
		if !strings.Contains(err.Error(), "Config."+f) {
			t.Errorf("joined error %q does not name %s", err, f)
		}
	}
}

// TestConfigValidatePoliciesUseTheirValidators: StartPosition, OnHistoryLost and Checkpoint are
// checked by the policies' own validators (whose rules are tested in package policy), each
// rule named by its path in Config, and New refuses them.
func TestConfigValidatePoliciesUseTheirValidators(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"start position", func(c *Config) { c.StartPosition = policy.At(time.Time{}) },
			"watchtree: Config.StartPosition At needs a non-zero time"},
		{"history lost", func(c *Config) { c.OnHistoryLost = policy.Rebuild(nil) },
			"watchtree: Config.OnHistoryLost Rebuild needs a non-nil function"},
		{"checkpoint", func(c *Config) { c.Checkpoint.SaveEvery = 50; c.Checkpoint.MaxUnflushed = 10 },
			"watchtree: Config.Checkpoint.MaxUnflushed must be >= SaveEvery (50), got 10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			err := c.validate()
			var ce *configerr.Error
			if !errors.As(err, &ce) || ce.Error() != tc.want || !errors.Is(err, configerr.ErrInvalid) {
				t.Fatalf("Validate() = %v, want the configerr.Error %q", err, tc.want)
			}
			if _, err := New(c); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	d := validConfig().withDefaults()
	if d.Checkpoint != policyx.WithDefaults(policy.Checkpoint{}) ||
		d.RetryInitialDelay != 100*time.Millisecond || d.RetryMaxDelay != 30*time.Second || d.IOTimeout != 10*time.Second ||
		d.Epoch() != 0 || d.Clock == nil || d.Logger == nil || d.Observer == nil {
		t.Fatalf("defaults %+v", d)
	}
	c := validConfig()
	c.RetryInitialDelay = time.Minute
	if got := c.withDefaults().RetryMaxDelay; got != time.Minute {
		t.Fatalf("RetryMaxDelay default below RetryInitialDelay: %v, want 1m", got)
	}
}

func TestRetryDelay(t *testing.T) {
	c := Config{RetryInitialDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := c.retryDelay(i + 1); got != w*time.Millisecond {
			t.Errorf("retryDelay(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := c.retryDelay(500); got != time.Second {
		t.Errorf("retryDelay(500) = %v", got)
	}
}
