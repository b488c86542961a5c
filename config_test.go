package watchtree

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store/memstore"
)

func TestConfigValidate(t *testing.T) {
	client := &mongo.Client{}
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"minimal", Config{Client: client}, nil},
		{"everything set", Config{Client: client, Database: "shop", InstanceID: "pod-1", ShutdownTimeout: time.Second,
			ConnectTimeout: time.Second, Observer: observe.Nop{}}, nil},
		{"no client", Config{}, []string{"watchtree: Config.Client is required, got nil"}},
		{"console on loopback without a token", Config{Client: client, Console: ConsoleConfig{Addr: "127.0.0.1:8090"}}, nil},
		{"console on localhost and an empty host", Config{Client: client, Console: ConsoleConfig{Addr: ":0"}}, nil},
		{"console beyond loopback with a token", Config{Client: client, Console: ConsoleConfig{Addr: "0.0.0.0:8090", Token: "t"}}, nil},
		{"console beyond loopback without a token", Config{Client: client, Console: ConsoleConfig{Addr: "10.0.0.5:8090"}},
			[]string{`watchtree: Config.Console.Token is required when Addr listens beyond loopback, got Addr "10.0.0.5:8090" and no token`}},
		{"console address without a port", Config{Client: client, Console: ConsoleConfig{Addr: "localhost"}},
			[]string{`watchtree: Config.Console.Addr must be host:port, got "localhost"`}},
		{"console negative request timeout", Config{Client: client, Console: ConsoleConfig{RequestTimeout: -1}},
			[]string{`watchtree: Config.Console.RequestTimeout must be >= 0 (0 means the default 10s), got -1ns`}},
		{"stores but no client", Config{Checkpoints: memstore.New(memstore.Options{})},
			[]string{"watchtree: Config.Client is required even when stores are set (streams watch through it), got nil"}},
		{"every store set", Config{Client: client, Checkpoints: memstore.New(memstore.Options{}), DeadLetters: memstore.New(memstore.Options{}),
			Gaps: memstore.New(memstore.Options{}), Snapshots: memstore.New(memstore.Options{}), Leases: memstore.NewLeases(memstore.Options{})}, nil},
		{"typed nil stores", Config{Client: client, Checkpoints: (*memstore.Store)(nil), Leases: (*memstore.Leases)(nil)},
			[]string{"watchtree: Config.Checkpoints must be nil (the default store) or a usable store, got a nil *memstore.Store",
				"watchtree: Config.Leases must be nil (the default store) or a usable store, got a nil *memstore.Leases"}},
		{"bad database", Config{Client: client, Database: "a b"},
			[]string{`watchtree: Config.Database must not contain any of /\. "$*<>:|? or NUL, got "a b"`}},
		{"lease renewals too rare", Config{Client: client, Lease: LeasePolicy{TTL: 2 * time.Second, RenewEvery: time.Second}},
			[]string{"watchtree: Config.Lease.RenewEvery must leave room for two renewals before the leader stops: 2 × RenewEvery <= TTL - Margin (2s - 200ms), got 1s"}},
		{"negative shutdown timeout", Config{Client: client, ShutdownTimeout: -time.Second},
			[]string{"watchtree: Config.ShutdownTimeout must be > 0 (0 means the default 30s), got -1s"}},
		{"negative connect timeout", Config{Client: client, ConnectTimeout: -time.Millisecond},
			[]string{"watchtree: Config.ConnectTimeout must be >= 0 (0 means the default 10s), got -1ms"}},
		{"instance id with a space", Config{Client: client, InstanceID: "pod 1"},
			[]string{`watchtree: Config.InstanceID must be printable characters without spaces, got "pod 1"`}},
		{"instance id with a control character", Config{Client: client, InstanceID: "pod\n1"},
			[]string{`watchtree: Config.InstanceID must be printable characters without spaces, got "pod\n1"`}},
		{"instance id too long", Config{Client: client, InstanceID: strings.Repeat("i", 201)},
			[]string{`watchtree: Config.InstanceID must be at most 200 bytes, got "` + strings.Repeat("i", 201) + `"`}},
		{"instance name", Config{Client: client, InstanceName: "orders-7d9f8-x2x7q.eu_1"}, nil},
		{"instance name with a slash", Config{Client: client, InstanceName: "pod/a"},
			[]string{`watchtree: Config.InstanceName must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got "pod/a"`}},
		{"instance name starting with a dot", Config{Client: client, InstanceName: ".pod"},
			[]string{`watchtree: Config.InstanceName must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got ".pod"`}},
		{"instance name too long", Config{Client: client, InstanceName: strings.Repeat("p", 101)},
			[]string{`watchtree: Config.InstanceName must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got "` + strings.Repeat("p", 101) + `"`}},
		{"several", Config{ShutdownTimeout: -1},
			[]string{"watchtree: Config.Client is required, got nil",
				"watchtree: Config.ShutdownTimeout must be > 0 (0 means the default 30s), got -1ns"}},
	}
	var cases []validationCase
	for _, tt := range tests {
		cases = append(cases, validationCase{name: tt.name, err: tt.cfg.Validate(), want: tt.want})
	}
	checkValidation(t, cases)
}

// TestDefaultInstanceName: a hostname that cannot be an instance name fails New, naming the
// field and the hostname, instead of silently becoming another identity.
func TestDefaultInstanceName(t *testing.T) {
	for _, tt := range []struct{ host, want string }{
		{"orders-7d9f8-x2x7q", ""},
		{"host.example.com", ""},
		{"", "watchtree: Config.InstanceName must be set: it defaults to the hostname, which is unavailable"},
		{"my host", `watchtree: Config.InstanceName must be set: it defaults to the hostname, which must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit, got "my host"`},
	} {
		err := defaultInstanceNameError(tt.host)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("hostname %q: %v", tt.host, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("hostname %q: %v, want %q", tt.host, err, tt.want)
		case tt.want != "" && !errors.Is(err, ErrInvalidConfig):
			t.Errorf("hostname %q: %v does not match ErrInvalidConfig", tt.host, err)
		}
	}
	if host, _ := os.Hostname(); streamNameRule(host) == "" {
		rt, err := New(Config{Client: &mongo.Client{}})
		if err != nil || rt.cfg.InstanceName != host {
			t.Fatalf("New with the default InstanceName: %v, name %q, want the hostname %q", err, rt.cfg.InstanceName, host)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Logger == nil || c.Observer == nil || c.ShutdownTimeout != 30*time.Second || c.ConnectTimeout != 10*time.Second {
		t.Fatalf("defaults = %+v", c)
	}
	if _, ok := c.Observer.(observe.Nop); !ok {
		t.Errorf("default observer = %T", c.Observer)
	}
	host, _ := os.Hostname()
	re := regexp.MustCompile(`^(.+)-(\d+)-([0-9a-f]{6})$`)
	m := re.FindStringSubmatch(c.InstanceID)
	if m == nil {
		t.Fatalf("InstanceID %q does not match host-pid-random", c.InstanceID)
	}
	if host != "" && instanceIDRule(host) == "" && m[1] != host {
		t.Errorf("InstanceID host part = %q, want %q", m[1], host)
	}
	if m[2] != fmt.Sprint(os.Getpid()) {
		t.Errorf("InstanceID pid part = %q", m[2])
	}
	if other := defaultInstanceID(host); other == c.InstanceID {
		t.Errorf("two default instance IDs are equal: %q", other)
	}
	if err := (Config{Client: &mongo.Client{}, InstanceID: c.InstanceID}).Validate(); err != nil {
		t.Errorf("the default InstanceID does not validate: %v", err)
	}
	if host != "" && c.InstanceName != host {
		t.Errorf("default InstanceName = %q, want the hostname %q", c.InstanceName, host)
	}
	named := (Config{InstanceName: "pod-7"}).withDefaults()
	if named.InstanceName != "pod-7" {
		t.Errorf("withDefaults changed InstanceName to %q", named.InstanceName)
	}
	// The default InstanceID starts with the InstanceName, so a lease owner names its instance.
	if want := fmt.Sprintf("pod-7-%d-", os.Getpid()); !strings.HasPrefix(named.InstanceID, want) || len(named.InstanceID) != len(want)+6 {
		t.Errorf("default InstanceID with InstanceName pod-7 = %q, want %s<6 hex digits>", named.InstanceID, want)
	}
	set := Config{InstanceID: "x", ShutdownTimeout: time.Second, ConnectTimeout: time.Millisecond, Observer: observe.Multi()}.withDefaults()
	if set.InstanceID != "x" || set.ShutdownTimeout != time.Second || set.ConnectTimeout != time.Millisecond {
		t.Errorf("withDefaults changed set fields: %+v", set)
	}
}
