package loadtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"levee/client"
)

// ErrStopped is returned by Bot.Call when the bot may not send any more.
var ErrStopped = errors.New("loadtest: bot stopped")

// Bot is one simulated player, connected, as a Behaviour sees it.
type Bot struct {
	N      int            // rank in the scenario, 0-based
	ID     string         // player id
	Client *client.Client // its connection
	Rand   *rand.Rand     // its own random source, seeded from the run's seed

	stop    context.Context // ends at the run's deadline or on interrupt
	req     context.Context // parent of requests: ends only on interrupt
	timeout time.Duration
	rec     *recorder
	seq     int
}

// Running reports whether the bot may go on: the run's deadline has not
// passed, the run was not interrupted, the connection is up and the run's
// request budget is not spent.
func (b *Bot) Running() bool {
	if b.stop.Err() != nil || b.rec.exhausted() {
		return false
	}
	select {
	case <-b.Client.Done():
		return false
	default:
		return true
	}
}

// Think pauses for d, cut short when the bot stops; it reports Running().
func (b *Bot) Think(d time.Duration) bool {
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-b.stop.Done():
		case <-b.Client.Done():
		}
		t.Stop()
	}
	return b.Running()
}

// NextID returns an id unique in the run: the player id, prefix and a
// counter (e.g. battle ids).
func (b *Bot) NextID(prefix string) string {
	b.seq++
	return b.ID + "-" + prefix + strconv.Itoa(b.seq)
}

// Call makes one request, op being its name in the report: f gets a context
// bounded by the per-request timeout (not by the run's deadline, so a
// request in flight at the end gets its reply). The outcome and latency are
// recorded. Without sending anything it returns ErrStopped when the bot is
// not Running.
func (b *Bot) Call(op string, f func(ctx context.Context, c *client.Client) error) error {
	if !b.Running() || !b.rec.take() {
		return ErrStopped
	}
	ctx, cancel := context.WithTimeout(b.req, b.timeout)
	if b.rec.rr != nil {
		b.rec.rr.Begin()
	}
	start := time.Now()
	err := f(ctx, b.Client)
	done := time.Now()
	cancel()
	out := Classify(err)
	b.rec.request(op, out, done.Sub(start))
	if b.rec.rr != nil {
		b.rec.rr.End(recSample(op, "", out, time.Time{}, start, done))
	}
	return err
}
