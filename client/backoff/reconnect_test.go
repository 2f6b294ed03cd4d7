package backoff

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestReconnectFirstDelaySpread(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rc := DefaultReconnect()
	const n = 10000
	var hist [5]int
	for range n {
		d := rc.Delay(0, 0, r.Float64)
		if d < 0 || d >= 5*time.Second {
			t.Fatalf("first reconnect %v, want in [0, 5s)", d)
		}
		hist[d/time.Second]++
	}
	for i, h := range hist {
		if h < n/5*85/100 || h > n/5*115/100 {
			t.Errorf("second %d has %d of %d first reconnects, want about %d", i, h, n, n/5)
		}
	}
	if d := (Reconnect{}).Delay(0, 0, constRnd(0.999)); d < 4900*ms || d >= 5*time.Second {
		t.Errorf("zero Reconnect first delay %v, want the default 5s spread", d)
	}
	if d := (Reconnect{Spread: time.Second}).Delay(0, 0, constRnd(0.5)); d != 500*ms {
		t.Errorf("Spread 1s, rnd 0.5: %v, want 500ms", d)
	}
	if d := rc.Delay(0, 3*time.Second, constRnd(0)); d != 3*time.Second {
		t.Errorf("first reconnect with retryAfter 3s: %v", d)
	}
}

func TestReconnectThenBacksOff(t *testing.T) {
	rc := DefaultReconnect()
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}
	r := rand.New(rand.NewPCG(9, 10))
	for i, c := range want {
		n := i + 1
		if got := rc.Delay(n, 0, constRnd(0.5)); got != c/2 {
			t.Errorf("reconnect %d, rnd 0.5: %v, want %v", n, got, c/2)
		}
		for range 500 {
			if d := rc.Delay(n, 0, r.Float64); d < 0 || d >= c {
				t.Fatalf("reconnect %d: %v, want in [0, %v)", n, d, c)
			}
		}
		if d := rc.Delay(n, time.Second, r.Float64); d < time.Second {
			t.Fatalf("reconnect %d with retryAfter 1s: %v", n, d)
		}
	}
}

func TestReconnectValidate(t *testing.T) {
	if err := DefaultReconnect().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, rc := range []Reconnect{{Spread: -1}, {Base: -1}, {Base: time.Minute}} {
		if err := rc.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", rc, err)
		}
	}
}
