package battle

import (
	"strings"
	"testing"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.GRPCAddr != ":9100" || c.OpsAddr != ":9101" || c.MaxInFlight <= 0 || c.Drain != 0 {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestConfigValidateNamesFlags(t *testing.T) {
	c := Config{ShutdownGrace: -1, Drain: -1, MaxInFlight: -3}
	err := c.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, flag := range []string{"-grpc-addr", "-ops-addr", "-shutdown-grace", "-drain", "-max-in-flight: must be > 0, got -3"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("error %q does not name %s", err, flag)
		}
	}
	if _, err := New(c, nil); err == nil {
		t.Fatal("New accepted an invalid config")
	}
}
