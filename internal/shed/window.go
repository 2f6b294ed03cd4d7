package shed

import "time"

// bucket holds the completions recorded during one bucket of time.
type bucket struct {
	count  int64         // requests completed (Ticket.Done)
	minRTT time.Duration // smallest latency among them; valid if count > 0
}

// window is a ring of time buckets: the current one, still filling, and the
// last len(ring)-1 completed ones. Buckets are numbered from an epoch (the
// first time seen); a bucket is cleared when the ring comes round to it
// again, so data older than the window is forgotten even after a long idle
// gap. window is not safe for concurrent use; the Shedder guards it.
type window struct {
	bucket  time.Duration
	ring    []bucket
	started bool
	epoch   time.Time
	cur     int64 // number of the current bucket
}

func newWindow(size time.Duration, buckets int) window {
	return window{bucket: size / time.Duration(buckets), ring: make([]bucket, buckets+1)}
}

// offset returns now as a duration since the epoch, setting the epoch on
// first use. Times earlier than the epoch give a negative offset.
func (w *window) offset(now time.Time) time.Duration {
	if !w.started {
		w.started, w.epoch = true, now
	}
	return now.Sub(w.epoch)
}

// advance moves the current bucket to the one holding off, clearing the
// buckets it passes, and reports whether the current bucket changed. An off
// that falls before the current bucket (callers race to the lock with times
// read a little earlier) counts as the current bucket.
func (w *window) advance(off time.Duration) bool {
	idx := int64(off / w.bucket)
	if off < 0 || idx <= w.cur {
		return false
	}
	n := int64(len(w.ring))
	steps := min(idx-w.cur, n)
	for i := int64(1); i <= steps; i++ {
		w.ring[(w.cur+i)%n] = bucket{}
	}
	w.cur = idx
	return true
}

// add records one completion with latency rtt in the current bucket.
func (w *window) add(rtt time.Duration) {
	b := &w.ring[w.cur%int64(len(w.ring))]
	if b.count == 0 || rtt < b.minRTT {
		b.minRTT = rtt
	}
	b.count++
}

// stats returns, over the completed buckets only (the current one is still
// filling and would understate the pass rate), the largest completion count
// in a bucket and the smallest latency; ok is false when none of them holds a
// completion.
func (w *window) stats() (maxPass int64, minRTT time.Duration, ok bool) {
	n := int64(len(w.ring))
	curSlot := w.cur % n
	for i := range n {
		b := w.ring[i]
		if i == curSlot || b.count == 0 {
			continue
		}
		if !ok || b.minRTT < minRTT {
			minRTT = b.minRTT
		}
		ok = true
		maxPass = max(maxPass, b.count)
	}
	return maxPass, minRTT, ok
}
