package queue

import "time"

// meter measures the release rate over a sliding window of buckets: how
// many tickets were released and for how long the line was busy (releasing
// and not empty).
type meter struct {
	width   time.Duration // of one bucket
	buckets [windowBuckets]bucket
}

type bucket struct {
	slot     int64 // time / width; identifies the bucket's time span
	released int64
	busy     time.Duration
}

func newMeter(window time.Duration) meter {
	return meter{width: window / windowBuckets}
}

func (m *meter) slotOf(now time.Time) int64 { return now.UnixNano() / int64(m.width) }

// record adds released tickets and busy time at now.
func (m *meter) record(now time.Time, released int, busy time.Duration) {
	if released == 0 && busy <= 0 {
		return
	}
	s := m.slotOf(now)
	b := &m.buckets[uint64(s)%windowBuckets]
	if b.slot != s {
		*b = bucket{slot: s}
	}
	b.released += int64(released)
	b.busy += max(busy, 0)
}

// rate returns the measured tickets per second, and false while the window
// holds too little to tell.
func (m *meter) rate(now time.Time) (float64, bool) {
	s := m.slotOf(now)
	var n int64
	var busy time.Duration
	for i := range m.buckets {
		b := &m.buckets[i]
		if b.slot > s-windowBuckets && b.slot <= s {
			n += b.released
			busy += b.busy
		}
	}
	if busy < minMeasuredBusy || n < minMeasuredN {
		return 0, false
	}
	return float64(n) / busy.Seconds(), true
}

// reset forgets everything.
func (m *meter) reset() { m.buckets = [windowBuckets]bucket{} }
