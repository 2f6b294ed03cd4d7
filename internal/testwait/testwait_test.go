package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message instead of
// stopping the goroutine.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

// The condition is polled until it holds (here on its third check), and
// the wait ends there without a failure.
func TestUntilPollsUntilTheConditionHolds(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	Until(r, "the third check", func() bool { calls++; return calls == 3 })
	if r.msg != "" || calls != 3 {
		t.Fatalf("failed %q after %d checks", r.msg, calls)
	}
}

func TestUntilWithinFailsNamingWhatItWaitedFor(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	calls := 0
	UntilWithin(r, 20*time.Millisecond, "the moon", func() bool { calls++; return false })
	if !strings.Contains(r.msg, "timed out after 20ms waiting for the moon") {
		t.Fatalf("failure message %q", r.msg)
	}
	if time.Since(start) < 20*time.Millisecond || calls < 2 {
		t.Fatalf("gave up after %v and %d checks", time.Since(start), calls)
	}
}
