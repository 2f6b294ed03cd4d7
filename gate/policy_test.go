package gate

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func buyFrame(id uint64) *leveev2.ClientFrame {
	return &leveev2.ClientFrame{RequestId: id, Payload: &leveev2.ClientFrame_BuyItem{BuyItem: &leveev2.BuyItemRequest{ItemId: "sword", Quantity: 1}}}
}

// A client that asks for CRITICAL on every frame gets the policy's class:
// what reaches logic is the gate's decision, the request is still served,
// and the refused upgrade is counted. Lowering is honoured.
func TestClientCannotRaiseItsClass(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	const unknown = leveev2.Criticality(7) // a number the proto does not define
	cases := []struct {
		frame   func(uint64) *leveev2.ClientFrame
		asked   leveev2.Criticality
		want    priority.Class
		upgrade bool
	}{
		{battleFrame, critical, priority.Default, true},
		{battleFrame, leveev2.Criticality_CRITICALITY_UNSPECIFIED, priority.Default, false},
		{battleFrame, dflt, priority.Default, false},
		{battleFrame, sheddable, priority.Sheddable, false},
		{battleFrame, unknown, priority.Default, false},
		{profileFrame, critical, priority.Default, true},
		{profileFrame, leveev2.Criticality_CRITICALITY_UNSPECIFIED, priority.Default, false},
		{profileFrame, sheddable, priority.Sheddable, false},
		{buyFrame, leveev2.Criticality_CRITICALITY_UNSPECIFIED, priority.Critical, false},
		{buyFrame, critical, priority.Critical, false},
		{buyFrame, unknown, priority.Critical, false},
		{buyFrame, dflt, priority.Default, false},
		{buyFrame, sheddable, priority.Sheddable, false},
	}
	upgrades := map[string]float64{}
	for p, sub := range map[string]string{"alice": wire.ProtoSubprotocol, "bob": wire.JSONSubprotocol} {
		c, _ := g.connect(t, p, sub)
		for i, tc := range cases {
			id := uint64(100 + i)
			f := tc.frame(id)
			action := actionOf(f)
			if rep := ask(c, f, tc.asked); rep.GetRequestId() != id || rep.GetError() != nil {
				t.Fatalf("%s %s asking %v: %v, want it served", sub, action, tc.asked, rep)
			}
			got, ok := logic.classOf(id)
			if !ok {
				t.Fatalf("%s %s: logic never saw request %d", sub, action, id)
			}
			if got != tc.want {
				t.Errorf("%s %s asking %v reached logic as %v, want %v", sub, action, tc.asked, got, tc.want)
			}
			if tc.upgrade {
				upgrades[action]++
			}
		}
	}
	for _, action := range []string{actionStartBattle, actionGetProfile, actionBuyItem} {
		if got := testutil.ToFloat64(g.m.upgrades.WithLabelValues(action)); got != upgrades[action] {
			t.Errorf("gate_criticality_upgrades_refused_total{%s} = %v, want %v", action, got, upgrades[action])
		}
	}
	if upgrades[actionStartBattle] != 2 || upgrades[actionGetProfile] != 2 {
		t.Fatalf("the test asked for %v upgrades", upgrades)
	}
}

// The lowering rule over every row and every request: the lower of the two,
// the row's class for UNSPECIFIED and unknown numbers, and an upgrade
// exactly when the request asks for more than the row.
func TestClassForLowersNeverRaises(t *testing.T) {
	asks := []leveev2.Criticality{leveev2.Criticality_CRITICALITY_UNSPECIFIED, critical, dflt, sheddable, 42}
	for action, row := range policy {
		for _, asked := range asks {
			got, upgrade := classFor(action, asked)
			want, wantUp := row, false
			if c, ok := priority.FromProto(asked); ok {
				want, wantUp = min(c, row), c > row
			}
			if got != want || upgrade != wantUp {
				t.Errorf("classFor(%s, %v) = %v, %v, want %v, %v", action, asked, got, upgrade, want, wantUp)
			}
		}
	}
	if c, up := classFor("no-such-action", critical); c != priority.Default || !up {
		t.Errorf("an action without a row: %v, %v, want default, an upgrade refused", c, up)
	}
	if loginCriticality != priority.Critical {
		t.Errorf("login is %v, want critical", loginCriticality)
	}
}

// Every ClientFrame payload has a row in the policy, named by its field, and
// actionOf knows it; every row is a payload, login or one of the declared
// future kinds of work. A new payload without a row fails here.
func TestPolicyCoversEveryPayload(t *testing.T) {
	md := (&leveev2.ClientFrame{}).ProtoReflect().Descriptor()
	oneof := md.Oneofs().ByName("payload")
	if oneof == nil {
		t.Fatal("ClientFrame has no payload oneof")
	}
	rows := map[string]bool{actionLogin: true, actionCosmetic: true, actionChat: true}
	fields := oneof.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		rows[name] = true
		if _, ok := policy[name]; !ok {
			t.Errorf("ClientFrame payload %s has no row in the criticality policy (gate/policy.go)", name)
		}
		f := &leveev2.ClientFrame{RequestId: 1}
		m := f.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		if got := actionOf(f); got != name {
			t.Errorf("actionOf(a %s frame) = %q, want %q", name, got, name)
		}
	}
	for action := range policy {
		if !rows[action] {
			t.Errorf("policy row %q is neither a payload, login nor a declared future action", action)
		}
	}
	if policy[actionCosmetic] != priority.Sheddable || policy[actionChat] != priority.Sheddable {
		t.Error("cosmetic and chat work must be sheddable")
	}
}
