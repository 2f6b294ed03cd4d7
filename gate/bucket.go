package gate

import "time"

// tokenBucket is a connection's request rate limit: it holds at most burst
// tokens and earns one every per (1/rate). Tokens are kept as time credit,
// one token being worth per, so the arithmetic is exact in integer
// nanoseconds. As with golang.org/x/time/rate's AllowN, the time is passed
// in, so tests drive it with any clock and nothing here sleeps or allocates.
//
// It is not safe for concurrent use: a connection's reader is its only user.
type tokenBucket struct {
	per    time.Duration // time to earn one token
	max    time.Duration // credit of a full bucket: burst × per
	credit time.Duration // tokens × per, as of last
	last   time.Time
}

// maxTokenPeriod bounds per, so burst × per cannot overflow.
const maxTokenPeriod = time.Hour

// newTokenBucket returns a full bucket as of now. rate must be > 0 and
// burst >= 1 (Config.Validate sees to it).
func newTokenBucket(rate float64, burst int, now time.Time) tokenBucket {
	per := maxTokenPeriod
	if p := float64(time.Second) / rate; p < float64(maxTokenPeriod) {
		per = max(time.Duration(p), 1)
	}
	full := per * time.Duration(burst)
	return tokenBucket{per: per, max: full, credit: full, last: now}
}

// refill adds the credit earned since the last call. Time that runs
// backwards earns nothing and does not move last back, so no interval is
// ever paid twice.
func (b *tokenBucket) refill(now time.Time) {
	d := now.Sub(b.last)
	if d <= 0 {
		return
	}
	b.last = now
	if d >= b.max-b.credit {
		b.credit = b.max
		return
	}
	b.credit += d
}

// allow takes one token at now and reports true, or, when there is less
// than one, takes nothing and returns how long until there is one.
func (b *tokenBucket) allow(now time.Time) (wait time.Duration, ok bool) {
	b.refill(now)
	if b.credit >= b.per {
		b.credit -= b.per
		return 0, true
	}
	return b.per - b.credit, false
}

// tokens is how many tokens the bucket holds at now (fractional).
func (b *tokenBucket) tokens(now time.Time) float64 {
	c := *b
	c.refill(now)
	return float64(c.credit) / float64(c.per)
}
