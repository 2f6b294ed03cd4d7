//go:build !unix

package gate

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
