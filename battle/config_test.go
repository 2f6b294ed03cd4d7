package battle

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.GRPCAddr != ":9100" || c.OpsAddr != ":9101" || c.MaxInFlight <= 0 || c.Drain != 0 {
		t.Fatalf("defaults = %+v", c)
	}
	// The seeds' numbers, and every protection on.
	if !c.Protection || !c.Throttle || !c.AdaptiveShed || !c.InFlightCap ||
		c.CPUInterval != 250*time.Millisecond || c.ThrottleCPU != 0.85 || c.ThrottleMaxDelay != 100*time.Millisecond ||
		c.ShedWindow != 5*time.Second || c.ShedBuckets != 50 || c.ShedCPU != 0.80 || c.ShedCoolOff != time.Second {
		t.Fatalf("protection defaults = %+v", c)
	}
	if !c.throttleOn() || !c.adaptiveShedOn() || !c.inFlightCapOn() {
		t.Fatal("a mechanism is off by default")
	}
}

func TestConfigValidateNamesFlags(t *testing.T) {
	c := Config{ShutdownGrace: -1, Drain: -1, MaxInFlight: -3, ThrottleCPU: 2, ThrottleMaxDelay: -1,
		ShedWindow: 10, ShedBuckets: 20, ShedCPU: -1, ShedCoolOff: -1}
	err := c.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, flag := range []string{"-grpc-addr", "-ops-addr", "-shutdown-grace", "-drain", "-max-in-flight: must be > 0, got -3",
		"-cpu-interval", "-throttle-cpu", "-throttle-max-delay", "-shed-buckets: 20 buckets do not fit", "-shed-cpu", "-shed-cooloff"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("error %q does not name %s", err, flag)
		}
	}
	if _, err := New(c, nil); err == nil {
		t.Fatal("New accepted an invalid config")
	}
}

func TestSwitchesNeedProtection(t *testing.T) {
	c := DefaultConfig()
	c.Protection = false
	if c.throttleOn() || c.adaptiveShedOn() || c.inFlightCapOn() {
		t.Fatal("a mechanism is on with -protection off")
	}
	c = DefaultConfig()
	c.Throttle, c.AdaptiveShed, c.InFlightCap = false, false, false
	if c.throttleOn() || c.adaptiveShedOn() || c.inFlightCapOn() {
		t.Fatal("a mechanism is on with its own switch off")
	}
	c = DefaultConfig()
	c.ThrottleMaxDelay = 0
	if c.throttleOn() {
		t.Fatal("throttle on with -throttle-max-delay 0")
	}
}

func TestDefaultMaxInFlightIsOnePerCPU(t *testing.T) {
	for _, tc := range []struct {
		cpus float64
		want int
	}{{0.25, 1}, {1, 1}, {1.5, 2}, {2, 2}, {16, 16}, {0, 1}} {
		if got := defaultMaxInFlight(tc.cpus); got != tc.want {
			t.Errorf("defaultMaxInFlight(%v) = %d, want %d", tc.cpus, got, tc.want)
		}
	}
}
