package engine

import (
	"github.com/leveehq/levee/loadtest/probe"
)

// addLevels adds figures to second sec's probe levels.
func (r *run) addLevels(sec int, lv map[string]float64) {
	if len(lv) == 0 {
		return
	}
	m := r.levels[sec]
	if m == nil {
		m = map[string]float64{}
		r.levels[sec] = m
	}
	for k, v := range lv {
		m[k] = v
	}
}

// sampleRSS reads the resident memory of Config.PID into second sec's
// levels (none without a PID); a failed read is a warning, once.
func (r *run) sampleRSS(sec int) {
	if r.cfg.PID <= 0 {
		return
	}
	rss, err := probe.ReadRSS(r.cfg.PID)
	if err != nil {
		if !r.rssFailed {
			r.rssFailed = true
			r.out.Warnings = append(r.out.Warnings, "reading the server's memory: "+err.Error())
		}
		return
	}
	r.addLevels(sec, map[string]float64{probe.ServerRSS: rss / (1 << 20)})
}
