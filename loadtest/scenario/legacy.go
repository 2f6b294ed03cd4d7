package scenario

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// flagKind is how a cmd/loadtest flag's value is read.
type flagKind uint8

const (
	flagString flagKind = iota
	flagInt
	flagUint // uint32
	flagUint64
	flagFloat
	flagDuration
	flagBool
)

// commonFlags are the cmd/loadtest flags every legacy engine takes in
// settings. The target's address, secrets, admin and metrics URLs, the
// server's pid and the output files come from the command line, not from
// a scenario.
var commonFlags = map[string]flagKind{
	"request-timeout": flagDuration, "json-fraction": flagFloat, "seed": flagUint64,
	"source-addr": flagString, "progress": flagDuration,
}

var engineFlags = map[string]map[string]flagKind{
	"smoke": {
		"bots": flagInt, "ramp": flagDuration, "duration": flagDuration, "think": flagDuration,
		"think-jitter": flagFloat, "items": flagString, "overspend-fraction": flagFloat, "max-requests": flagInt,
	},
	"overload": {
		"conns": flagInt, "units": flagUint, "ticks": flagUint, "critical-fraction": flagFloat, "item": flagString,
		"capacity-concurrency": flagInt, "capacity-time": flagDuration, "capacity-step-time": flagDuration,
		"capacity-search-time": flagDuration, "capacity-p99-slo": flagDuration, "capacity-min-served": flagFloat,
		"baseline-factor": flagFloat, "phase-time": flagDuration, "overload-factor": flagFloat,
		"overload-time": flagDuration, "reply-grace": flagDuration, "late-after": flagDuration,
		"max-rate": flagFloat, "max-outstanding": flagInt, "metrics-every": flagDuration,
		"min-goodput-ratio": flagFloat, "max-p99-ratio": flagFloat, "max-rss-mb": flagFloat, "expect-hold": flagBool,
	},
	"line": {
		"bots": flagInt, "dial-parallel": flagInt, "bound": flagDuration, "line-rate": flagFloat,
		"window": flagDuration, "settle": flagDuration, "pace-tolerance": flagFloat, "order-slack": flagDuration,
		"max-status-gap": flagDuration, "start-mode": flagString, "start-when-joined": flagBool,
		"start-rate": flagInt, "start-interval": flagDuration, "change-at": flagDuration,
		"change-mode": flagString, "change-rate": flagInt, "change-interval": flagDuration,
	},
	"hold": {
		"conns": flagInt, "dial-parallel": flagInt, "bound": flagDuration, "hold": flagDuration,
		"bare": flagBool, "sample-every": flagDuration, "hold-settle": flagDuration,
	},
}

// LegacyFlags are, per legacy engine, the cmd/loadtest flags (names
// without the dash, sorted) its settings may give.
var LegacyFlags = func() map[string][]string {
	m := map[string][]string{}
	for e, fs := range engineFlags {
		for n := range fs {
			m[e] = append(m[e], n)
		}
		for n := range commonFlags {
			m[e] = append(m[e], n)
		}
		slices.Sort(m[e])
	}
	return m
}()

// legacyUnused are the fields a legacy engine does not read.
var legacyUnused = []string{"arrivals", "players", "client", "timeline", "thresholds", "run", "t0", "capacity"}

// validateLegacy checks a smoke, overload, line or hold scenario: its
// settings, and nothing of the players engine.
func (d *decoder) validateLegacy(s *Scenario) error {
	for _, f := range legacyUnused {
		if d.has(f) {
			return d.fail(f, "engine %s does not use it (it takes settings: cmd/loadtest flags)", s.Engine)
		}
	}
	keys := make([]string, 0, len(s.Settings))
	for k := range s.Settings {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return d.node("settings."+a).Line - d.node("settings."+b).Line })
	for _, k := range keys {
		path := "settings." + k
		kind, ok := engineFlags[s.Engine][k]
		if !ok {
			kind, ok = commonFlags[k]
		}
		if !ok {
			hint := ""
			if strings.HasPrefix(k, "-") {
				hint = " (write flag names without the dash)"
			}
			return d.fail(path, "not a setting of engine %s%s; the settings are %s", s.Engine, hint, strings.Join(LegacyFlags[s.Engine], ", "))
		}
		if err := checkFlag(kind, s.Settings[k]); err != nil {
			return d.fail(path, "%v", err)
		}
	}
	return nil
}

// checkFlag reads v as the flag would.
func checkFlag(kind flagKind, v string) error {
	var err error
	var want string
	switch kind {
	case flagInt:
		_, err = strconv.ParseInt(v, 0, strconv.IntSize)
		want = "a whole number"
	case flagUint:
		_, err = strconv.ParseUint(v, 10, 32)
		want = "a whole number >= 0"
	case flagUint64:
		_, err = strconv.ParseUint(v, 0, 64)
		want = "a whole number >= 0"
	case flagFloat:
		_, err = strconv.ParseFloat(v, 64)
		want = "a number"
	case flagDuration:
		_, err = time.ParseDuration(v)
		want = "a duration"
	case flagBool:
		_, err = strconv.ParseBool(v)
		want = "true or false"
	}
	if err != nil {
		return fmt.Errorf("%q is not %s", v, want)
	}
	return nil
}
