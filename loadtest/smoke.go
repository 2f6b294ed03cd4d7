package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"levee/client"
)

// SmokeConfig is the smoke scenario's knobs (the flags of cmd/loadtest).
type SmokeConfig struct {
	Bots        int
	Ramp        time.Duration
	Duration    time.Duration
	Think       time.Duration // mean pause between a bot's actions
	ThinkJitter float64       // the pause is uniform in Think*(1±ThinkJitter)
	Items       []string      // items the bots buy
	// OverspendFraction of purchases ask for 100 of an item, more than a
	// player can usually afford, to exercise INSUFFICIENT_GOLD.
	OverspendFraction float64
	// MaxRequests bounds the run's requests; 0 derives it from the others.
	MaxRequests int
}

// DefaultSmoke is 300 bots over a 5 s ramp for 20 s, ~500 ms apart: about
// 600 requests per second once all have arrived.
func DefaultSmoke() SmokeConfig {
	return SmokeConfig{
		Bots:              300,
		Ramp:              5 * time.Second,
		Duration:          20 * time.Second,
		Think:             500 * time.Millisecond,
		ThinkJitter:       0.5,
		Items:             []string{"potion", "sword", "shield"},
		OverspendFraction: 0.1,
	}
}

// Validate checks the knobs; errors name the flag.
func (c SmokeConfig) Validate() error {
	switch {
	case c.Bots < 1 || c.Bots > MaxBots:
		return fmt.Errorf("-bots: must be in 1..%d, got %d", MaxBots, c.Bots)
	case c.Duration <= 0:
		return fmt.Errorf("-duration: must be > 0, got %v", c.Duration)
	case c.Ramp < 0 || c.Ramp > c.Duration:
		return fmt.Errorf("-ramp: must be in 0..-duration (%v), got %v", c.Duration, c.Ramp)
	case c.Think < time.Millisecond:
		return fmt.Errorf("-think: must be >= 1ms, got %v", c.Think)
	case c.ThinkJitter < 0 || c.ThinkJitter >= 1:
		return fmt.Errorf("-think-jitter: must be in [0, 1), got %v", c.ThinkJitter)
	case len(c.Items) == 0:
		return fmt.Errorf("-items: need at least one item")
	case c.OverspendFraction < 0 || c.OverspendFraction > 1:
		return fmt.Errorf("-overspend-fraction: must be in [0, 1], got %v", c.OverspendFraction)
	case c.MaxRequests < 0 || c.MaxRequests > MaxRequests:
		return fmt.Errorf("-max-requests: must be in 0..%d, got %d", MaxRequests, c.MaxRequests)
	}
	for _, it := range c.Items {
		if it == "" || strings.TrimSpace(it) != it {
			return fmt.Errorf("-items: bad item id %q", it)
		}
	}
	if c.MaxRequests == 0 && c.derivedMax() > MaxRequests {
		return fmt.Errorf("-think: %v is too short for %d bots over %v (more than %d requests); raise it or set -max-requests",
			c.Think, c.Bots, c.Duration, MaxRequests)
	}
	return nil
}

// derivedMax bounds the requests a run can make: a bot pauses at least
// Think*(1-ThinkJitter) between requests.
func (c SmokeConfig) derivedMax() int {
	minThink := time.Duration(float64(c.Think) * (1 - c.ThinkJitter))
	if minThink < time.Millisecond {
		minThink = time.Millisecond
	}
	return c.Bots * (int(c.Duration/minThink) + 2)
}

// Scenario builds the smoke scenario. Call Validate first.
func (c SmokeConfig) Scenario() Scenario {
	limit := c.MaxRequests
	if limit == 0 {
		limit = c.derivedMax()
	}
	return Scenario{
		Name:        "smoke",
		Bots:        c.Bots,
		Arrivals:    LinearRamp(c.Ramp),
		Duration:    c.Duration,
		MaxRequests: limit,
		Behaviour: Smoke{
			Think: c.Think, ThinkJitter: c.ThinkJitter,
			Items: c.Items, OverspendFraction: c.OverspendFraction,
		},
	}
}

// Operation names used in reports.
const (
	OpGetProfile  = "get_profile"
	OpBuyItem     = "buy_item"
	OpStartBattle = "start_battle"
)

// Smoke is a casual player: look at the profile, buy something, fight a
// small battle, with a think time between actions; repeat.
type Smoke struct {
	Think             time.Duration
	ThinkJitter       float64
	Items             []string
	OverspendFraction float64
}

var _ Behaviour = Smoke{}

// Run plays until the bot stops.
func (s Smoke) Run(b *Bot) {
	for b.Running() {
		b.Call(OpGetProfile, func(ctx context.Context, c *client.Client) error {
			_, err := c.GetProfile(ctx, "")
			return err
		})
		if !b.Think(s.pause(b.Rand)) {
			return
		}
		item := s.Items[b.Rand.IntN(len(s.Items))]
		qty := int32(1 + b.Rand.IntN(3))
		if b.Rand.Float64() < s.OverspendFraction {
			qty = 100
		}
		b.Call(OpBuyItem, func(ctx context.Context, c *client.Client) error {
			_, err := c.BuyItem(ctx, item, qty)
			return err
		})
		if !b.Think(s.pause(b.Rand)) {
			return
		}
		battle := b.NextID("b")
		units := uint32(4 + b.Rand.IntN(5))    // 4..8
		ticks := uint32(50 + b.Rand.IntN(151)) // 50..200
		b.Call(OpStartBattle, func(ctx context.Context, c *client.Client) error {
			_, err := c.StartBattle(ctx, battle, units, ticks)
			return err
		})
		if !b.Think(s.pause(b.Rand)) {
			return
		}
	}
}

func (s Smoke) pause(r *rand.Rand) time.Duration {
	f := 1 + s.ThinkJitter*(2*r.Float64()-1)
	return time.Duration(float64(s.Think) * f)
}
