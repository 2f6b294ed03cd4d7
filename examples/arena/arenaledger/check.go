package arenaledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/clock"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Figures are a check's totals, by the names of the run's figures
// (Counters).
type Figures struct {
	Players    int64 // players checked (a start and a profile read back)
	Acked      int64 // acknowledged mutations (after the resends), of every player with mutations
	Lost       int64
	Doubled    int64
	Phantom    int64
	Unresolved int64 // still unknown after the resends, of every player
	Mismatch   int64 // players whose profile does not match for another reason
	Unchecked  int64 // players with mutations not checked: no start, or no profile by the check's end
}

// Counter names of the figures: a run's recorder counters, summed over
// the load processes, and the threshold figures of the same names.
const (
	CounterPlayers    = "ledger_players"
	CounterAcked      = "ledger_acked"
	CounterLost       = "ledger_lost"
	CounterDoubled    = "ledger_doubled"
	CounterPhantom    = "ledger_phantom"
	CounterUnresolved = "ledger_unresolved"
	CounterMismatch   = "ledger_mismatch"
	CounterUnchecked  = "ledger_unchecked"
	// CounterChecks counts the load processes whose check ran: the
	// ledger figures of a run without one are missing, not 0 (a zero
	// counter does not show in a point).
	CounterChecks = "ledger_checks"
)

// Names are the counter names, in the order of Figures' fields.
var Names = []string{CounterPlayers, CounterAcked, CounterLost, CounterDoubled, CounterPhantom,
	CounterUnresolved, CounterMismatch, CounterUnchecked}

// Counters are the figures by their counter names (all of them, zeros
// included: a checked run says 0 lost, not nothing).
func (f Figures) Counters() map[string]int64 {
	return map[string]int64{
		CounterPlayers: f.Players, CounterAcked: f.Acked, CounterLost: f.Lost, CounterDoubled: f.Doubled,
		CounterPhantom: f.Phantom, CounterUnresolved: f.Unresolved, CounterMismatch: f.Mismatch, CounterUnchecked: f.Unchecked,
	}
}

func (f *Figures) add(r Result, checked bool) {
	f.Acked += int64(r.Acked)
	f.Unresolved += int64(r.Unresolved)
	if !checked {
		f.Unchecked++
		return
	}
	f.Players++
	f.Lost += int64(r.Lost)
	f.Doubled += int64(r.Doubled)
	f.Phantom += int64(r.Phantom)
	if r.Mismatch {
		f.Mismatch++
	}
}

// Conn is what the check needs of a player's connection (*client.Client).
type Conn interface {
	Resend(ctx context.Context, f *leveev2.ClientFrame) (*leveev2.ServerFrame, error)
	Send(ctx context.Context, action string, request []byte) (*leveev2.ServerFrame, error)
	Close() error
}

// CheckConfig is how Check reaches the players.
type CheckConfig struct {
	// Dial connects as player (e.g. client.DialRetry with its token).
	Dial func(ctx context.Context, player string) (Conn, error)
	// Timeout bounds the whole check (default 30 s): what is unresolved
	// then stays so, and a player without a profile by then is unchecked.
	Timeout time.Duration
	// Call bounds one resend or profile read (default 5 s).
	Call time.Duration
	// Pause is the wait before trying a player's unresolved mutations or
	// profile again after a refusal for load (default 200 ms).
	Pause time.Duration
	// Parallel is how many players are checked at once (default 16).
	Parallel int
	Clock    clock.Clock
	// Report, when set, gets every player's result (for a log).
	Report func(player string, r Result)
}

// Check settles and checks every player with mutations (see the package
// doc) and returns the totals.
func (l *Ledger) Check(ctx context.Context, cfg CheckConfig) Figures {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Call <= 0 {
		cfg.Call = 5 * time.Second
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 200 * time.Millisecond
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 16
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	ids := l.Players()
	work := make(chan string)
	var mu sync.Mutex
	type got struct {
		p       *Profile
		checked bool
	}
	profiles := map[string]got{}
	var wg sync.WaitGroup
	for range min(cfg.Parallel, max(len(ids), 1)) {
		wg.Go(func() {
			for id := range work {
				p := l.settle(ctx, cfg, id)
				mu.Lock()
				profiles[id] = got{p, p != nil}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	// Values after every resend: a reply a resend got prices too.
	v := l.Values()
	var f Figures
	for _, id := range ids {
		pl := l.Player(id)
		g := profiles[id]
		checked := g.checked && pl.Start != nil
		var r Result
		if checked {
			r = Compare(pl, g.p, v)
		} else {
			r = Compare(pl, pl.Start, v) // for the counts only
		}
		f.add(r, checked)
		if cfg.Report != nil {
			cfg.Report(id, r)
		}
	}
	return f
}

// settle connects as player, resends its unresolved mutations until none
// is left or ctx ends, and reads its profile (nil when it could not).
func (l *Ledger) settle(ctx context.Context, cfg CheckConfig, player string) *Profile {
	var c Conn
	defer func() {
		if c != nil {
			_ = c.Close()
		}
	}()
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = cfg.Dial(ctx, player); err != nil {
				c = nil
				if !pause(ctx, cfg) {
					return nil
				}
				continue
			}
		}
		again := false
		for _, f := range l.Pending(player) {
			cctx, cancel := context.WithTimeout(ctx, cfg.Call)
			out, err := c.Resend(cctx, f)
			cancel()
			if l.Resolve(player, f.GetRequestId(), out, err) == Unresolved {
				again = true
				if errors.Is(err, client.ErrClosed) {
					break
				}
			}
		}
		var p *Profile
		if !again {
			cctx, cancel := context.WithTimeout(ctx, cfg.Call)
			var err error
			p, err = readProfile(cctx, c)
			cancel()
			if err == nil {
				return p
			}
			again = true
			if errors.Is(err, client.ErrClosed) {
				_ = c.Close()
				c = nil
			}
		} else if cc, ok := c.(interface{ Err() error }); ok && cc.Err() != nil {
			_ = c.Close()
			c = nil
		}
		if again && !pause(ctx, cfg) {
			return nil
		}
	}
	return nil
}

// pause waits cfg.Pause on cfg.Clock; false when ctx ended first.
func pause(ctx context.Context, cfg CheckConfig) bool {
	return clock.Sleep(ctx, cfg.Clock, cfg.Pause) == nil
}

// readProfile reads the player's own profile (get_profile) and the
// version of its state the reply says.
func readProfile(ctx context.Context, c Conn) (*Profile, error) {
	f, err := c.Send(ctx, arena.ActionGetProfile, nil)
	if err != nil {
		return nil, err
	}
	r := &arenapb.ProfileReply{}
	if err := proto.Unmarshal(f.GetReply(), r); err != nil {
		return nil, fmt.Errorf("arenaledger: decode the profile: %w", err)
	}
	return &Profile{Player: r.GetPlayer(), Version: f.GetVersion()}, nil
}
