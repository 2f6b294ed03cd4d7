package scenario

import (
	"errors"
	"fmt"
	"strings"

	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/loadtest/reqtmpl"
)

// Bind checks the players' actions against the game's declaration and
// fills in what it gives: every do is a declared action, every request
// template fits the action's request type (no field the request has not,
// every value of its field's kind), and a criticality may lower the
// action's declared class, never raise it; Act.Action and Act.Criticality
// (the declared class when not given) are set. A scenario is bound once;
// Bind again with the same declaration does nothing. The error is an
// *Error naming the action and the field.
func (s *Scenario) Bind(def *gamedef.Def) error {
	if def == nil {
		return &Error{File: s.File, Msg: "no game declaration to check the actions against"}
	}
	if s.bound == def {
		return nil
	}
	if s.Players.Login != nil {
		if err := s.bindAct(def, s.Players.Login); err != nil {
			return err
		}
	}
	for i := range s.Players.Actions {
		if err := s.bindAct(def, &s.Players.Actions[i]); err != nil {
			return err
		}
	}
	s.bound = def
	return nil
}

func (s *Scenario) bindAct(def *gamedef.Def, a *Act) error {
	path := a.path
	if path == "" {
		path = "players.actions"
	}
	ga, ok := def.Action(a.Do)
	if !ok {
		var names []string
		for _, x := range def.Actions() {
			names = append(names, x.Name)
		}
		return &Error{File: s.File, Line: a.line, Path: path + ".do",
			Msg: fmt.Sprintf("game %s has no action %q; its actions are %s", def.Name, a.Do, strings.Join(names, ", "))}
	}
	declared := ga.Class.Priority()
	switch c, given := priority.Parse(a.Criticality); {
	case a.Criticality == "" || a.Action == ga:
		a.Criticality = declared.String()
	case !given:
		return &Error{File: s.File, Line: a.line, Path: path + ".criticality", Msg: fmt.Sprintf("unknown criticality %q", a.Criticality)}
	case c > declared:
		return &Error{File: s.File, Line: a.line, Path: path + ".criticality",
			Msg: fmt.Sprintf("%s would raise action %s's declared class %s: a client may only lower it", c, a.Do, declared)}
	}
	if a.Request == nil {
		a.Request, _ = reqtmpl.Compile(nil, path+".request")
	}
	if err := a.Request.Check(ga.Request); err != nil {
		e := &Error{File: s.File, Line: a.line, Path: path + ".request", Msg: fmt.Sprintf("action %s: %v", a.Do, err)}
		var te *reqtmpl.Error
		if errors.As(err, &te) {
			e.Path, e.Msg = te.Path, fmt.Sprintf("action %s: %s", a.Do, te.Msg)
			if te.Line > 0 {
				e.Line = te.Line
			}
		}
		return e
	}
	a.Action = ga
	return nil
}
