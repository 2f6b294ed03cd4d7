package scenario

import (
	"errors"
	"strings"
	"testing"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/loadtest/reqtmpl"
)

const arenaActions = `arrivals:
  phases:
    - {duration: 1m, players: 100}
players:
  login: {do: get_profile}
  actions:
    - {do: get_profile, weight: 1, request: {}}
`

func TestBindFillsTheDeclaredClass(t *testing.T) {
	in := arenaActions + `    - {do: buy_item, weight: 2, request: {item_id: potion, quantity: {$range: [1, 3]}}}
    - {do: buy_item, weight: 1, request: {item_id: sword, quantity: 1}, criticality: sheddable}
    - {do: start_battle, weight: 3, request: {battle_id: "{{job_id}}", units: 8, ticks: 200}}
`
	s, err := Parse("a.yaml", []byte(in), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	def := arena.Game().Def()
	if err := s.Bind(def); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		crit    string
		mutates bool
	}{{"default", false}, {"critical", true}, {"sheddable", true}, {"default", true}} {
		a := s.Players.Actions[i]
		if a.Criticality != want.crit || a.Action == nil || a.Action.Name != a.Do || a.Action.Mutates != want.mutates {
			t.Errorf("actions[%d] (%s): criticality %q, action %+v; want %q, mutates %v", i, a.Do, a.Criticality, a.Action, want.crit, want.mutates)
		}
	}
	if l := s.Players.Login; l.Action == nil || l.Criticality != "default" {
		t.Errorf("login %+v", l)
	}
	if err := s.Bind(def); err != nil {
		t.Fatalf("a second Bind: %v", err)
	}
}

func TestBindErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"    - {do: dance, weight: 1}\n", `a.yaml:8: players.actions[1].do: game arena has no action "dance"; its actions are get_profile, buy_item, start_battle`},
		{"    - {do: buy_item, weight: 1, request: {item: potion}}\n", "a.yaml:8: players.actions[1].request.item: action buy_item: arena.v1.BuyItemRequest has no field item; its fields are item_id, quantity"},
		{"    - do: buy_item\n      weight: 1\n      request:\n        item_id: potion\n        quantity: lots\n", `a.yaml:12: players.actions[1].request.quantity: action buy_item: want a whole number (quantity is a int32), got "lots"`},
		{"    - {do: start_battle, weight: 1, request: {battle_id: x, units: -3}}\n", "a.yaml:8: players.actions[1].request.units: action start_battle: -3 does not fit units (a uint32, 0..4294967295)"},
		{"    - {do: get_profile, weight: 1, criticality: critical}\n", "a.yaml:8: players.actions[1].criticality: critical would raise action get_profile's declared class default: a client may only lower it"},
	} {
		s, err := Parse("a.yaml", []byte(arenaActions+c.in), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		err = s.Bind(arena.Game().Def())
		var se *Error
		if !errors.As(err, &se) || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.in, err, c.want)
		}
	}
	s, err := Parse("a.yaml", []byte(strings.Replace(arenaActions, "login: {do: get_profile}", "login: {do: login}", 1)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(arena.Game().Def()); err == nil || !strings.Contains(err.Error(), `a.yaml:5: players.login.do: game arena has no action "login"`) {
		t.Errorf("login: %v", err)
	}
}

// An override reaches into a request template, and its value is checked
// against the declaration like the file's.
func TestOverrideInTemplate(t *testing.T) {
	in := arenaActions + "    - {do: start_battle, weight: 1, request: {battle_id: \"{{job_id}}\", units: 8, ticks: 200}}\n"
	s, err := Parse("a.yaml", []byte(in), []string{"players.actions[1].request.units=32", "players.actions[1].request.ticks=2000"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(arena.Game().Def()); err != nil {
		t.Fatal(err)
	}
	js, err := s.Players.Actions[1].Request.JSON(reqtmpl.Vars{Job: "j"}, nil)
	if err != nil || string(js) != `{"battle_id":"j","ticks":2000,"units":32}` {
		t.Fatalf("request %s (%v)", js, err)
	}
	s, err = Parse("a.yaml", []byte(in), []string{"players.actions[1].request.units=many"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(arena.Game().Def()); err == nil || !strings.Contains(err.Error(), `players.actions[1].request.units: action start_battle: want a whole number (units is a uint32), got "many"`) {
		t.Fatalf("bad override: %v", err)
	}
}
