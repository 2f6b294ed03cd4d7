package scenario

import (
	"errors"
	"testing"
	"time"
)

const poolFile = `pool:
  phases:
    - {name: baseline, duration: 10s, offered: 0.8}
    - {name: overload, duration: 20s, rate: 500}
players:
  actions: [{do: battle, weight: 1}]
`

// A pool file gets its defaults, and its run lasts its phases.
func TestPoolDefaults(t *testing.T) {
	s, err := Parse("dir/o.yaml", []byte(poolFile), nil, files(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Pool
	if p.Conns != DefaultPoolConns || time.Duration(p.ReplyGrace) != DefaultReplyGrace || len(p.Phases) != 2 {
		t.Fatalf("pool %+v", p)
	}
	if time.Duration(s.Run.Duration) != 30*time.Second || s.WallCurve().Peak() != 0 {
		t.Errorf("run %+v", s.Run)
	}
	if got := p.Phases[0].PoolRate(100); got != 80 {
		t.Errorf("offered 0.8 at capacity 100: %v/s", got)
	}
	if got := p.Phases[1].PoolRate(100); got != 500 {
		t.Errorf("rate 500: %v/s", got)
	}
}

// Bad pools are refused naming the field.
func TestPoolErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		sets     []string
		want     string
	}{
		{"with arrivals", poolFile + "arrivals: {phases: [{duration: 1m, players: 10}]}\n", nil,
			"dir/o.yaml:7: arrivals: not with pool (a fixed pool of connections that send the mix open loop, never retrying nor pacing)"},
		{"with think", poolFile + "  think: 1s\n", nil, "dir/o.yaml:7: players.think: not with pool (a fixed pool of connections that send the mix open loop, never retrying nor pacing)"},
		{"no phases", "pool: {conns: 5}\nplayers:\n  actions: [{do: battle, weight: 1}]\n", nil,
			"dir/o.yaml:1: pool.phases: required: at least one phase (name, duration and rate, offered or concurrency)"},
		{"two loads", poolFile, []string{"pool.phases[1].concurrency=4"}, "dir/o.yaml: --set pool.phases[1].concurrency: rate and concurrency both given; a phase has one load"},
		{"same name", poolFile, []string{"pool.phases[1].name=baseline"}, `dir/o.yaml: --set pool.phases[1].name: "baseline" names two phases`},
		{"engine's name", poolFile, []string{"pool.phases[0].name=drain"}, `dir/o.yaml: --set pool.phases[0].name: "drain" is the engine's own phase name`},
		{"rate bound", poolFile, []string{"pool.phases[1].rate=30000"}, "dir/o.yaml: --set pool.phases[1].rate: must be in (0, 20000] (pool.max_rate), got 30000"},
		{"conns", poolFile, []string{"pool.conns=0"}, "dir/o.yaml: --set pool.conns: must be in 1..10000, got 0"},
		{"run.duration", poolFile + "run: {duration: 1m}\n", nil, "dir/o.yaml:7: run.duration: not with pool: the run lasts its phases"},
	} {
		_, err := Parse("dir/o.yaml", []byte(tc.in), tc.sets, files(nil))
		var e *Error
		switch {
		case err == nil:
			t.Errorf("%s: no error, want %s", tc.name, tc.want)
		case !errors.As(err, &e):
			t.Errorf("%s: %T %v is not an *Error", tc.name, err, err)
		case err.Error() != tc.want:
			t.Errorf("%s:\n got %s\nwant %s", tc.name, err, tc.want)
		}
	}
}
