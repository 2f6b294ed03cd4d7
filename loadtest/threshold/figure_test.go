package threshold

import (
	"errors"
	"testing"
)

func TestParseFigure(t *testing.T) {
	f := facts{scalars: map[string]float64{"sent": 10}, series: map[string][]float64{"cpu": {0.5, 0.7, 0.9}}}
	for _, c := range []struct {
		in   string
		want float64
	}{
		{"sent", 10},
		{" max(cpu) ", 0.9},
		{"median(cpu)", 0.7},
	} {
		fig, err := ParseFigure(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if v, err := fig.Value(f); err != nil || v != c.want {
			t.Errorf("%q = %v, %v; want %v", c.in, v, err, c.want)
		}
	}
	for _, bad := range []string{"", "nonsense", "sent < 3", "max(cpu) extra", "cpu"} {
		if _, err := ParseFigure(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: err %v, want ErrSyntax", bad, err)
		}
	}
	fig, _ := ParseFigure("failed")
	if _, err := fig.Value(f); !errors.Is(err, ErrNoFigure) {
		t.Errorf("missing figure: err %v, want ErrNoFigure", err)
	}
	fig, _ = ParseFigure("max(cpu)[10s:20s]")
	if _, err := fig.Value(f); !errors.Is(err, ErrNoFigure) {
		t.Errorf("a window of facts that have none: err %v, want ErrNoFigure", err)
	}
}
