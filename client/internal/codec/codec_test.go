package codec

import (
	"encoding/json"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// members is a JSON object's members, failing the test on anything else.
func members(t *testing.T, data []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return m
}

// TestJSONClientFrameShape: the request is the action's request message's
// protojson object, as proto/levee/v2/client.proto documents it.
func TestJSONClientFrameShape(t *testing.T) {
	c := Codec{JSON: true, Def: arena.Game().Def()}
	f := &leveev2.ClientFrame{RequestId: 7, Action: arena.ActionBuyItem,
		Request: mustMarshal(t, &arenapb.BuyItemRequest{ItemId: "potion", Quantity: 1})}
	data, err := c.EncodeClient(f)
	if err != nil {
		t.Fatal(err)
	}
	m := members(t, data)
	if string(m["requestId"]) != `"7"` || string(m["action"]) != `"buy_item"` {
		t.Fatalf("frame %s", data)
	}
	req := members(t, m["request"])
	if string(req["itemId"]) != `"potion"` || string(req["quantity"]) != `1` {
		t.Fatalf("request %s is not the message's protojson object", m["request"])
	}
	back, err := c.DecodeClient(data)
	if err != nil || !proto.Equal(back, f) {
		t.Fatalf("round trip: %v, %v; want %v", back, err, f)
	}

	// An empty request is still an object.
	data, err = c.EncodeClient(&leveev2.ClientFrame{RequestId: 8, Action: arena.ActionGetProfile})
	if err != nil || string(members(t, data)["request"]) != `{}` {
		t.Fatalf("empty request: %s, %v", data, err)
	}
	// An action the declaration lacks cannot carry request bytes.
	if _, err := c.EncodeClient(&leveev2.ClientFrame{RequestId: 9, Action: "fly", Request: []byte{8, 1}}); !errors.Is(err, ErrNoGame) {
		t.Fatalf("unknown action: %v", err)
	}
}

// TestJSONServerFrames: reply and welcome.state are the game's messages'
// protojson objects; the binary form is plain protobuf.
func TestJSONServerFrames(t *testing.T) {
	def := arena.Game().Def()
	gate := Codec{JSON: true, Def: def}
	reply := &leveev2.ServerFrame{RequestId: 7, Replayed: true, Version: 4,
		Payload: &leveev2.ServerFrame_Reply{Reply: mustMarshal(t, &arenapb.BuyItemReply{GoldSpent: 10})}}
	data, err := gate.EncodeServer(reply, arena.ActionBuyItem)
	if err != nil {
		t.Fatal(err)
	}
	if got := members(t, members(t, data)["reply"]); string(got["goldSpent"]) != `"10"` {
		t.Fatalf("reply %s", data)
	}
	types := func(id uint64) string {
		if id == 7 {
			return arena.ActionBuyItem
		}
		return ""
	}
	back, err := gate.DecodeServer(data, types)
	if err != nil || !proto.Equal(back, reply) {
		t.Fatalf("round trip: %v, %v; want %v", back, err, reply)
	}
	// The documented example, as a gate writes it.
	doc := []byte(`{"requestId":"7","reply":{"goldSpent":"10"},"backpressure":{"ratio":0.5}}`)
	f, err := gate.DecodeServer(doc, types)
	var r arenapb.BuyItemReply
	if err != nil || proto.Unmarshal(f.GetReply(), &r) != nil || r.GetGoldSpent() != 10 || f.GetBackpressure().GetRatio() != 0.5 {
		t.Fatalf("documented frame: %v, %v", f, err)
	}
	// A reply nobody waits for keeps its frame, not its content.
	if f, err := gate.DecodeServer([]byte(`{"requestId":"99","reply":{"goldSpent":"10"}}`), types); err != nil || f.GetRequestId() != 99 || f.GetPayload() == nil {
		t.Fatalf("stray reply: %v, %v", f, err)
	}

	welcome := &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Welcome{Welcome: &leveev2.Welcome{
		PlayerId: "ann", Shard: 3, Version: 1, State: mustMarshal(t, arena.NewPlayer("ann"))}}}
	data, err = gate.EncodeServer(welcome, "")
	if err != nil {
		t.Fatal(err)
	}
	w := members(t, members(t, data)["welcome"])
	if st := members(t, w["state"]); string(st["id"]) != `"ann"` || string(w["playerId"]) != `"ann"` {
		t.Fatalf("welcome %s", data)
	}
	back, err = gate.DecodeServer(data, types)
	if err != nil || !proto.Equal(back, welcome) {
		t.Fatalf("welcome round trip: %v, %v", back, err)
	}

	bin := Codec{}
	data, err = bin.EncodeServer(reply, "")
	if err != nil {
		t.Fatal(err)
	}
	if back, err := bin.DecodeServer(data, nil); err != nil || !proto.Equal(back, reply) {
		t.Fatalf("binary: %v, %v", back, err)
	}
}

func TestJSONRefusesWhatIsNotAFrame(t *testing.T) {
	c := Codec{JSON: true, Def: arena.Game().Def()}
	for _, in := range []string{`[]`, `null`, `{"requestId":"1","reply":{"goldSpent":"x"}}`, `{"requestId":"1","reply":{},"error":{"code":1}}`, `{`} {
		if f, err := c.DecodeServer([]byte(in), func(uint64) string { return arena.ActionBuyItem }); err == nil {
			t.Errorf("%s decoded as %v", in, f)
		}
	}
	if _, err := c.DecodeClient([]byte(`{"requestId":"1","action":"buy_item","request":{"nope":1}}`)); err == nil {
		t.Error("a request with a field its message lacks decoded")
	}
}
