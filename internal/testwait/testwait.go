// Package testwait is the one wait-with-deadline helper of Levee's tests:
// Until polls a condition until it holds and fails the test, naming what
// it waited for, when the deadline passes first. Tests use it to wait for
// something another goroutine does (a timer armed on a fake clock, a
// counter reaching a value), never a sleep.
package testwait

import (
	"testing"
	"time"
)

// Timeout is Until's deadline: long enough for a loaded machine with the
// race detector, short enough that a hung test says so before go test's
// own timeout.
const Timeout = 10 * time.Second

// Poll is how often the condition is checked.
const Poll = time.Millisecond

// Until polls cond every Poll until it returns true, and fails t (Fatalf,
// so the test stops) if it has not within Timeout. what names the awaited
// condition in the failure message ("timed out after 10s waiting for
// what"). cond runs on the caller's goroutine.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	UntilWithin(t, Timeout, what, cond)
}

// UntilWithin is Until with the deadline d.
func UntilWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if cond() {
		return
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(Poll)
	defer poll.Stop()
	for {
		select {
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("testwait: timed out after %v waiting for %s", d, what)
			return // a TB whose Fatalf returns (a test double) still ends the wait
		case <-poll.C:
			if cond() {
				return
			}
		}
	}
}
