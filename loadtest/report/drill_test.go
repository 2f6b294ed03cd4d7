package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/leveehq/levee/loadtest/record"
)

// drillRun is 60 s of 100 ok/s with a fault at 20 s that ends at 23 s;
// okAt overrides the goodput of some seconds.
func drillRun(okAt map[int]int64) *Run {
	r := &Run{Meta: Meta{Scenario: "battle-killed", Description: "a kill"}}
	for t := range 60 {
		ok := int64(100)
		if v, set := okAt[t]; set {
			ok = v
		}
		r.Points = append(r.Points, record.Point{T: t, Counters: map[string]int64{"sent": 100, "ok": ok}})
	}
	r.Events = []Event{
		{T: 20, What: "0:20 fault kill battle-1", Kind: EventFault},
		{T: 23, What: "0:20 kill battle-1: battle-1 back (healthy) after 3.0 s", Kind: EventFault},
		{T: 20, End: 23, What: "0:20 fault kill battle-1: over after 3.0 s", Kind: EventFault},
		{T: 5, What: "line open", Kind: "line"},
	}
	r.Summary = Summarize(r.Points)
	return r
}

func TestFaultFigures(t *testing.T) {
	dip := map[int]int64{20: 0, 21: 0, 22: 0, 23: 0, 24: 0, 25: 50, 26: 80, 27: 100}
	f := drillRun(dip).Facts()
	for name, want := range map[string]float64{
		"fault_goodput_before": 100,
		"fault_goodput_during": 0, // seconds 20..22
		"fault_recovery":       4, // 27..29 average 100; 26..28 average 93 < 95
		"max_failed_latency":   0, // no error reply
	} {
		if got, ok := f.Value(name); !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, %v; want %v", name, got, ok, want)
		}
	}
	// It never comes back: +Inf, so that "fault_recovery <= 5s" fails.
	never := map[int]int64{}
	for s := 20; s < 60; s++ {
		never[s] = 10
	}
	if got, ok := drillRun(never).Facts().Value("fault_recovery"); !ok || !math.IsInf(got, 1) {
		t.Errorf("fault_recovery without recovery = %v, %v; want +Inf", got, ok)
	}
	// It never fell: 0.
	if got, _ := drillRun(nil).Facts().Value("fault_recovery"); got != 0 {
		t.Errorf("fault_recovery without a dip = %v; want 0", got)
	}
	// No fault: no figure (a threshold on it fails with "no figure").
	r := drillRun(nil)
	r.Events = nil
	if _, ok := r.Facts().Value("fault_recovery"); ok {
		t.Error("fault_recovery of a run without faults should be missing")
	}
}

// The load during the fault per request then, and the lifetime attempts
// of the requests due then.
func TestFaultAttempts(t *testing.T) {
	r := drillRun(nil)
	for i := range r.Points {
		r.Points[i].Counters["attempts/1"] = 100
	}
	r.Points[21].Counters["fault_requests"] = 100
	r.Points[21].Counters["fault_sends"] = 105
	r.Points[22].Counters["fault_sends"] = 3 // a retry a second later
	r.Points[30].Counters["fault_attempts/1"] = 50
	r.Points[59].Counters["fault_attempts/3"] = 50 // ended late: counted where it ended
	r.Summary = Summarize(r.Points)
	f := r.Facts()
	if got, ok := f.Value("fault_attempts_per_request"); !ok || math.Abs(got-1.08) > 1e-9 {
		t.Errorf("fault_attempts_per_request = %v, %v; want 1.08", got, ok)
	}
	if got, ok := f.Value("fault_request_attempts"); !ok || math.Abs(got-2) > 1e-9 {
		t.Errorf("fault_request_attempts = %v, %v; want 2", got, ok)
	}
}

func TestMaxFailedLatency(t *testing.T) {
	r := drillRun(nil)
	h := record.NewHist()
	h.Record(4_200_000_000) // 4.2 s in ns
	r.Points[30].Hists = map[string]*record.Hist{record.HistLatFailed: h}
	r.Summary = Summarize(r.Points)
	got, ok := r.Facts().Value("max_failed_latency")
	if !ok || math.Abs(got-4.2) > 0.01 {
		t.Fatalf("max_failed_latency = %v, %v; want 4.2", got, ok)
	}
}

func TestWriteReliability(t *testing.T) {
	pass := drillRun(map[int]int64{20: 0, 21: 0})
	pass.Criteria = []Criterion{{Threshold: "fault_recovery <= 5s", Passed: true, Value: 0, Limit: 5}}
	fail := drillRun(nil)
	fail.Meta.Scenario = "logic-killed"
	fail.Criteria = []Criterion{{Threshold: "ledger_lost == 0", Passed: false, Value: 2}}
	ref := drillRun(nil)
	ref.Meta.Scenario = "cpu-squeeze-naive"
	var b bytes.Buffer
	if err := WriteReliability(&b, Reliability{Command: "make drills", Machine: "2 cores", Capacity: 400, Date: "2026-12-01"}, []*Run{pass, fail, ref}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"`make drills`", "2 cores", "400 requests/s", "1 of 2 drills passed (and 1 reference runs",
		"| **battle-killed**<br>a kill | T+20-23s kill battle-1: over after 3.0 s |", "✓ `fault_recovery <= 5s` (0)", "**PASS**",
		"✗ `ledger_lost == 0` (2)", "**FAIL**", "reference (no thresholds)",
		"fault_recovery 0 s", "- T+23.0s 0:20 kill battle-1: battle-1 back (healthy) after 3.0 s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("RELIABILITY.md lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "line open") {
		t.Error("line events are not faults")
	}
	if strings.Contains(out, "logic_shards_held") {
		t.Error("a run without lease series shows them")
	}
}

// A drill on logic on PostgreSQL shows its lease series: the fewest and
// the last shards held, the most without an owner, lease losses and
// fenced commits.
func TestWriteReliabilityLeaseSeries(t *testing.T) {
	r := drillRun(nil)
	for i := range r.Points {
		held := 256.0
		if i >= 20 && i < 26 {
			held = 171
		}
		r.Points[i].Levels = map[string]float64{"logic_shards_held": held, "logic_shards_without_owner": 0,
			"logic_lease_losses": float64(min(i/25, 1)), "logic_fenced_commits": 0}
	}
	r.Points[22].Levels["logic_shards_without_owner"] = 85
	delete(r.Points[23].Levels, "logic_shards_held") // a second without a sample
	var b bytes.Buffer
	if err := WriteReliability(&b, Reliability{Command: "make drills", Machine: "2 cores", Date: "2026-12-01"}, []*Run{r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"min(logic_shards_held) 171<br>last(logic_shards_held) 256<br>max(logic_shards_without_owner) 85<br>" +
		"max(logic_lease_losses) 1<br>max(logic_fenced_commits) 0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("RELIABILITY.md lacks %q:\n%s", want, b.String())
		}
	}
}

// TestMixServed: the mix's requests/s served in full is bounded by its
// scarcest kind (battle here, half of the mix), business replies are
// served, and a run file without the mix has no such series.
func TestMixServed(t *testing.T) {
	r := &Run{Meta: Meta{Mix: map[string]float64{"battle": 0.5, "profile": 0.3, "purchase": 0.2}}}
	for s, battles := range []int64{60, 70, 0} {
		r.Points = append(r.Points, record.Point{T: s, Counters: map[string]int64{
			"battle/ok": battles, "battle/refused": 200, "profile/ok": 300, "purchase/ok": 150, "purchase/business": 50}})
	}
	r.Points = append(r.Points, record.Point{T: 3, Counters: map[string]int64{"battle/ok": 500, "profile/ok": 60, "purchase/ok": 200}})
	got, ok := r.Facts().Series("mix_served")
	want := []float64{120, 140, 0, 200} // battles / 0.5; the last second profiles bound it: 60 / 0.3
	if !ok || len(got) != len(want) {
		t.Fatalf("mix_served = %v, %v; want %v", got, ok, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Errorf("mix_served[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	r.Meta.Mix = nil
	if got, ok := r.Facts().Series("mix_served"); ok {
		t.Errorf("mix_served without a mix = %v; want no series", got)
	}
}
