package loadtestcmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
)

// figureRunFile is 30 s of a run whose mix is half battles: 40 battles
// served per second, 100 from second 10 to 24 (the overload's steady
// seconds), so the mix's capacity there is 200 requests/s.
func figureRunFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.ndjson")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := report.NewWriter(f, report.Meta{Scenario: "capacity", Mix: map[string]float64{"battle": 0.5, "profile": 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	var points []record.Point
	for s := range 30 {
		b := int64(40)
		if s >= 10 && s < 25 {
			b = 100
		}
		p := record.Point{T: s, Counters: map[string]int64{"sent": 400, "ok": b + 300, "battle/ok": b, "battle/refused": 100 - b, "profile/ok": 300}}
		points = append(points, p)
		if err := w.Point(p); err != nil {
			t.Fatal(err)
		}
	}
	r := &report.Run{Points: points, Summary: report.Summarize(points)}
	if err := w.EndRun(r); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFigure(t *testing.T) {
	path := figureRunFile(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{path, "median(mix_served)[10s:25s]"}, "200"},
		{[]string{path, "max(mix_served)"}, "200"},
		{[]string{path, "min(mix_served)"}, "80"},
		{[]string{path, "sent"}, "12000"},
		{[]string{"-from", "10", "-to", "25", path, "median:@battle/ok"}, "100"},
		{[]string{"-from", "0", "-to", "10", path, "median:mix_served"}, "80"},
	} {
		var out, errb bytes.Buffer
		if rc := runArena(append([]string{"figure"}, c.args...), func(string) string { return "" }, &out, &errb); rc != exitOK {
			t.Errorf("figure %v: exit %d: %s", c.args, rc, errb.String())
			continue
		}
		if got := strings.TrimSpace(out.String()); got != c.want {
			t.Errorf("figure %v = %s, want %s", c.args, got, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		rc   int
		msg  string
	}{
		{[]string{path, "nonsense"}, exitUsage, "unknown figure"},
		{[]string{"-from", "3", path, "sent"}, exitUsage, "give a figure its window"},
		{[]string{path, "p(99)"}, exitError, "no figure for p(99)"},
	} {
		var out, errb bytes.Buffer
		if rc := runArena(append([]string{"figure"}, c.args...), func(string) string { return "" }, &out, &errb); rc != c.rc || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("figure %v: exit %d (%s), want %d with %q", c.args, rc, errb.String(), c.rc, c.msg)
		}
	}
}
