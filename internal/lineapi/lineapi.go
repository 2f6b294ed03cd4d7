// Package lineapi is the wire format of the gate's line admin API, the one
// contract between the gate, which serves it, and the tools that call it
// (the load tool's lineadmin client):
//
//	GET  /admin/line   the line's state: a View, as JSON
//	POST /admin/line   a change: a Request as a JSON object (or the same
//	                   fields as a form); the answer is the new View
//
// It also states how often the gate pushes a waiting player a status
// (MaxStatusInterval), which tools that watch the pushes judge gaps by.
//
// The package depends on the standard library only, so that a client of
// the API does not link the gate server.
package lineapi

import "time"

// Path is the admin API's path on the gate's ops listener.
const Path = "/admin/line"

// View is GET /admin/line's answer (and a POST's, after the change): the
// admission line's state.
type View struct {
	Mode          string   `json:"mode"` // open, queueing, paced, closed or auto
	Rate          RateView `json:"rate"`
	Length        int      `json:"length"`   // in line, away ones included
	Waiting       int      `json:"waiting"`  // in line with a connection open
	Away          int      `json:"away"`     // in line, dropped, within grace
	Held          int      `json:"held"`     // released while away, kept for their return
	Priority      int      `json:"priority"` // in the priority lane
	MaxLength     int      `json:"max_length"`
	RetryAfter    string   `json:"retry_after"` // given to newcomers while closed
	Grace         string   `json:"grace"`
	AdmittedTotal uint64   `json:"admitted_total"`
	DroppedTotal  uint64   `json:"dropped_total"`
	RefusedFull   uint64   `json:"refused_full_total"`
	RefusedClosed uint64   `json:"refused_closed_total"`
	MeasuredRate  float64  `json:"measured_rate"` // per second; 0 until measured
	Measured      bool     `json:"measured"`
	OldestWaitMs  int64    `json:"oldest_wait_ms"`
	Room          *int     `json:"room"` // players the gate may let in now; null: no limit
	Auto          AutoView `json:"auto"`
}

// RateView is the configured release rate: N players per Interval (a Go
// duration string), PerSecond the same as a rate.
type RateView struct {
	N         int     `json:"n"`
	Interval  string  `json:"interval"`
	PerSecond float64 `json:"per_second"`
}

// AutoView is auto mode's state: its settings, its last decision and the
// signals it last read.
type AutoView struct {
	Enabled      bool        `json:"enabled"`
	MinRate      float64     `json:"min_rate"` // per second
	MaxRate      float64     `json:"max_rate"`
	Rate         float64     `json:"rate"` // the auto pacer's current rate, per second
	Up           float64     `json:"up"`
	Down         float64     `json:"down"`
	Interval     string      `json:"interval"`
	LastVerdict  string      `json:"last_verdict,omitempty"`
	LastReason   string      `json:"last_reason,omitempty"`
	LastStepAt   *time.Time  `json:"last_step_at,omitempty"`
	Signals      SignalsView `json:"signals"`
	MaxDepth     float64     `json:"max_queue_depth"`
	MaxP99Ms     int64       `json:"max_battle_p99_ms"`
	MaxPressure  float64     `json:"max_backpressure"`
	MetricsURLs  []string    `json:"metrics_urls"`
	ScrapeErrors []string    `json:"scrape_errors,omitempty"`
}

// SignalsView is the tiers' health as auto mode last read it; a signal
// not read is null.
type SignalsView struct {
	QueueDepth   *float64 `json:"logic_queue_depth"`
	BattleP99Ms  *float64 `json:"battle_p99_ms"`
	Backpressure *float64 `json:"backpressure"`
}

// Request is a POST's body: the fields left zero are not sent and stay as
// they are. Durations are Go duration strings ("10s"). The gate also takes
// the same fields as a form, and a number as a string.
type Request struct {
	Mode        string  `json:"mode,omitempty"`          // open, queueing, paced, closed or auto
	Rate        int     `json:"rate,omitempty"`          // players per interval, at least 1
	Interval    string  `json:"interval,omitempty"`      // the release interval
	MaxLength   int     `json:"max_length,omitempty"`    // the line's capacity
	RetryAfter  string  `json:"retry_after,omitempty"`   // given to newcomers while closed
	AutoMinRate float64 `json:"auto_min_rate,omitempty"` // auto mode's bounds, players per second
	AutoMaxRate float64 `json:"auto_max_rate,omitempty"`
}

// Fields are the names a POST may set: Request's JSON names, in order.
var Fields = []string{"mode", "rate", "interval", "max_length", "retry_after", "auto_min_rate", "auto_max_rate"}

// HeartbeatMaxFactor is the most push intervals a waiting player goes
// without a status when nothing they would notice changes: the heartbeat
// far back in a standing line (the gate's push rule).
const HeartbeatMaxFactor = 30

// DefaultPush is the gate's default push interval (-line-push).
const DefaultPush = 2 * time.Second

// MaxStatusInterval is the longest a player waiting in the admission line
// of a gate with -line-push push goes without a QueueStatus: the heartbeat
// far back in a standing line (HeartbeatMaxFactor × push), and one walk
// more for a push skipped because another write to the player was in
// progress. Tools that watch the pushes judge gaps against it.
func MaxStatusInterval(push time.Duration) time.Duration {
	return (HeartbeatMaxFactor + 1) * push
}
