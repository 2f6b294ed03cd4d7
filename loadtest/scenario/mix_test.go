package scenario

import (
	"math"
	"testing"
)

func TestMix(t *testing.T) {
	s := &Scenario{Players: Players{Actions: []Act{
		{Do: "profile", Weight: 3}, {Do: "battle", Weight: 4}, {Do: "battle", Weight: 1}, {Do: "purchase", Weight: 2}}}}
	want := map[string]float64{"profile": 0.3, "battle": 0.5, "purchase": 0.2}
	got := s.Mix()
	if len(got) != len(want) {
		t.Fatalf("Mix() = %v, want %v", got, want)
	}
	for do, w := range want {
		if math.Abs(got[do]-w) > 1e-12 {
			t.Errorf("Mix()[%s] = %v, want %v", do, got[do], w)
		}
	}
	if m := (&Scenario{}).Mix(); m != nil {
		t.Errorf("empty mix = %v, want nil", m)
	}
}
