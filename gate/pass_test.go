package gate

import (
	"testing"
	"time"
)

// The passes a return window took are forgotten at their expiry (in expiry
// order, whatever the order they came in) and all at once when the window
// ends.
func TestTakenPassesEvictByExpiry(t *testing.T) {
	var tp takenPasses
	a, b, c := passKey{1, 1}, passKey{1, 2}, passKey{2, 1}
	tp.add(a, t0.Add(3*time.Second))
	tp.add(b, t0.Add(time.Second))
	tp.add(c, t0.Add(2*time.Second))
	tp.evict(t0)
	if tp.len() != 3 || !tp.has(a) || !tp.has(b) || !tp.has(c) || tp.has(passKey{2, 2}) {
		t.Fatalf("before any expiry: %+v", tp.by)
	}
	tp.evict(t0.Add(2 * time.Second)) // b and c expire (an expiry is exclusive, as verifyTicket's)
	if tp.len() != 1 || !tp.has(a) || tp.has(b) || tp.has(c) || len(tp.h) != 1 {
		t.Fatalf("after b's and c's expiry: %+v %v", tp.by, tp.h)
	}
	tp.add(b, t0.Add(time.Hour))
	tp.prune(t0.Add(time.Minute), t0.Add(2*time.Minute)) // the window is still open
	if tp.len() != 2 {
		t.Fatalf("pruned inside the window: %+v", tp.by)
	}
	tp.prune(t0.Add(2*time.Minute), t0.Add(2*time.Minute))
	if tp.len() != 0 || tp.has(a) || len(tp.h) != 0 {
		t.Fatalf("after the window: %+v %v", tp.by, tp.h)
	}
}
