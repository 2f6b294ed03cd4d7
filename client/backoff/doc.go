// Package backoff decides when the client SDK may retry and how long it
// waits first. It is a leaf package (standard library only) and every
// time-dependent call takes the time, so tests never sleep.
//
// Three pieces, composed by the caller:
//
//   - Policy is the per-request schedule from seed 004: before retry number
//     n (0-based: n = 0 is the first retry, i.e. the second attempt) wait a
//     full-jitter delay, uniform in [0, min(Base·2^n, Cap)), added on top of
//     the server's retry_after so that a retry never comes sooner than the
//     server asked. At most MaxAttempts attempts per request, the first one
//     included (gRPC's maxAttempts meaning).
//   - Budget is the client-wide retry budget from the Google SRE book
//     ("Handling Overload"): over a sliding window, retries may be at most
//     Ratio (10 %) of the requests, plus a small per-second allowance so
//     that a quiet client can still retry at all (Finagle's RetryBudget).
//   - Reconnect spreads reconnects after a close: the first one after a
//     random delay in [0, Spread) (5 s), later ones with the Policy's
//     exponential full-jitter schedule.
//
// A retry loop looks like this:
//
//	budget.OnRequest(clk.Now())
//	for attempts := 1; ; attempts++ {
//		err := send()
//		if err == nil || !retryable(err) || !policy.CanRetry(attempts) || !budget.TryRetry(clk.Now()) {
//			return err
//		}
//		wait(policy.Delay(attempts-1, retryAfter(err), nil))
//	}
package backoff
