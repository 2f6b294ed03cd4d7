package logic

import (
	"errors"
	"strings"
	"testing"
)

func hostname(h string) func() (string, error) { return func() (string, error) { return h, nil } }

// -instance-from-hostname: the trailing -N of the hostname's first label is
// the instance, checked against -instances like -instance, and New puts it
// into Instance.
func TestInstanceFromHostname(t *testing.T) {
	base := DefaultConfig()
	base.DataDir, base.BattleAddrs = "/tmp/x", []string{"127.0.0.1:9100"}
	base.Shards, base.Instances, base.InstanceFromHostname = 8, 2, true
	for _, c := range []struct {
		host     string
		instance int
		want     int    // the ordinal, when valid
		wantErr  string // else
	}{
		{host: "logic-0", want: 0},
		{host: "logic-1", want: 1},
		{host: "logic-1.logic.levee.svc.cluster.local", want: 1},
		{host: "my-logic-01", want: 1},
		{host: "logic", wantErr: `-instance-from-hostname: hostname "logic" has no -N ordinal`},
		{host: "logic-", wantErr: `hostname "logic-" has no -N ordinal`},
		{host: "logic-x1", wantErr: `hostname "logic-x1" has no -N ordinal`},
		{host: "logic-+1", wantErr: `has no -N ordinal`},
		{host: "logic-2", wantErr: "-instance-from-hostname: ordinal 2 must be < -instances (2)"},
		{host: "logic-99999999999999999999", wantErr: "-instance-from-hostname: hostname"},
		{host: "logic-1", instance: 1, wantErr: "-instance-from-hostname: cannot be combined with -instance 1"},
	} {
		cfg := base
		cfg.Hostname, cfg.Instance = hostname(c.host), c.instance
		err := cfg.Validate()
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: Validate() = %v, want %q", c.host, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Validate() = %v", c.host, err)
			continue
		}
		got, err := cfg.resolveInstance()
		if err != nil || got.Instance != c.want || got.InstanceFromHostname {
			t.Errorf("%s: resolveInstance = instance %d (from hostname %v), %v; want %d", c.host, got.Instance, got.InstanceFromHostname, err, c.want)
		}
	}

	cfg := base
	cfg.Hostname = func() (string, error) { return "", errors.New("no uts") }
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-instance-from-hostname: no uts") {
		t.Errorf("hostname error: Validate() = %v", err)
	}
	// An ordinal that hosts no shard is named after the flag that gave it.
	cfg = base
	cfg.Shards, cfg.Instances, cfg.Hostname = 2, 4, hostname("logic-3")
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-instance-from-hostname: 3 hosts no shard of 2") {
		t.Errorf("ordinal past the shards: Validate() = %v", err)
	}
	// Off, the hostname is not read.
	cfg = base
	cfg.InstanceFromHostname, cfg.Hostname = false, func() (string, error) { t.Fatal("hostname read"); return "", nil }
	if err := cfg.Validate(); err != nil {
		t.Errorf("off: Validate() = %v", err)
	}
}

// -battle-addrs takes one dns:///HOST:PORT, alone and well formed.
func TestBattleDNSTargetConfig(t *testing.T) {
	base := DefaultConfig()
	base.DataDir = "/tmp/x"
	for _, c := range []struct {
		addrs   []string
		want    string // the HOST:PORT, or "" for a plain list
		wantErr string
	}{
		{addrs: []string{"a:1", "b:2"}},
		{addrs: []string{"dns:///battle.levee.svc.cluster.local:9100"}, want: "battle.levee.svc.cluster.local:9100"},
		{addrs: []string{" dns:///battle:9100 "}, want: "battle:9100"},
		{addrs: []string{"dns:///battle:9100", "b:2"}, wantErr: "-battle-addrs: a dns:/// entry must be the only one"},
		{addrs: []string{"dns://8.8.8.8/battle:9100"}, wantErr: "want dns:///HOST:PORT (no DNS server authority)"},
		{addrs: []string{"dns:///battle"}, wantErr: "want dns:///HOST:PORT"},
		{addrs: []string{"dns:///:9100"}, wantErr: "empty host"},
		{addrs: []string{"dns:///battle:http"}, wantErr: "port must be a number"},
		{addrs: []string{"dns:///battle:0"}, wantErr: "port must be a number"},
	} {
		cfg := base
		cfg.BattleAddrs = c.addrs
		err := cfg.Validate()
		got, dns, _ := battleDNSTarget(c.addrs)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: Validate() = %v, want %q", c.addrs, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%q: Validate() = %v", c.addrs, err)
		case got != c.want || dns != (c.want != ""):
			t.Errorf("%q: target %q (dns %v), want %q", c.addrs, got, dns, c.want)
		}
	}
	cfg := base
	cfg.BattleAddrs, cfg.BattleResolveInterval = []string{"dns:///battle:9100"}, 500e6
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-battle-resolve-interval: must be >= 1s, got 500ms") {
		t.Errorf("short interval: Validate() = %v", err)
	}
}
