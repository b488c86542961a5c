package checkpointer

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store/memstore"
)

func validConfig() Config {
	ms := memstore.New(memstore.Options{})
	return Config{Stream: "orders", Store: ms, Gaps: ms, Positions: &fakePositions{}}
}

func TestConfigValidate(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
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
		{"gaps resumeFromNow", func(c *Config) { c.Gaps = nil; c.OnHistoryLost = ResumeFromNow }, "Config.Gaps must not be nil when OnHistoryLost is ResumeFromNow"},
		{"gaps rebuild", func(c *Config) {
			c.Gaps = nil
			c.OnHistoryLost = Rebuild(func(context.Context) error { return nil })
		}, "Config.Gaps must not be nil when OnHistoryLost is Rebuild"},
		{"rebuild nil", func(c *Config) { c.OnHistoryLost = Rebuild(nil) }, "Config.OnHistoryLost Rebuild needs a non-nil function"},
		{"at zero", func(c *Config) { c.StartPosition = At(time.Time{}) }, "Config.StartPosition At needs a non-zero time"},
		{"at range", func(c *Config) { c.StartPosition = At(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)) }, "Config.StartPosition At needs a time between 1970 and 2106"},
		{"save every", func(c *Config) { c.SaveEvery = -1 }, "Config.SaveEvery must be >= 0 (0 means 100), got -1"},
		{"save interval", func(c *Config) { c.SaveInterval = -time.Second }, "Config.SaveInterval must be >= 0 (0 means 1s), got -1s"},
		{"max unflushed negative", func(c *Config) { c.MaxUnflushed = -1 }, "Config.MaxUnflushed must be >= 0"},
		{"max unflushed below save every", func(c *Config) { c.SaveEvery = 50; c.MaxUnflushed = 10 }, "Config.MaxUnflushed must be >= SaveEvery (50), got 10"},
		{"retry initial", func(c *Config) { c.RetryInitialDelay = -1 }, "Config.RetryInitialDelay must be >= 0"},
		{"io timeout", func(c *Config) { c.IOTimeout = -time.Second }, "Config.IOTimeout must be >= 0 (0 means 10s), got -1s"},
		{"retry max", func(c *Config) { c.RetryMaxDelay = -1 }, "Config.RetryMaxDelay must be >= 0"},
		{"retry max below initial", func(c *Config) { c.RetryInitialDelay = time.Second; c.RetryMaxDelay = time.Millisecond }, "Config.RetryMaxDelay must be >= RetryInitialDelay (1s), got 1ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
			if _, err := New(c); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
	// Several broken rules are all named.
	err := Config{SaveEvery: -1}.Validate()
	for _, f := range []string{"Stream", "Store", "Positions", "SaveEvery"} {
		if !strings.Contains(err.Error(), "Config."+f) {
			t.Errorf("joined error %q does not name %s", err, f)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	d := validConfig().withDefaults()
	if d.SaveEvery != 100 || d.SaveInterval != time.Second || d.MaxUnflushed != 10000 ||
		d.RetryInitialDelay != 100*time.Millisecond || d.RetryMaxDelay != 30*time.Second || d.IOTimeout != 10*time.Second ||
		d.Epoch() != 0 || d.Clock == nil || d.Logger == nil || d.Events == nil {
		t.Fatalf("defaults %+v", d)
	}
	c := validConfig()
	c.SaveEvery = 7
	if got := c.withDefaults().MaxUnflushed; got != 700 {
		t.Fatalf("MaxUnflushed default %d, want 700", got)
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

func TestPolicyStrings(t *testing.T) {
	if Fail.String() != "Fail" || ResumeFromNow.String() != "ResumeFromNow" || Rebuild(nil).String() != "Rebuild" {
		t.Fatal("HistoryLostPolicy strings")
	}
	if Resume.String() != "Resume" || Latest.String() != "Latest" ||
		At(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)).String() != "At(2026-01-02T03:04:05Z)" {
		t.Fatal("StartPosition strings")
	}
}

// TestMessagesAreProto: every message the checkpointer sends to or receives from other actors
// is a protobuf message.
func TestMessagesAreProto(t *testing.T) {
	for _, m := range []any{
		&messages.ResolveStart{}, &messages.StartFrom{}, &messages.OperationTime{}, &messages.HistoryLost{},
		&messages.Flush{}, &messages.Flushed{}, &messages.FlowControl{}, &messages.AttachDispatcher{},
		&messages.Progress{}, &messages.SettledBatch{}, &messages.Settled{},
	} {
		if _, ok := m.(proto.Message); !ok {
			t.Errorf("%T is not a proto.Message", m)
		}
	}
}
