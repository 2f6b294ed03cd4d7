package probe

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseRSS(t *testing.T) {
	page := "Name:\tgate\nVmPeak:\t  900 kB\nVmRSS:\t   12345 kB\nThreads:\t8\n"
	v, err := parseRSS("/proc/1/status", []byte(page))
	if err != nil || v != 12345*1024 {
		t.Fatalf("parseRSS = %v, %v; want %d", v, err, 12345*1024)
	}
	if _, err := parseRSS("/proc/2/status", []byte("Name:\tkthreadd\n")); !errors.Is(err, ErrNoRSS) {
		t.Fatalf("no VmRSS line: err %v, want ErrNoRSS", err)
	}
	if _, err := parseRSS("/proc/3/status", []byte("VmRSS:\t12 MB\n")); err == nil || !strings.Contains(err.Error(), "odd VmRSS") {
		t.Fatalf("odd unit: err %v", err)
	}
}

func TestReadRSSSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	v, err := ReadRSS(os.Getpid())
	if err != nil || v < 1<<20 {
		t.Fatalf("ReadRSS(self) = %v, %v; want at least 1 MiB", v, err)
	}
	if _, err := ReadRSS(0); err == nil {
		t.Fatal("ReadRSS(0): no error")
	}
}
