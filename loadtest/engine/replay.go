package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/token"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The replay check (scenario replay_check: N) needs no game knowledge:
// Levee answers a resent request id of a mutation with its stored first
// outcome, marked replayed, and applies nothing again. After the run (and
// the game's own check, which reads the players' state first) each load
// process resends up to N of the mutations it saw acknowledged, each with
// its own frame (request id, issued_at_ms, request), and counts how each
// was answered.

// Counters of the replay check.
const (
	CounterReplayChecked   = "replay_checked"   // resends answered with a reply marked replayed
	CounterReplayFresh     = "replay_fresh"     // answered with a reply NOT marked replayed: applied again
	CounterReplayFailed    = "replay_failed"    // answered with a final error (e.g. REQUEST_EXPIRED)
	CounterReplayUnchecked = "replay_unchecked" // not answered by the check's end (or never sent)
	// CounterReplayChecks counts the load processes whose replay check
	// ran: without one the figures are missing, not 0.
	CounterReplayChecks = "replay_checks"
)

// replayCheckTime bounds the replay check.
const replayCheckTime = 30 * time.Second

// replayPause is the wait before a player's next try after a refusal for
// load or a lost connection.
const replayPause = 200 * time.Millisecond

// replayLog keeps up to max acknowledged mutations' frames, in the order
// they were acknowledged.
type replayLog struct {
	mu    sync.Mutex
	max   int
	order []string // players, first seen
	by    map[string][]*leveev2.ClientFrame
	n     int
}

func newReplayLog(max int) *replayLog {
	return &replayLog{max: max, by: map[string][]*leveev2.ClientFrame{}}
}

// add keeps f, acknowledged for player, while there is room.
func (l *replayLog) add(player string, f *leveev2.ClientFrame) {
	if f.GetRequestId() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= l.max {
		return
	}
	if _, ok := l.by[player]; !ok {
		l.order = append(l.order, player)
	}
	l.by[player] = append(l.by[player], f)
	l.n++
}

// replayFigures are the replay check's counts.
type replayFigures struct{ checked, fresh, failed, unchecked int64 }

// checkReplays resends the logged frames, player by player (a few at
// once), and adds the figures to the recorder.
func (d *driver) checkReplays(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, replayCheckTime)
	defer cancel()
	l := d.replays
	l.mu.Lock()
	players := append([]string(nil), l.order...)
	l.mu.Unlock()
	var mu sync.Mutex
	var total replayFigures
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(16, max(len(players), 1)) {
		wg.Go(func() {
			for id := range work {
				f := d.replayPlayer(ctx, id, l.by[id])
				mu.Lock()
				total.checked += f.checked
				total.fresh += f.fresh
				total.failed += f.failed
				total.unchecked += f.unchecked
				mu.Unlock()
			}
		})
	}
	for _, id := range players {
		work <- id
	}
	close(work)
	wg.Wait()
	d.rec.Add(CounterReplayChecked, total.checked)
	d.rec.Add(CounterReplayFresh, total.fresh)
	d.rec.Add(CounterReplayFailed, total.failed)
	d.rec.Add(CounterReplayUnchecked, total.unchecked)
	d.rec.Add(CounterReplayChecks, 1)
}

// replayPlayer connects as player and resends its frames until each has a
// final answer or ctx ends.
func (d *driver) replayPlayer(ctx context.Context, player string, frames []*leveev2.ClientFrame) replayFigures {
	var f replayFigures
	var c *client.Client
	defer func() {
		if c != nil {
			_ = c.Close()
		}
	}()
	left := frames
	for len(left) > 0 && ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = d.checkDial(ctx, player); err != nil {
				c = nil
				// A token that cannot be signed never will be; a failed
				// dial is tried again.
				if errors.Is(err, token.ErrPlayerID) || errors.Is(err, token.ErrMalformed) || clock.Sleep(ctx, d.cfg.clock, replayPause) != nil {
					break
				}
				continue
			}
		}
		fr := left[0]
		cctx, cancel := context.WithTimeout(ctx, d.p.timeout)
		out, err := c.Resend(cctx, fr)
		cancel()
		var e *client.Error
		switch {
		case err == nil && out.GetReplayed():
			f.checked++
		case err == nil:
			f.fresh++
			d.cfg.log.Warn("replay check: a resent mutation was applied again", "player", player,
				"action", fr.GetAction(), "request_id", fr.GetRequestId())
		case errors.As(err, &e) && !e.Retryable() && client.Unresolved(err) == nil:
			f.failed++
			d.cfg.log.Warn("replay check: a resent mutation was refused", "player", player,
				"action", fr.GetAction(), "request_id", fr.GetRequestId(), "err", err)
		default:
			// Not answered for sure (a refusal for load, a lost
			// connection, a timeout): try it again.
			if c.Err() != nil {
				_ = c.Close()
				c = nil
			}
			if clock.Sleep(ctx, d.cfg.clock, replayPause) != nil {
				f.unchecked += int64(len(left))
				return f
			}
			continue
		}
		left = left[1:]
	}
	f.unchecked += int64(len(left))
	return f
}
