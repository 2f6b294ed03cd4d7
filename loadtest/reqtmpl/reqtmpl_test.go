package reqtmpl

import (
	"errors"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/leveehq/levee/examples/arena/arenapb"
)

func compileYAML(t *testing.T, src string) *Template {
	t.Helper()
	tp, err := compileSrc(src)
	if err != nil {
		t.Fatalf("Compile(%s): %v", src, err)
	}
	return tp
}

func compileSrc(src string) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		return nil, err
	}
	var n *yaml.Node
	if len(doc.Content) > 0 {
		n = doc.Content[0]
	}
	return Compile(n, "request")
}

func mt[M proto.Message]() protoreflect.MessageType {
	var m M
	return m.ProtoReflect().Type()
}

func TestPlaceholders(t *testing.T) {
	tp := compileYAML(t, `{battle_id: "b-{{player_id}}-{{seq}}-{{job_id}}-{{run_id}}", units: "{{seq}}", ticks: 200}`)
	if tp.Fixed() || tp.Draws() {
		t.Fatalf("fixed %v draws %v, want a template with placeholders and no draws", tp.Fixed(), tp.Draws())
	}
	if err := tp.Check(mt[*arenapb.StartBattleRequest]()); err != nil {
		t.Fatal(err)
	}
	m, err := tp.Build(mt[*arenapb.StartBattleRequest](), Vars{Player: "p-r-7", Seq: 3, Job: "j9", Run: "r"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &arenapb.StartBattleRequest{BattleId: "b-p-r-7-3-j9-r", Units: 3, Ticks: 200}
	if !proto.Equal(m, want) {
		t.Fatalf("got %v, want %v", m, want)
	}
}

func TestFixedIsConstant(t *testing.T) {
	for _, src := range []string{``, `{}`, `{item_id: potion, quantity: 2}`, `~`} {
		tp := compileYAML(t, src)
		if !tp.Fixed() || tp.Draws() {
			t.Fatalf("%q: fixed %v draws %v", src, tp.Fixed(), tp.Draws())
		}
	}
	tp := compileYAML(t, `{itemId: potion, quantity: 2}`) // the JSON name works too
	m, err := tp.Build(mt[*arenapb.BuyItemRequest](), Vars{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&arenapb.BuyItemRequest{ItemId: "potion", Quantity: 2}); !proto.Equal(m, want) {
		t.Fatalf("got %v, want %v", m, want)
	}
}

func TestRangeAndChoice(t *testing.T) {
	tp := compileYAML(t, `
item_id: {$choice: [potion, sword, shield]}
quantity: {$choice: [{$range: [1, 3]}, 100], $weights: [9, 1]}`)
	if !tp.Draws() {
		t.Fatal("want Draws")
	}
	if err := tp.Check(mt[*arenapb.BuyItemRequest]()); err != nil {
		t.Fatal(err)
	}
	rnd := mrand.New(mrand.NewPCG(1, 1))
	items := map[string]int{}
	qty := map[int32]int{}
	const n = 10000
	for range n {
		m, err := tp.Build(mt[*arenapb.BuyItemRequest](), Vars{}, rnd)
		if err != nil {
			t.Fatal(err)
		}
		r := m.(*arenapb.BuyItemRequest)
		items[r.GetItemId()]++
		qty[r.GetQuantity()]++
	}
	if len(items) != 3 {
		t.Fatalf("items %v, want the three", items)
	}
	for it, c := range items {
		if c < n/3-300 || c > n/3+300 {
			t.Errorf("item %s drawn %d times of %d, want about a third", it, c, n)
		}
	}
	if len(qty) != 4 || qty[100] < n/10-200 || qty[100] > n/10+200 {
		t.Fatalf("quantities %v: want 1, 2, 3 and 100 about a tenth of the time", qty)
	}
	for q := range qty {
		if q != 100 && (q < 1 || q > 3) {
			t.Fatalf("quantity %d outside the range", q)
		}
	}
}

func TestZeroWeightNeverDrawn(t *testing.T) {
	tp := compileYAML(t, `{item_id: {$choice: [potion, sword], $weights: [0, 1]}}`)
	rnd := mrand.New(mrand.NewPCG(3, 4))
	for range 1000 {
		js, err := tp.JSON(Vars{}, rnd)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(js), "sword") {
			t.Fatalf("drew %s, weight 0", js)
		}
	}
}

func TestRepeatedMapAndNested(t *testing.T) {
	tp := compileYAML(t, `{battle_id: x, team_a: [{hp: {$range: [5, 5]}, attack: 2}, {hp: 1}]}`)
	if err := tp.Check(mt[*arenapb.SimulateRequest]()); err != nil {
		t.Fatal(err)
	}
	m, err := tp.Build(mt[*arenapb.SimulateRequest](), Vars{}, mrand.New(mrand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	want := &arenapb.SimulateRequest{BattleId: "x", TeamA: []*arenapb.Unit{{Hp: 5, Attack: 2}, {Hp: 1}}}
	if !proto.Equal(m, want) {
		t.Fatalf("got %v, want %v", m, want)
	}
	tp = compileYAML(t, `{inventory: {potion: 3}}`)
	if err := tp.Check(mt[*arenapb.Player]()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ src, want string }{
		{`{team_a: [{hp: x}]}`, `request.team_a[0].hp: want a whole number (hp is a uint32), got "x"`},
		{`{team_a: {hp: 1}}`, "request.team_a: want a list (a repeated field), got a mapping"},
		{`{team_a: [{power: 1}]}`, "request.team_a[0].power: arena.v1.Unit has no field power"},
		{`{team_a: [3]}`, "request.team_a[0]: want a mapping of Unit's fields, got 3"},
	} {
		err := compileYAML(t, c.src).Check(mt[*arenapb.SimulateRequest]())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.src, err, c.want)
		}
	}
	if err := compileYAML(t, `{inventory: {potion: -1}}`).Check(mt[*arenapb.Player]()); err == nil ||
		!strings.Contains(err.Error(), "request.inventory.potion: -1 does not fit value (a uint32") {
		t.Errorf("map value: got %v", err)
	}
	if err := compileYAML(t, `{inventory: [1]}`).Check(mt[*arenapb.Player]()); err == nil ||
		!strings.Contains(err.Error(), "want a mapping (a map field)") {
		t.Errorf("map: got %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`[1, 2]`, "request: want a mapping of the request's fields"},
		{`{a: "{{nope}}"}`, "request.a: unknown placeholder {{nope}}"},
		{`{a: "{{seq"}`, "{{ without }}"},
		{`{a: "seq}}"}`, "}} without {{"},
		{`{a: {$range: [3, 1]}}`, "request.a: $range [3, 1]: LO must be <= HI"},
		{`{a: {$range: [1]}}`, "$range wants [LO, HI]"},
		{`{a: {$range: [1, x]}}`, `$range: "x" is not a whole number`},
		{`{a: {$range: [1, 2.5]}}`, `$range: "2.5" is not a whole number`},
		{`{a: {$choice: []}}`, "$choice wants a list of at least one value"},
		{`{a: {$choice: [1, 2], $weights: [1]}}`, "$weights wants one number per $choice value (2)"},
		{`{a: {$choice: [1, 2], $weights: [0, 0]}}`, "at least one must be > 0"},
		{`{a: {$choice: [1, 2], $weights: [1, -1]}}`, `"-1" is not a number >= 0`},
		{`{a: {$weights: [1]}}`, "$weights without $choice"},
		{`{a: {$range: [1, 2], $choice: [1]}}`, "$range and $choice in one value"},
		{`{a: {$pick: [1]}}`, "unknown generator $pick"},
		{`{a: {$range: [1, 2], b: 1}}`, "field b next to a generator"},
		{"a: 1\na: 2", "request.a: given twice"},
	} {
		_, err := compileSrc(c.src)
		var te *Error
		if err == nil || !errors.As(err, &te) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an *Error with %q", c.src, err, c.want)
		}
	}
}

func TestCheckErrors(t *testing.T) {
	buy := mt[*arenapb.BuyItemRequest]()
	battle := mt[*arenapb.StartBattleRequest]()
	for _, c := range []struct {
		src  string
		mt   protoreflect.MessageType
		want string
	}{
		{`{item: potion}`, buy, "request.item: arena.v1.BuyItemRequest has no field item; its fields are item_id, quantity"},
		{`{item_id: 3}`, buy, "request.item_id: want a string (item_id is a string), got 3"},
		{`{quantity: many}`, buy, `request.quantity: want a whole number (quantity is a int32), got "many"`},
		{`{quantity: 2.5}`, buy, "2.5 does not fit quantity"},
		{`{quantity: 3000000000}`, buy, "3000000000 does not fit quantity (a int32, -2147483648..2147483647)"},
		{`{quantity: {$range: [1, 3000000000]}}`, buy, "$range [1, 3000000000] does not fit quantity"},
		{`{units: -1}`, battle, "-1 does not fit units (a uint32, 0..4294967295)"},
		{`{units: {$choice: [1, -2]}}`, battle, "request.units.$choice[1]: -2 does not fit units"},
		{`{units: [1]}`, battle, "want a whole number (units is a uint32), got a list"},
		{`{item_id: potion, itemId: sword}`, buy, "the same field as item_id"},
		{`{item_id: [potion]}`, buy, "want a string (item_id is a string), got a list"},
	} {
		tp, err := compileSrc(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		err = tp.Check(c.mt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.src, err, c.want)
		}
	}
}

func TestErrorLine(t *testing.T) {
	tp := compileYAML(t, "item_id: potion\nquantity: x\n")
	err := tp.Check(mt[*arenapb.BuyItemRequest]())
	var te *Error
	if !errors.As(err, &te) || te.Line != 2 || te.Path != "request.quantity" {
		t.Fatalf("got %#v, want line 2 at request.quantity", err)
	}
}
