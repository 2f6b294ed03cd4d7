package shed

// Criticality says how important a request is to the player. The zero value
// is Default, and a larger value is more important. Values other than the
// three below are treated as Default.
type Criticality int8

const (
	// Sheddable work (cosmetics, chat-like traffic) is shed first: the
	// adaptive rule drops it at Config.SheddableFactor of the limit.
	Sheddable Criticality = -1
	// Default work is shed when in-flight exceeds the limit.
	Default Criticality = 0
	// Critical work (purchases, in-match actions, reconnects) is never shed
	// by the adaptive rule; only the caller's hard in-flight cap stops it.
	Critical Criticality = 1
)

// String returns "sheddable", "default", "critical", or "unknown"; it is the
// value of the criticality label on metrics.
func (c Criticality) String() string {
	switch c {
	case Sheddable:
		return "sheddable"
	case Default:
		return "default"
	case Critical:
		return "critical"
	}
	return "unknown"
}
