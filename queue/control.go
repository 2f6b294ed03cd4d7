package queue

import "time"

// SetRate sets the paced release rate to n tickets per interval, effective
// at once: credit earned at the old rate up to now is kept (converted), and
// the measured rate starts again. An invalid rate (see Rate.Validate) is
// refused with ErrInvalidRate and changes nothing.
func (q *Queue) SetRate(n int, interval time.Duration, now time.Time) error {
	r := Rate{N: n, Interval: interval}
	if err := r.Validate(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	if q.mode == Paced {
		q.pace.accrue(now)
	} else {
		q.pace.skip(now)
	}
	q.pace.setRate(r)
	q.rate = r
	q.restartMeter(now)
	return nil
}

// SetMode switches the mode, effective at once; see the package doc for
// what each switch does. An invalid mode is refused with ErrInvalidMode.
func (q *Queue) SetMode(m Mode, now time.Time) error {
	if !m.valid() {
		return ErrInvalidMode
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	if m == q.mode {
		return nil
	}
	if q.mode == Paced {
		q.pace.accrue(now) // earned up to the switch; spent if Paced again
	} else {
		q.pace.skip(now)
	}
	q.pace.capOne()
	q.mode = m
	q.restartMeter(now)
	return nil
}

// restartMeter forgets the measured rate, which belonged to the old pace.
func (q *Queue) restartMeter(now time.Time) {
	q.meter.reset()
	if now.After(q.lastRelease) {
		q.lastRelease = now
	}
}

// SetMaxLength sets the longest the line may be (1 to MaxMaxLength, else
// ErrInvalidLength and no change). Lowering it below the current length
// removes nobody; new players are refused until the line is shorter.
func (q *Queue) SetMaxLength(n int) error {
	if err := validMaxLength(n); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.maxLen = n
	return nil
}

// SetRetryAfter sets the retry-after given with ErrClosed (> 0 and at most
// MaxRetryAfter, else ErrInvalidRetryAfter and no change).
func (q *Queue) SetRetryAfter(d time.Duration) error {
	if err := validRetryAfter(d); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.retryAfter = d
	return nil
}

// Mode returns the current mode.
func (q *Queue) Mode() Mode {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mode
}

// Stats is a snapshot of the line.
type Stats struct {
	Mode      Mode
	Rate      Rate // configured
	MaxLength int
	// Length is the tickets in the line (both lanes, away ones included);
	// Priority and Away are the parts of it in the priority lane and away.
	Length, Priority, Away int
	// Held is the tickets released while away, kept for their players.
	Held int
	// Joined = Admitted + Length + Held + Dropped.
	Joined, Admitted, Dropped uint64
	// Refused counts refused Joins by reason.
	RefusedFull, RefusedClosed uint64
	// ConfiguredPerSecond and MeasuredPerSecond are the release rates;
	// Measured is false (and MeasuredPerSecond 0) while the window holds
	// too little (see the package doc).
	ConfiguredPerSecond, MeasuredPerSecond float64
	Measured                               bool
	// OldestWait is how long the ticket that joined first among those in
	// the line has waited.
	OldestWait time.Duration
	// RetryAfter is the retry-after given with ErrClosed.
	RetryAfter time.Duration
}

// Stats returns a snapshot of the line, in O(1).
func (q *Queue) Stats(now time.Time) Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	st := Stats{
		Mode:                q.mode,
		Rate:                q.rate,
		MaxLength:           q.maxLen,
		Length:              q.length(),
		Priority:            q.prio.live,
		Away:                q.away,
		Held:                len(q.held),
		Joined:              q.joined,
		Admitted:            q.admitted,
		Dropped:             q.dropped,
		RefusedFull:         q.refusedFull,
		RefusedClosed:       q.refusedClosed,
		ConfiguredPerSecond: q.rate.PerSecond(),
		RetryAfter:          q.retryAfter,
	}
	st.MeasuredPerSecond, st.Measured = q.meter.rate(now)
	for _, l := range [2]*lane{&q.prio, &q.normal} {
		if s, _, ok := l.front(); ok {
			st.OldestWait = max(st.OldestWait, now.Sub(s.joined))
		}
	}
	if len(q.ret.slots) > 0 {
		st.OldestWait = max(st.OldestWait, now.Sub(q.ret.slots[0].joined))
	}
	return st
}
