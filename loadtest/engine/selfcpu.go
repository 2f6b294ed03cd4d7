package engine

import (
	"os"
	"time"

	"github.com/shirou/gopsutil/v4/process"
)

// selfCPU measures this load process's CPU, in cores, between readings, so
// that the report shows what the load tool took of a machine it shares
// with the cluster ("cpu_loadtest", summed over the load processes).
type selfCPU struct {
	p    *process.Process
	at   time.Time
	secs float64
}

func newSelfCPU() *selfCPU {
	p, err := process.NewProcess(int32(os.Getpid()))
	if err != nil {
		return &selfCPU{}
	}
	return &selfCPU{p: p}
}

// rate returns the cores used since the previous call; false on the first
// call or when the process's times cannot be read.
func (s *selfCPU) rate(now time.Time) (float64, bool) {
	if s.p == nil {
		return 0, false
	}
	t, err := s.p.Times()
	if err != nil {
		return 0, false
	}
	secs := t.User + t.System
	prevAt, prev := s.at, s.secs
	s.at, s.secs = now, secs
	if prevAt.IsZero() || !now.After(prevAt) || secs < prev {
		return 0, false
	}
	return (secs - prev) / now.Sub(prevAt).Seconds(), true
}
