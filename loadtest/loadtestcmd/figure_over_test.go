package loadtestcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leveehq/levee/loadtest/probe"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
)

// holdFile writes a run file of a hold: n connections held for 10 s,
// the server's memory going from 100 MiB to 100 + grow MiB.
func holdFile(t *testing.T, dir, name string, n, grow float64) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := report.NewWriter(f, report.Meta{Schema: report.Schema, Scenario: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	r := &report.Run{}
	for i := range 10 {
		p := record.Point{T: i, Levels: map[string]float64{"waiting": n, probe.ServerRSS: 100 + grow}}
		if i == 0 {
			p.Levels[probe.ServerRSSBefore] = 100
		}
		r.Points = append(r.Points, p)
		if err := w.Point(p); err != nil {
			t.Fatal(err)
		}
	}
	r.Summary = report.Summarize(r.Points)
	if err := w.EndRun(r); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFigureOverAndMax(t *testing.T) {
	dir := t.TempDir()
	gate := holdFile(t, dir, "gate.ndjson", 1000, 12) // 12 MiB for 1,000
	bare := holdFile(t, dir, "bare.ndjson", 1000, 10) // 10 MiB for 1,000
	var out, errb strings.Builder
	if rc := runArena([]string{"figure", gate, "rss_per_conn"}, os.Getenv, &out, &errb); rc != exitOK || out.String() != "12582.9\n" {
		t.Fatalf("rss_per_conn: rc %d, %q %q", rc, out.String(), errb.String())
	}
	out.Reset()
	if rc := runArena([]string{"figure", "-over", bare, "-max", "1.5", gate, "rss_per_conn"}, os.Getenv, &out, &errb); rc != exitOK || out.String() != "1.2\n" {
		t.Fatalf("gate over bare: rc %d, %q %q", rc, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	rc := runArena([]string{"figure", "-over", bare, "-max", "1.1", gate, "rss_per_conn"}, os.Getenv, &out, &errb)
	if rc != exitError || out.String() != "1.2\n" || !strings.Contains(errb.String(), "above -max 1.1") {
		t.Fatalf("above -max: rc %d, %q %q", rc, out.String(), errb.String())
	}
}
