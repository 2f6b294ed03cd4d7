package gate

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// loginCriticality is the class of every login call: a player who has a
// socket open already and is logging in; dropping the login wastes the
// connection.
const loginCriticality = priority.Critical

// action is what the gate knows of one of the game's declared actions,
// resolved once at start so that a request does no look-up but the one by
// name.
//
// The class is the declaration's, the cluster's decision: the gate sends a
// request to logic with its action's class, and logic and battle trust
// only that. A client may lower its request's class (ClientFrame.criticality
// below the declared class is honoured) but never raise it: a class above
// it is ignored, the request is served with the declared class, and the
// refusal is counted in gate_criticality_upgrades_refused_total{action}.
// UNSPECIFIED (and a number the proto does not define) means the declared
// class.
//
// A reconnect to a match in progress gets its priority through its line
// ticket (line.go), not through the class: the priority lane lets it in
// first, and its login is critical like every login.
type action struct {
	name  string // the declared name: the metrics' action label
	class priority.Class
	kind  int // its cooling kind: kindJob for an action that runs a job
	// target, for an action that reads another player's state, names that
	// player from the decoded request ("": the sender).
	target         func(req proto.Message) string
	upgradeRefused prometheus.Counter
}

// newActions is the gate's table of def's actions.
func newActions(def *gamedef.Def) map[string]*action {
	t := make(map[string]*action, len(def.Actions()))
	for _, a := range def.Actions() {
		k := kindOther
		if a.Job != "" {
			k = kindJob
		}
		t[a.Name] = &action{name: a.Name, class: a.Class.Priority(), kind: k, target: a.Target}
	}
	return t
}

// classFor is the class of a request for an action declared with
// declared whose frame asked for asked: the declared class, or a lower
// class the client asked for. upgrade says the client asked for more than
// the declaration gives (and did not get it).
func classFor(declared priority.Class, asked leveev2.Criticality) (c priority.Class, upgrade bool) {
	want, ok := priority.FromProto(asked)
	switch {
	case !ok:
		return declared, false
	case want > declared:
		return declared, true
	}
	return want, false
}

// classify is the class of a request for a whose frame asked for asked,
// counting a refused upgrade.
func (s *Server) classify(a *action, asked leveev2.Criticality) priority.Class {
	c, upgrade := classFor(a.class, asked)
	if upgrade && a.upgradeRefused != nil {
		a.upgradeRefused.Inc()
	}
	return c
}

// targetOf is the player whose state a request for a reads: the sender
// unless the action declares a target and it names someone else. A target
// function is the game's code: one that panics is an error (the gate
// answers INTERNAL), never a crash of the gate.
func (a *action) targetOf(sender string, req proto.Message) (target string, err error) {
	if a.target == nil || req == nil {
		return sender, nil
	}
	defer func() {
		if r := recover(); r != nil {
			target, err = sender, fmt.Errorf("action %q: its target function panicked: %v", a.name, r)
		}
	}()
	if t := a.target(req); t != "" {
		return t, nil
	}
	return sender, nil
}
