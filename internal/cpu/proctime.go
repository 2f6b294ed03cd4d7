package cpu

import (
	"os"
	"time"

	"github.com/shirou/gopsutil/v4/process"
)

// processCPUTime returns a reader of this process's CPU time (user + system,
// all threads) built on gopsutil. On Linux it reads /proc/<pid>/stat, whose
// resolution is one clock tick (usually 10 ms).
func processCPUTime() (func() (time.Duration, error), error) {
	p, err := process.NewProcess(int32(os.Getpid()))
	if err != nil {
		return nil, err
	}
	return func() (time.Duration, error) {
		t, err := p.Times()
		if err != nil {
			return 0, err
		}
		return time.Duration((t.User + t.System) * float64(time.Second)), nil
	}, nil
}
