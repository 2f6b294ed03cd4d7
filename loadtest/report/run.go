// Package report is the launch-day load tool's record of a run: the
// versioned NDJSON run file (Writer streams it, Read reads it back), the
// figures thresholds are judged on (Facts, Evaluate), the per-minute table
// (WriteTable, WriteCompare) and the self-contained HTML report with its
// plots (WriteHTML).
//
// Times in a Run are wall seconds since the run's start; Meta.Speed and
// Meta.T0 turn them into scenario time for labels: minute m of the table
// covers wall seconds [m*60/Speed, (m+1)*60/Speed) and, with T0 set, is
// labelled by its scenario time relative to T+0 ("T-5:00", "T+0:00").
//
// Status of a minute, from the seed's bounds:
//
//	failing   lost > 0, or failed/sent > 1 %, or p99 (from send) > 1 s
//	backlog   max logic_queue_depth >= 100, or max battle_p99 >= 200 ms
//	queueing  waiting > 0 at some second
//	normal    otherwise
package report

import (
	"time"

	"github.com/leveehq/levee/loadtest/record"
)

// Schema is the run file's version; Read refuses newer ones.
const Schema = 1

// Tool is Meta.Tool of the files this package writes.
const Tool = "levee-loadtest"

// Phase is a named stretch of a run, in wall seconds.
type Phase struct {
	Name string  `json:"name"`
	From float64 `json:"from"`
	To   float64 `json:"to"`
}

// Meta describes a run; it is the run file's first line.
type Meta struct {
	Schema      int       `json:"schema"`
	Tool        string    `json:"tool"`
	Scenario    string    `json:"scenario,omitempty"`
	File        string    `json:"file,omitempty"`
	Description string    `json:"description,omitempty"`
	Label       string    `json:"label,omitempty"` // e.g. "protected" / "unprotected"
	Scale       float64   `json:"scale,omitempty"`
	Speed       float64   `json:"speed,omitempty"` // scenario time / wall time; 0 reads as 1
	Seed        uint64    `json:"seed,omitempty"`
	RunID       string    `json:"run_id,omitempty"`
	Started     time.Time `json:"started"`
	Command     []string  `json:"command,omitempty"`
	Gates       int       `json:"gates,omitempty"`
	Workers     int       `json:"workers,omitempty"`
	T0          float64   `json:"t0,omitempty"`           // wall seconds of "T+0"; 0 if none
	Capacity    float64   `json:"capacity,omitempty"`     // requests/s (scaled); 0 = unknown
	Offered     float64   `json:"offered,omitempty"`      // the scenario's offered: peak offered load / capacity; 0 = not sized so
	OfferedRate float64   `json:"offered_rate,omitempty"` // peak offered requests per wall second (players x scale / think); 0 = not known
	Thresholds  []string  `json:"thresholds,omitempty"`
	Phases      []Phase   `json:"phases,omitempty"`
	// Mix is each kind of request's share of the players' action mix
	// (scenario.Scenario.Mix: "battle" -> 0.5); the mix_served series
	// reads it.
	Mix map[string]float64 `json:"mix,omitempty"`
}

// Event is an operator action (or a fault) at wall second T.
type Event struct {
	T    float64 `json:"t"`
	What string  `json:"what"`
	Kind string  `json:"kind,omitempty"` // EventLine | EventFault; "" for older files and the legacy engines' phases
	End  float64 `json:"end,omitempty"`  // wall seconds when it was over; 0: an instant
}

// The kinds of Event.
const (
	EventLine  = "line"  // a change of the gates' admission line
	EventFault = "fault" // a fault of the timeline (package fault)
)

// Quantiles of a latency distribution, in seconds.
type Quantiles struct {
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
	Count int64   `json:"count"`
}

// Summary is a run's totals.
type Summary struct {
	Elapsed    float64            `json:"elapsed"`  // wall seconds covered by the points
	Counters   map[string]int64   `json:"counters"` // totals of all points
	Latency    Quantiles          `json:"latency"`  // "lat": served, from send
	LatencyDue Quantiles          `json:"latency_due"`
	Wait       Quantiles          `json:"wait"`
	Refused    Quantiles          `json:"refused"` // time to a refusal for load
	Failed     Quantiles          `json:"failed"`  // time to another error reply (DEADLINE_EXCEEDED, INTERNAL, ...)
	Peak       map[string]float64 `json:"peak"`    // max of each level
}

// Criterion is a threshold's outcome on a run.
type Criterion struct {
	Threshold string  `json:"threshold"`
	Passed    bool    `json:"passed"`
	Value     float64 `json:"value"`
	Limit     float64 `json:"limit"`
	Detail    string  `json:"detail,omitempty"`
}

// Run is a whole run file.
type Run struct {
	Meta     Meta
	Events   []Event
	Points   []record.Point // ordered by T
	Summary  Summary
	Criteria []Criterion
	Warnings []string
	Workers  []Worker  // the load processes, when the engine says
	Fairness *Fairness // what one line per gate cost players; nil: not measured
}

// Worker is one load process of a run.
type Worker struct {
	Index   int    `json:"index"`
	Source  string `json:"source,omitempty"` // the source address it dialled from
	Players int    `json:"players"`          // players it played in all
	Peak    int    `json:"peak"`             // most it held at once
	Capped  int64  `json:"capped,omitempty"` // arrivals it could not start: its cap was reached
}

// Fairness is what one admission line per gate costs players. A pair of
// players is inverted when one arrived more than SlackMs before the other
// but was admitted after it; the spread is, for the players who arrived in
// the same second, the longest wait minus the shortest (median and
// largest over the seconds). "Within gates" counts only pairs at the same
// gate: the difference is what the gates' separate lines add.
type Fairness struct {
	Players               int     `json:"players"`
	Admitted              int     `json:"admitted"`
	Gates                 int     `json:"gates"`
	SlackMs               int64   `json:"slack_ms"`
	Inversions            int64   `json:"inversions"`
	InversionsWithinGates int64   `json:"inversions_within_gates"`
	InversionShare        float64 `json:"inversion_share"` // of all admitted pairs
	SpreadP50Ms           int64   `json:"spread_p50_ms"`
	SpreadMaxMs           int64   `json:"spread_max_ms"`
	SpreadWithinGateP50Ms int64   `json:"spread_within_gate_p50_ms"`
	// SurePairs are the pairs of players at one gate whose arrival order
	// is sure (one had its place in line before the other arrived) and
	// whose releases the gate dated (waited_ms); SureInversions those of
	// them the gate surely released in the other order
	// (order_inversions, order_pairs).
	SurePairs      int64 `json:"sure_pairs"`
	SureInversions int64 `json:"sure_inversions"`
}

// speed is Meta.Speed, 1 when unset.
func (r *Run) speed() float64 {
	if r.Meta.Speed > 0 {
		return r.Meta.Speed
	}
	return 1
}

// label names the run in plots and comparisons.
func (r *Run) label(i int) string {
	switch {
	case r.Meta.Label != "":
		return r.Meta.Label
	case r.Meta.Scenario != "":
		return r.Meta.Scenario
	}
	return "run " + string(rune('A'+i%26))
}

func quantiles(h *record.Hist) Quantiles {
	if h.Count() == 0 {
		return Quantiles{}
	}
	return Quantiles{
		P50: h.Quantile(0.5).Seconds(), P90: h.Quantile(0.9).Seconds(), P99: h.Quantile(0.99).Seconds(),
		P999: h.Quantile(0.999).Seconds(), Max: h.Max().Seconds(), Count: h.Count(),
	}
}

// Summarize totals points: counters summed, histograms merged, levels'
// peaks.
func Summarize(points []record.Point) Summary {
	s := Summary{Counters: map[string]int64{}, Peak: map[string]float64{}}
	lat, due, wait, refused, failed := record.NewHist(), record.NewHist(), record.NewHist(), record.NewHist(), record.NewHist()
	for _, p := range points {
		if e := float64(p.T + 1); e > s.Elapsed {
			s.Elapsed = e
		}
		for k, v := range p.Counters {
			s.Counters[k] += v
		}
		for k, v := range p.Levels {
			if old, ok := s.Peak[k]; !ok || v > old {
				s.Peak[k] = v
			}
		}
		lat.Merge(p.Hists[record.HistLat])
		due.Merge(p.Hists[record.HistLatDue])
		wait.Merge(p.Hists["wait"])
		refused.Merge(p.Hists[record.HistLatRefused])
		failed.Merge(p.Hists[record.HistLatFailed])
	}
	s.Latency, s.LatencyDue, s.Wait, s.Refused = quantiles(lat), quantiles(due), quantiles(wait), quantiles(refused)
	s.Failed = quantiles(failed)
	return s
}
