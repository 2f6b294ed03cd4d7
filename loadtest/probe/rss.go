package probe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Levels of a process probed by its pid (ReadRSS), for the memory
// benchmark: its resident memory each second, and once before the first
// player arrived (in the run's first point).
const (
	ServerRSS       = "server_rss_mb"        // MiB, each second
	ServerRSSBefore = "server_rss_before_mb" // MiB, read before the first player
)

// ErrNoRSS is wrapped when a process's status has no resident memory line
// (a kernel thread, or a process gone to zombie).
var ErrNoRSS = errors.New("probe: no VmRSS")

// ReadRSS is process pid's resident memory in bytes: VmRSS of
// /proc/PID/status (Linux). It reads any process of the machine, so that
// the server measured need not export /metrics (cmd/barews, a game's own).
func ReadRSS(pid int) (float64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("probe: pid must be > 0, got %d", pid)
	}
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("probe: %w", err)
	}
	return parseRSS(path, b)
}

// parseRSS reads the VmRSS line of a /proc/PID/status page.
func parseRSS(path string, page []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("probe: %s: odd VmRSS line %q", path, line)
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("probe: %s: VmRSS: %w", path, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("%w in %s", ErrNoRSS, path)
}
