package queue

import (
	"errors"
	"testing"
	"time"
)

// TestInvalidSetRateChangesNothing: zero, negative and absurd rates are
// refused with ErrInvalidRate, and the line releases exactly as a twin that
// never saw them.
func TestInvalidSetRateChangesNothing(t *testing.T) {
	bad := []Rate{
		{0, 10 * time.Second},
		{-5, 10 * time.Second},
		{1000, 0},
		{1000, -time.Second},
		{1000, 2 * time.Hour},
		{1, time.Microsecond},
		{1_000_001, time.Second},
		{20_000_001, 20 * time.Second},
	}
	q, twin := newQ(t, paced), newQ(t, paced)
	fill(t, q, 2000, t0)
	fill(t, twin, 2000, t0)
	q.Release(at(time.Second))
	twin.Release(at(time.Second))
	before := q.Stats(at(time.Second))
	for _, r := range bad {
		if err := q.SetRate(r.N, r.Interval, at(time.Second)); !errors.Is(err, ErrInvalidRate) {
			t.Errorf("SetRate(%v): %v, want ErrInvalidRate", r, err)
		}
	}
	if err := q.SetMode(Mode(9), at(time.Second)); !errors.Is(err, ErrInvalidMode) {
		t.Errorf("SetMode(9): %v", err)
	}
	if err := q.SetMaxLength(0); !errors.Is(err, ErrInvalidLength) {
		t.Errorf("SetMaxLength(0): %v", err)
	}
	if err := q.SetMaxLength(MaxMaxLength + 1); !errors.Is(err, ErrInvalidLength) {
		t.Errorf("SetMaxLength(huge): %v", err)
	}
	if err := q.SetRetryAfter(-time.Second); !errors.Is(err, ErrInvalidRetryAfter) {
		t.Errorf("SetRetryAfter(-1s): %v", err)
	}
	if after := q.Stats(at(time.Second)); after != before {
		t.Fatalf("stats changed:\n%+v\n%+v", before, after)
	}
	for i := 1; i <= 100; i++ {
		now := at(time.Second + time.Duration(i)*37*time.Millisecond)
		if a, b := len(q.Release(now)), len(twin.Release(now)); a != b {
			t.Fatalf("step %d: released %d, twin %d", i, a, b)
		}
	}
	// The bounds themselves are accepted.
	for _, r := range []Rate{{MaxPerSecond, time.Second}, {1, MaxInterval}, {1, MinInterval}} {
		if err := q.SetRate(r.N, r.Interval, at(time.Minute)); err != nil {
			t.Errorf("SetRate(%v): %v", r, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Config){
		"mode":        func(c *Config) { c.Mode = 0 },
		"rate":        func(c *Config) { c.Rate.N = 0 },
		"max length":  func(c *Config) { c.MaxLength = -1 },
		"grace":       func(c *Config) { c.Grace = 0 },
		"retry-after": func(c *Config) { c.ClosedRetryAfter = 0 },
		"window":      func(c *Config) { c.Window = time.Millisecond },
	} {
		cfg := DefaultConfig()
		edit(&cfg)
		if _, err := New(cfg, t0); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestParseMode(t *testing.T) {
	for m := Open; m <= Closed; m++ {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if got, _ := ParseMode("PACED"); got != Paced {
		t.Errorf("ParseMode(PACED) = %v", got)
	}
	if _, err := ParseMode("auto"); !errors.Is(err, ErrInvalidMode) {
		t.Errorf("ParseMode(auto): %v", err)
	}
}

func TestBadPlayerAndUnknownTicket(t *testing.T) {
	q := newQ(t, paced)
	if _, err := q.Join("", t0, true); !errors.Is(err, ErrBadPlayer) {
		t.Fatalf("empty player: %v", err)
	}
	if err := q.Leave(1, t0); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("leave unknown: %v", err)
	}
	if err := q.Cancel(1, t0); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("cancel unknown: %v", err)
	}
	if _, err := q.Position(1, t0); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("position unknown: %v", err)
	}
}
