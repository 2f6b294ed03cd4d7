package logic

import "sync"

// retryTokenRatio is what a successful battle attempt gives back to the
// retry throttle (gRPC's retryThrottling tokenRatio).
const retryTokenRatio = 0.1

// retryThrottle is gRPC's retry throttling (gRFC A6) for the battle calls:
// a bucket of max tokens, full at the start; every attempt that fails with
// a retryable code takes one token, every successful attempt gives back
// ratio; a failed call may be retried only while more than max/2 tokens are
// left. So when battle is broadly unhealthy retries stop after a few
// failures (five calls' worth with the default 10 tokens) and resume only
// as successes refill the bucket: with ratio 0.1, ten successes pay for
// one more failed attempt.
type retryThrottle struct {
	mu     sync.Mutex
	max    float64
	ratio  float64
	tokens float64
}

func newRetryThrottle(max, ratio float64) *retryThrottle {
	return &retryThrottle{max: max, ratio: ratio, tokens: max}
}

// failure records a failed attempt and says whether a retry is allowed.
func (t *retryThrottle) failure() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = max(t.tokens-1, 0)
	return t.tokens > t.max/2
}

// success records a successful attempt.
func (t *retryThrottle) success() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = min(t.tokens+t.ratio, t.max)
}

// level is the current number of tokens.
func (t *retryThrottle) level() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tokens
}
