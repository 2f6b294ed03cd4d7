package gate

import (
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Future kinds of work the protocol has no payload for yet. Their rows say
// which class such an action gets; the payload that adds one takes its row
// (renamed to the payload's field name).
const (
	actionCosmetic = "cosmetic" // skins, emotes, profile decoration
	actionChat     = "chat"     // chat messages, presence
)

// policy is the criticality of every action, the cluster's decision: the
// gate sends a request to logic with its action's class, and logic and
// battle trust only that. It is keyed by the action's metrics label, which
// is the ClientFrame payload's field name (plus login, which is no frame);
// TestPolicyCoversEveryPayload fails for a payload without a row.
//
// A client may lower its request's class (ClientFrame.criticality below the
// row's is honoured) but never raise it: a class above the row's is ignored,
// the request is served with the row's class, and the refusal is counted in
// gate_criticality_upgrades_refused_total{action}. UNSPECIFIED (and a number
// the proto does not define) means the row's class.
//
// A reconnect to a match in progress gets its priority through its line
// ticket (line.go), not through this table: the priority lane lets it in
// first, and its login is critical like every login.
var policy = map[string]priority.Class{
	// A purchase is money: shed last.
	actionBuyItem: priority.Critical,
	// A player who has a socket open already and is logging in: dropping
	// the login wastes the connection.
	actionLogin: priority.Critical,
	// Battles and profile reads are the bulk of the traffic: shed when a
	// tier is full, after sheddable work.
	actionStartBattle: priority.Default,
	actionGetProfile:  priority.Default,
	// Nice to have: shed first.
	actionCosmetic: priority.Sheddable,
	actionChat:     priority.Sheddable,
}

// loginCriticality is the class of every login call.
var loginCriticality = policy[actionLogin]

// classFor is the class of a request for action that asked for asked: the
// action's row, or a lower class the client asked for. upgrade says the
// client asked for more than the row gives (and did not get it). An action
// without a row (none reaches here: decodeFrame refuses unknown payloads)
// is Default.
func classFor(action string, asked leveev2.Criticality) (c priority.Class, upgrade bool) {
	c, ok := policy[action]
	if !ok {
		c = priority.Default
	}
	want, ok := priority.FromProto(asked)
	switch {
	case !ok:
		return c, false
	case want > c:
		return c, true
	}
	return want, false
}

// classify is the class of a request for action whose frame asked for
// asked (see policy), counting a refused upgrade.
func (s *Server) classify(action string, asked leveev2.Criticality) priority.Class {
	c, upgrade := classFor(action, asked)
	if upgrade {
		if m := s.m.upgradeRefused[action]; m != nil {
			m.Inc()
		}
	}
	return c
}
