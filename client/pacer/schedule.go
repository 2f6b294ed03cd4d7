package pacer

import "time"

// schedule is the pure pacing decision: when the next release slot opens.
// It has no lock and reads no clock; Pacer guards it with its mutex.
type schedule struct {
	interval time.Duration // 1 / drip rate
	last     time.Time     // the slot credited to the latest release
	primed   bool          // a release has happened
}

// wait is how long from now until the next release slot opens; zero or
// less means a request may go now.
func (s *schedule) wait(now time.Time) time.Duration {
	if !s.primed {
		return 0
	}
	return s.last.Add(s.interval).Sub(now)
}

// take credits a release at now, which must be at or after the open slot.
// A release less than one interval late keeps the cadence (it is credited
// to its slot, so timer latency does not slow the drip); a later one, after
// a quiet spell, restarts the cadence at now (so there is no burst).
func (s *schedule) take(now time.Time) {
	slot := s.last.Add(s.interval)
	if s.primed && now.Sub(slot) < s.interval {
		s.last = slot
	} else {
		s.last = now
	}
	s.primed = true
}

// reserve takes the slot and returns 0 if one is open at now, or returns
// how long until the next one opens without taking anything.
func (s *schedule) reserve(now time.Time) time.Duration {
	if d := s.wait(now); d > 0 {
		return d
	}
	s.take(now)
	return 0
}
