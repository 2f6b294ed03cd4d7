package pacer

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("pacer: invalid config")

// Defaults, from seed 000 (capacity 50, initial leak rate 10/s, 0.85, 1/s).
const (
	DefaultRate     = 10.0
	DefaultMinRate  = 1.0
	DefaultFactor   = 0.85
	DefaultCapacity = 50
)

// maxRate bounds Rate and MinRate: above it the interval would round to 0.
const maxRate = 1e9

// Config tunes a Pacer. A zero field takes its default.
type Config struct {
	// Rate is the base drip rate in requests per second, used when the
	// backpressure ratio is 0 (10).
	Rate float64
	// MinRate is the floor of the drip rate (1/s).
	MinRate float64
	// Factor is how much of the base rate full pressure takes away (0.85:
	// at ratio 1 the rate is 15 % of Rate).
	Factor float64
	// Capacity is how many requests may wait in the local queue (50).
	Capacity int
}

// DefaultConfig is the seed's bucket: 10/s, floor 1/s, factor 0.85, 50 slots.
func DefaultConfig() Config {
	return Config{Rate: DefaultRate, MinRate: DefaultMinRate, Factor: DefaultFactor, Capacity: DefaultCapacity}
}

// Validate reports a field that is negative, NaN, too large, or a Factor
// above 1.
func (c Config) Validate() error {
	switch {
	case !(c.Rate >= 0 && c.Rate <= maxRate):
		return fmt.Errorf("%w: Rate must be in [0, %g], got %v", ErrInvalid, maxRate, c.Rate)
	case !(c.MinRate >= 0 && c.MinRate <= maxRate):
		return fmt.Errorf("%w: MinRate must be in [0, %g], got %v", ErrInvalid, maxRate, c.MinRate)
	case !(c.Factor >= 0 && c.Factor <= 1):
		return fmt.Errorf("%w: Factor must be in [0, 1], got %v", ErrInvalid, c.Factor)
	case c.Capacity < 0:
		return fmt.Errorf("%w: Capacity must be >= 0, got %d", ErrInvalid, c.Capacity)
	}
	return nil
}

func (c Config) norm() Config {
	if c.Rate <= 0 {
		c.Rate = DefaultRate
	}
	if c.MinRate <= 0 {
		c.MinRate = DefaultMinRate
	}
	if c.Factor <= 0 {
		c.Factor = DefaultFactor
	}
	if c.Capacity <= 0 {
		c.Capacity = DefaultCapacity
	}
	return c
}

// rateFor is the drip rate at backpressure ratio r (already in [0, 1]).
func (c Config) rateFor(r float64) float64 {
	return math.Max(c.MinRate, c.Rate*(1-c.Factor*r))
}
