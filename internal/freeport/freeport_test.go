package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestParseRange(t *testing.T) {
	lo, hi, err := ParseRange("32768\t60999\n")
	if err != nil || lo != 32768 || hi != 60999 {
		t.Fatalf("ParseRange: %d %d %v", lo, hi, err)
	}
	for _, bad := range []string{"", "1", "a b", "60999 32768", "0 10", "1 70000"} {
		if _, _, err := ParseRange(bad); err == nil {
			t.Errorf("ParseRange(%q): no error", bad)
		}
	}
}

func TestStretch(t *testing.T) {
	for _, tc := range []struct{ lo, hi, first, n int }{
		{32768, 60999, 10000, 22768}, // Linux's default: below is larger
		{1024, 40000, 40001, 25535},  // a low range: above
		{5000, 65535, 65536, 0},      // nothing left
	} {
		first, n := Stretch(tc.lo, tc.hi)
		if first != tc.first || n != tc.n {
			t.Errorf("Stretch(%d, %d) = %d, %d; want %d, %d", tc.lo, tc.hi, first, n, tc.first, tc.n)
		}
	}
}

// Every port Pick gives is outside the machine's ephemeral range, bindable,
// and not given twice.
func TestPickOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := EphemeralRange()
	seen := map[string]bool{}
	for range 50 {
		addr := Addr(t)
		if seen[addr] {
			t.Fatalf("%s given twice", addr)
		}
		seen[addr] = true
		_, ps, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(ps)
		if p >= lo && p <= hi {
			t.Fatalf("%s is inside the ephemeral range %d-%d", addr, lo, hi)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		l.Close()
	}
}
