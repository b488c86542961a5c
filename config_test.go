package watchtree

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

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
			ConnectTimeout: time.Second, Observer: NopObserver{}}, nil},
		{"no client", Config{}, []string{"watchtree: Config.Client is required, got nil"}},
		{"stores but no client", Config{Checkpoints: memstore.New(memstore.Options{})},
			[]string{"watchtree: Config.Client is required even when stores are set (streams watch through it), got nil"}},
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

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Logger == nil || c.Observer == nil || c.ShutdownTimeout != 30*time.Second || c.ConnectTimeout != 10*time.Second {
		t.Fatalf("defaults = %+v", c)
	}
	if _, ok := c.Observer.(NopObserver); !ok {
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
	if other := defaultInstanceID(); other == c.InstanceID {
		t.Errorf("two default instance IDs are equal: %q", other)
	}
	if err := (Config{Client: &mongo.Client{}, InstanceID: c.InstanceID}).Validate(); err != nil {
		t.Errorf("the default InstanceID does not validate: %v", err)
	}
	set := Config{InstanceID: "x", ShutdownTimeout: time.Second, ConnectTimeout: time.Millisecond, Observer: MultiObserver()}.withDefaults()
	if set.InstanceID != "x" || set.ShutdownTimeout != time.Second || set.ConnectTimeout != time.Millisecond {
		t.Errorf("withDefaults changed set fields: %+v", set)
	}
}
