package gate

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseLineChangeNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		fields map[string]string
		field  string // named in the error
	}{
		{map[string]string{"mode": "bogus"}, "mode"},
		{map[string]string{"rate": "0"}, "rate"},
		{map[string]string{"interval": "10"}, "interval"},
		{map[string]string{"max_length": "-1"}, "max_length"},
		{map[string]string{"retry_after": "48h"}, "retry_after"},
		{map[string]string{"auto_min_rate": "NaN"}, "auto_min_rate"},
		{map[string]string{"auto_max_rate": "0"}, "auto_max_rate"},
		{map[string]string{"mode": "open", "speed": "fast"}, "speed"},
		{map[string]string{}, "the fields are"},
	} {
		_, err := parseLineChange(tc.fields)
		if !errors.Is(err, errAdmin) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%v: %v, want an errAdmin naming %q", tc.fields, err, tc.field)
		}
	}
	ch, err := parseLineChange(map[string]string{"mode": " AUTO ", "rate": "1000", "interval": "10s", "auto_max_rate": "500"})
	if err != nil || *ch.mode != modeAuto || *ch.n != 1000 || *ch.interval != 10*time.Second || *ch.autoMax != 500 ||
		ch.maxLength != nil || ch.retryAfter != nil || ch.autoMin != nil {
		t.Fatalf("a valid change: %+v, %v", ch, err)
	}
}

// TestLineApplyAllOrNothing: fields each valid on their own but not
// together with the current settings change nothing; a valid change is
// applied whole, and apply reports the settings before and after.
func TestLineApplyAllOrNothing(t *testing.T) {
	g := lineGate(t, "paced", 10, time.Second, func(c *Config) { c.AutoMinRate, c.AutoMaxRate = 10, 100 })
	before := g.line.view(g.clock.Now())
	for _, fields := range []map[string]string{
		{"mode": "closed", "auto_min_rate": "200"},      // above the current max
		{"mode": "auto", "rate": "1", "interval": "1s"}, // below the auto minimum
		{"max_length": "5", "rate": "1000000", "interval": "100ms"},
	} {
		ch, err := parseLineChange(fields)
		if err != nil {
			t.Fatalf("%v: %v, want it to parse", fields, err)
		}
		old, now, err := g.line.apply(ch, g.clock.Now())
		if !errors.Is(err, errAdmin) || old != now {
			t.Fatalf("%v: %v (settings %+v -> %+v), want a refusal changing nothing", fields, err, old, now)
		}
	}
	if after := g.line.view(g.clock.Now()); after.Mode != before.Mode || after.Rate != before.Rate ||
		after.MaxLength != before.MaxLength || after.Auto.MinRate != before.Auto.MinRate {
		t.Fatalf("refused changes changed the line:\nbefore %+v\nafter  %+v", before, after)
	}
	ch, _ := parseLineChange(map[string]string{"mode": "closed", "max_length": "5", "auto_max_rate": "50"})
	old, now, err := g.line.apply(ch, g.clock.Now())
	if err != nil || old.mode != "paced" || now.mode != "closed" || now.maxLength != 5 || now.autoMax != 50 {
		t.Fatalf("a valid change: %v, %+v -> %+v", err, old, now)
	}
	if v := g.line.view(g.clock.Now()); v.Mode != "closed" || v.MaxLength != 5 || v.Auto.MaxRate != 50 {
		t.Fatalf("the view after the change: %+v", v)
	}
}
