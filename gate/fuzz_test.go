package gate

import (
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/internal/wire"
	"github.com/leveehq/levee/internal/wire/wiretest"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// refusedFrames are frames the gate must refuse with one reply to their id:
// an unknown field, an unknown action, a request that does not decode as
// the action's (an unknown field in it, numbers out of range), an unknown
// enum name, on both subprotocols, and frames whose id cannot be read.
// They seed the fuzz target too.
var refusedFrames = []struct {
	json bool
	in   string
	id   uint64
	code leveev2.ErrorCode
	says string // a part of the message
}{
	{true, `{"requestId":"5","bogus":{}}`, 5, leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE, `"bogus"`},
	{true, `{"requestId":"4","action":"trade","request":{}}`, 4, leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE, `unknown action "trade"`},
	{true, `{"requestId":"6","action":"buy_item","request":{"itemId":"sword","quantity":1,"colour":"red"}}`, 6, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `unknown field "colour"`},
	{true, `{"requestId":"7","action":"buy_item","request":"CgVzd29yZBAB"}`, 7, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `JSON object`},
	{true, `{"requestId":"8","action":"buy_item","request":{"itemId":"sword","quantity":4611686018427387904}}`, 8, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `quantity`},
	{true, `{"requestId":"9","action":"buy_item","request":{"itemId":"sword","quantity":1.5}}`, 9, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `quantity`},
	{true, `{"requestId":"10","criticality":"CRITICALITY_URGENT","action":"get_profile"}`, 10, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `CRITICALITY_URGENT`},
	{true, `{"requestId":11,"action":"get_profile","request":{"playerId":7}}`, 11, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `playerId`},
	{true, `{"requestId":"12"}`, 12, leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE, `no action`},
	{true, `{"action":"get_profile"}`, 0, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `request_id is required`},
	{true, `{"bogus":{}}`, 0, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `"bogus"`},
	{true, `{"requestId":"13","action":"get_profile","request":{`, 0, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `malformed frame`},
	{false, string(append(frameBytes(14), 0xfa, 0x01, 0x00)), 14, leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE, `field 31`},
	{false, string(append(frameBytes(15), 0x2a, 0x01, 0xff)), 15, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `UTF-8`},
	{false, string(append(frameBytes(16), 0x32, 0x05)), 16, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `malformed frame`},
	{false, string(marshal(&leveev2.ClientFrame{RequestId: 17, Action: "buy_item", Request: []byte{0x0a, 0x01, 0xff}})), 17, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `request`},
	{false, string(marshal(&leveev2.ClientFrame{RequestId: 18, Action: "chat"})), 18, leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE, `unknown action "chat"`},
	{false, "\xff\xff\xff", 0, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, `malformed frame`},
}

func frameBytes(id uint64) []byte {
	b, err := proto.Marshal(&leveev2.ClientFrame{RequestId: id})
	if err != nil {
		panic(err)
	}
	return b
}

// TestRefusedFrameGetsOneReplyWithItsID sends each refused frame over a
// real connection and reads exactly one reply with its id before the
// next frame's, then a valid request still works.
func TestRefusedFrameGetsOneReplyWithItsID(t *testing.T) {
	g := startGate(t, nil, startFakeLogic(t))
	conns := map[bool]*client{}
	conns[false], _ = g.connect(t, "alice", wire.ProtoSubprotocol)
	conns[true], _ = g.connect(t, "bob", wire.JSONSubprotocol)
	for _, c := range refusedFrames {
		cl := conns[c.json]
		if c.json {
			if err := cl.ws.WriteMessage(websocket.TextMessage, []byte(c.in)); err != nil {
				t.Fatal(err)
			}
		} else {
			cl.sendRaw([]byte(c.in))
		}
		e := wantError(t, cl.recv(), c.id, c.code)
		if !strings.Contains(e.GetMessage(), c.says) || strings.Contains(e.GetMessage(), "proto:") || strings.Contains(e.GetMessage(), "levee.v2.") {
			t.Errorf("%q: message %q, want it to say %q and no internals", c.in, e.GetMessage(), c.says)
		}
		// The next reply is the next request's: one reply per frame.
		cl.send(profileFrame(100 + c.id))
		if f := cl.recv(); f.GetRequestId() != 100+c.id || !isProfile(f) {
			t.Fatalf("after %q: %v, want the profile of request %d", c.in, f, 100+c.id)
		}
	}
}

// FuzzDecodeClientFrame checks the gate's side of decoding: any bytes either
// route (a request id, a declared action and a request that decodes as the
// action's, mapped to a logic call) or get exactly one typed error reply
// that encodes, never both and never neither; and whenever a reference
// reader (wiretest, written apart from the decoder) can read the frame's
// request id, that reply or that request carries the id.
func FuzzDecodeClientFrame(f *testing.F) {
	b, _ := proto.Marshal(profileFrame(1))
	f.Add(b, false)
	f.Add(append(b, 0xfa, 0x01, 0x00), false)
	b, _ = proto.Marshal(buyFrame(2, "potion", 3))
	f.Add(b, false)
	f.Add([]byte(`{"requestId":"1","action":"start_battle","request":{"battleId":"b","units":3,"ticks":10}}`), true)
	f.Add([]byte(`{"requestId":"2"}`), true)
	f.Add([]byte{0xff, 0xff}, false)
	for _, c := range refusedFrames {
		f.Add([]byte(c.in), c.json)
	}
	s := &Server{def: arena.Game().Def()}
	s.actions = newActions(s.def)
	types := wire.ForGame(s.def)
	codecs := map[bool]*wire.Codec{false: {Game: types}, true: {JSON: true, Game: types}}
	f.Fuzz(func(t *testing.T, data []byte, json bool) {
		codec := codecs[json]
		fr, req, reply := s.decodeFrame(codec, data)
		if (fr == nil) == (reply == nil) {
			t.Fatalf("frame %v and reply %v: want exactly one", fr, reply)
		}
		want := uint64(0)
		if len(data) <= wire.MaxFrame { // longer frames are closed with 1009 first
			want = wiretest.RequestID(data, json)
		}
		if reply != nil {
			if reply.GetError().GetCode() == leveev2.ErrorCode_ERROR_CODE_UNSPECIFIED {
				t.Fatalf("untyped error reply %v", reply)
			}
			if want != 0 && reply.GetRequestId() != want {
				t.Fatalf("reply to request %d for a frame with id %d: %v", reply.GetRequestId(), want, reply)
			}
			if _, err := codec.EncodeServer(reply, ""); err != nil {
				t.Fatalf("reply does not encode: %v", err)
			}
			return
		}
		if want != 0 && fr.GetRequestId() != want {
			t.Fatalf("routed request %d for a frame with id %d", fr.GetRequestId(), want)
		}
		a := s.actions[fr.GetAction()]
		lr := logicRequest("p1", fr)
		if a == nil || req == nil || lr.GetCall().GetAction() != a.name || lr.GetPlayerId() != "p1" || lr.GetRequestId() != fr.GetRequestId() {
			t.Fatalf("routable frame %v made logic request %v", fr, lr)
		}
		// What logic gets decodes as the action's request, to the request
		// the gate decoded.
		typ, _, _ := types.Request(a.name)
		again := typ.New().Interface()
		if err := proto.Unmarshal(lr.GetCall().GetRequest(), again); err != nil || !proto.Equal(again, req) {
			t.Fatalf("logic's request %v (%v), the gate decoded %v", again, err, req)
		}
	})
}

// TestRateLimitedRefusedFrameKeepsItsID: a refused frame over the rate
// limit is answered RATE_LIMITED, still with the id it could be read with.
func TestRateLimitedRefusedFrameKeepsItsID(t *testing.T) {
	g := startGate(t, func(c *Config) { c.ConnRate, c.ConnBurst = 0.001, 1 }, startFakeLogic(t))
	c, _ := g.connect(t, "alice", wire.JSONSubprotocol)
	c.send(profileFrame(1)) // the one token
	if f := c.recv(); f.GetRequestId() != 1 || !isProfile(f) {
		t.Fatalf("first request: %v", f)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(`{"requestId":"7","action":"buy_item","request":{"quantity":1.5}}`)); err != nil {
		t.Fatal(err)
	}
	wantError(t, c.recv(), 7, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED)
}
