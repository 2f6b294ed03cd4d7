package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/wire/wiretest"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// arenaTypes resolves arena's messages: the tests need a game.
var arenaTypes = ForGame(arena.Game().Def())

var (
	binCodec  = Codec{Game: arenaTypes}
	jsonCodec = Codec{JSON: true, Game: arenaTypes}
)

func buyFrame(id uint64, item string, qty int32) *leveev2.ClientFrame {
	return &leveev2.ClientFrame{RequestId: id, Action: arena.ActionBuyItem,
		Request: mustMarshal(&arenapb.BuyItemRequest{ItemId: item, Quantity: qty})}
}

func TestRoundTrip(t *testing.T) {
	good := buyFrame(7, "sword", 1)
	good.Criticality = leveev2.Criticality_CRITICALITY_SHEDDABLE
	good.IssuedAtMs = 1700000000000
	for _, c := range []Codec{binCodec, jsonCodec} {
		b, err := c.EncodeClient(good)
		if err != nil {
			t.Fatal(err)
		}
		f, req, err := c.DecodeClient(b)
		if err != nil || !proto.Equal(f, good) {
			t.Fatalf("json=%v: round trip: %v %v", c.JSON, f, err)
		}
		if want := (&arenapb.BuyItemRequest{ItemId: "sword", Quantity: 1}); !proto.Equal(req, want) {
			t.Fatalf("json=%v: request %v, want %v", c.JSON, req, want)
		}
	}
}

// TestJSONFrameShape: on levee.v2.json the request is the action's request
// message's protojson object, not base64.
func TestJSONFrameShape(t *testing.T) {
	b, err := jsonCodec.EncodeClient(buyFrame(7, "sword", 2))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), " ", "")
	if !strings.Contains(s, `"request":{"itemId":"sword","quantity":2}`) || !strings.Contains(s, `"action":"buy_item"`) {
		t.Fatalf("frame %s", b)
	}
	f, _, err := jsonCodec.DecodeClient([]byte(`{"requestId":"7","action":"get_profile"}`))
	if err != nil || f.GetAction() != arena.ActionGetProfile || len(f.GetRequest()) != 0 {
		t.Fatalf("a frame without a request is the empty request: %v %v", f, err)
	}
}

// TestServerRoundTrip: replies and welcomes carry the game's messages; on
// JSON as their protojson objects.
func TestServerRoundTrip(t *testing.T) {
	p := arena.NewPlayer("alice")
	reply := &leveev2.ServerFrame{RequestId: 3, Replayed: true, Version: 4,
		Backpressure: &leveev2.Backpressure{QueueDepth: 2, Ratio: 0.5},
		Payload:      &leveev2.ServerFrame_Reply{Reply: mustMarshal(&arenapb.BuyItemReply{Player: p, GoldSpent: 10})}}
	welcome := &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Welcome{Welcome: &leveev2.Welcome{
		State: mustMarshal(p), Shard: 3, Version: 1, PlayerId: "alice"}}}
	empty := &leveev2.ServerFrame{RequestId: 5, Payload: &leveev2.ServerFrame_Reply{Reply: nil}}
	actionOf := func(id uint64) string {
		if id == 5 {
			return arena.ActionGetProfile
		}
		return arena.ActionBuyItem
	}
	for _, c := range []Codec{binCodec, jsonCodec} {
		for _, f := range []*leveev2.ServerFrame{reply, welcome, empty} {
			b, err := c.EncodeServer(f, actionOf(f.GetRequestId()))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.DecodeServer(b, actionOf)
			if err != nil {
				t.Fatalf("json=%v: %s: %v", c.JSON, b, err)
			}
			if !sameFrame(got, f) {
				t.Fatalf("json=%v: got %v, want %v", c.JSON, got, f)
			}
			if c.JSON && f == reply && !strings.Contains(strings.ReplaceAll(string(b), " ", ""), `"goldSpent":"10"`) {
				t.Fatalf("JSON reply is not the reply's protojson object: %s", b)
			}
		}
	}
	if _, err := jsonCodec.EncodeServer(reply, "no_such_action"); err == nil {
		t.Fatal("a reply for an unknown action encoded")
	}
}

// sameFrame compares frames with the game's messages compared as messages
// (their encodings may differ in map order).
func sameFrame(a, b *leveev2.ServerFrame) bool {
	ra, rb := a.GetReply(), b.GetReply()
	sa, sb := a.GetWelcome().GetState(), b.GetWelcome().GetState()
	ca, cb := proto.Clone(a).(*leveev2.ServerFrame), proto.Clone(b).(*leveev2.ServerFrame)
	for _, f := range []*leveev2.ServerFrame{ca, cb} {
		if r, ok := f.Payload.(*leveev2.ServerFrame_Reply); ok {
			r.Reply = nil
		}
		if w := f.GetWelcome(); w != nil {
			w.State = nil
		}
	}
	if !proto.Equal(ca, cb) || (a.GetPayload() == nil) != (b.GetPayload() == nil) {
		return false
	}
	eq := func(x, y []byte, m proto.Message) bool {
		n := proto.Clone(m)
		if proto.Unmarshal(x, m) != nil || proto.Unmarshal(y, n) != nil {
			return false
		}
		return proto.Equal(m, n)
	}
	return eq(ra, rb, &arenapb.BuyItemReply{}) && eq(sa, sb, &arenapb.Player{})
}

// jsonCases are refused JSON frames: an unknown field, an unknown action, a
// request that is not the action's, numbers out of range, an unknown enum
// name, and the edges of reading the id. They seed the fuzz target.
var jsonCases = []struct {
	in     string
	want   error
	id     uint64
	detail string // a part of the detail
}{
	{`{"requestId":"5","bogus":{}}`, ErrUnknownPayload, 5, `unknown field "bogus"`},
	{`{"requestId":"5","action":"chat","request":{"text":"hi"}}`, ErrUnknownAction, 5, `unknown action "chat"`},
	{`{"requestId":"5","action":"login"}`, ErrUnknownAction, 5, `unknown action "login"`},
	{`{"requestId":"5","action":"buy_item","request":{"itemId":"x","bogus":1}}`, ErrBadRequest, 5, `unknown field "bogus"`},
	{`{"requestId":"5","action":"buy_item","request":{"itemId":"x","quantity":4611686018427387904}}`, ErrBadRequest, 5, `quantity: 4611686018427387904`},
	{`{"requestId":"5","action":"buy_item","request":{"itemId":"x","quantity":1.5}}`, ErrBadRequest, 5, `quantity: 1.5`},
	{`{"requestId":"5","action":"buy_item","request":{"itemId":"x","quantity":"lots"}}`, ErrBadRequest, 5, `quantity`},
	{`{"requestId":"5","action":"buy_item","request":"CgF4"}`, ErrBadRequest, 5, `JSON object`},
	{`{"requestId":"5","action":"buy_item","request":{"itemId":"` + strings.Repeat("x", 300) + `"}}`, ErrBadRequest, 5, `at most 256`},
	{`{"requestId":"5","criticality":"CRITICALITY_SUPER","action":"get_profile"}`, ErrMalformed, 5, `criticality: "CRITICALITY_SUPER"`},
	{`{"requestId":"5","timeoutMs":-1,"action":"get_profile"}`, ErrMalformed, 5, `timeoutMs: -1`},
	{"{\"requestId\":\"5\",\"action\":\"get_profile\",\"request\":{\"playerId\":\"\xff\"}}", ErrBadRequest, 5, `invalid UTF-8`},
	{"{\"requestId\":\"5\",\"action\":\"get_\xffprofile\"}", ErrMalformed, 5, `invalid UTF-8`},
	{`{"requestId":"5","action":7}`, ErrMalformed, 5, `action`},
	// The id in every form protojson reads for a uint64, and where it stands.
	{`{"bogus":1,"request_id":7}`, ErrUnknownPayload, 7, `"bogus"`},
	{`{"requestId":18446744073709551615,"bogus":1}`, ErrUnknownPayload, 1<<64 - 1, `"bogus"`},
	{`{"requestId":1e1,"bogus":1}`, ErrUnknownPayload, 10, `"bogus"`},
	{`{"request\u0049d":"8","bogus":1}`, ErrUnknownPayload, 8, `"bogus"`},
	{` { "requestId" : "9" , "action" : "get_profile" , "x" : [ "}" ] } `, ErrUnknownPayload, 9, `"x"`},
	{`{"requestId":"5","requestId":"5","action":"get_profile"}`, ErrMalformed, 5, `"requestId" given twice`},
	{`{"requestId":"5","request_id":"5","action":"get_profile"}`, ErrMalformed, 5, `"request_id" given twice`},
	{`{"requestId":"5","action":"get_profile","action":"buy_item"}`, ErrMalformed, 5, `"action" given twice`},
	// Ids that cannot be read: 0.
	{`{"requestId":"5","requestId":"6","action":"get_profile"}`, ErrMalformed, 0, `given twice`},
	{`{"requestId":"0001","action":"get_profile"}`, ErrMalformed, 0, `requestId`},
	{`{"requestId":"18446744073709551616","action":"get_profile"}`, ErrMalformed, 0, `requestId`},
	{`{"requestId":-5,"action":"get_profile"}`, ErrMalformed, 0, `requestId`},
	{`{"requestId":"5","action":"get_profile","request":{`, ErrMalformed, 0, `unexpected end`},
	{`{"requestId":"5","action":"get_profile"} x`, ErrMalformed, 0, `invalid character`},
	{`["requestId",5]`, ErrMalformed, 0, `JSON object`},
	{`{`, ErrMalformed, 0, ``},
	{`{"action":"get_profile"}`, ErrNoRequestID, 0, `request_id is required`},
	{`{"requestId":"0","action":"get_profile"}`, ErrNoRequestID, 0, `request_id is required`},
	{`{"requestId":"1"}`, ErrUnknownAction, 1, `no action`},
}

func TestDecodeClientJSON(t *testing.T) {
	for _, c := range jsonCases {
		_, _, err := jsonCodec.DecodeClient([]byte(c.in))
		checkRefusal(t, c.in, err, c.want, c.id, c.detail)
	}
}

func checkRefusal(t *testing.T, in string, err, want error, id uint64, detail string) {
	t.Helper()
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, want) {
		t.Errorf("%q: err = %v, want a FrameError of %v", in, err, want)
		return
	}
	if fe.RequestID != id {
		t.Errorf("%q: request id %d, want %d", in, fe.RequestID, id)
	}
	if !strings.Contains(fe.Detail, detail) || strings.Contains(fe.Detail, "proto:") || strings.Contains(fe.Detail, "levee.v2") {
		t.Errorf("%q: detail %q, want it to say %q and no internals", in, fe.Detail, detail)
	}
}

// Tags of ClientFrame's fields, for hand-made binary frames.
var (
	tagAction  = protowire.AppendTag(nil, 5, protowire.BytesType)
	tagRequest = protowire.AppendTag(nil, 6, protowire.BytesType)
)

// binaryCases are refused binary frames.
var binaryCases = []struct {
	name   string
	in     []byte
	want   error
	id     uint64
	detail string
}{
	{"unknown field", cat(frameBytes(3), []byte{0xfa, 0x01, 0x00}), ErrUnknownPayload, 3, "field 31"},
	{"truncated request", cat(frameBytes(4), tagRequest, []byte{0x05, 0x0a}), ErrMalformed, 4, "invalid wire-format"},
	{"invalid UTF-8 in the action", cat(frameBytes(5), tagAction, []byte{0x01, 0xff}), ErrMalformed, 5, "UTF-8"},
	{"unknown action", mustMarshal(&leveev2.ClientFrame{RequestId: 6, Action: "chat"}), ErrUnknownAction, 6, `unknown action "chat"`},
	{"no action", frameBytes(9), ErrUnknownAction, 9, "no action"},
	{"request not the action's", mustMarshal(&leveev2.ClientFrame{RequestId: 10, Action: arena.ActionBuyItem, Request: []byte{0x0a, 0x01, 0xff}}), ErrBadRequest, 10, "UTF-8"},
	{"request truncated", mustMarshal(&leveev2.ClientFrame{RequestId: 11, Action: arena.ActionBuyItem, Request: []byte{0x0a, 0x05}}), ErrBadRequest, 11, "request"},
	{"request too large", mustMarshal(buyFrame(12, strings.Repeat("x", 300), 1)), ErrBadRequest, 12, "at most 256"},
	{"the last id before the damage", cat(frameBytes(6), frameBytes(7), tagRequest), ErrMalformed, 7, ""},
	{"id after the damage", cat(tagRequest, []byte{0x7f}, frameBytes(8)), ErrMalformed, 0, ""},
	{"garbage", []byte{0xff, 0xff}, ErrMalformed, 0, ""},
	{"no id", mustMarshal(&leveev2.ClientFrame{Action: arena.ActionGetProfile}), ErrNoRequestID, 0, "request_id"},
}

func TestDecodeClientBinary(t *testing.T) {
	for _, c := range binaryCases {
		_, _, err := binCodec.DecodeClient(c.in)
		checkRefusal(t, c.name, err, c.want, c.id, c.detail)
	}
	if _, _, err := binCodec.DecodeClient(make([]byte, MaxFrame+1)); !errors.Is(err, ErrMalformed) {
		t.Errorf("oversized: %v", err)
	}
	small := Codec{Game: arenaTypes, MaxFrame: 16}
	if _, _, err := small.DecodeClient(mustMarshal(buyFrame(1, "dragon_skin", 1))); !errors.Is(err, ErrMalformed) {
		t.Errorf("over the codec's MaxFrame: %v", err)
	}
}

// TestNoGameKnowsNoAction: a codec without a game refuses every action.
func TestNoGameKnowsNoAction(t *testing.T) {
	for _, c := range []Codec{{}, {JSON: true}} {
		b, _ := binCodec.EncodeClient(buyFrame(3, "sword", 1))
		if c.JSON {
			b, _ = jsonCodec.EncodeClient(buyFrame(3, "sword", 1))
		}
		if _, _, err := c.DecodeClient(b); !errors.Is(err, ErrUnknownAction) {
			t.Errorf("json=%v: %v", c.JSON, err)
		}
	}
}

// TestRefusedFrameKeepsItsID: the frame returned with a refusal carries the
// id, so that a caller that only looks at the frame answers the right id.
func TestRefusedFrameKeepsItsID(t *testing.T) {
	f, _, err := jsonCodec.DecodeClient([]byte(`{"requestId":"12","action":"buy_item","request":{"quantity":1.5}}`))
	if err == nil || f.GetRequestId() != 12 {
		t.Fatalf("frame %v, err %v: want id 12 and an error", f, err)
	}
	if f, _, err := jsonCodec.DecodeClient([]byte(`{`)); err == nil || f != nil {
		t.Fatalf("frame %v, err %v: want no frame and an error", f, err)
	}
}

func frameBytes(id uint64) []byte { return mustMarshal(&leveev2.ClientFrame{RequestId: id}) }

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// FuzzDecodeClientFrame: for any input DecodeClient does not panic; an
// accepted frame has an id and a declared action, its request decodes as
// the action's request message, and it re-encodes to itself; a refused one
// is a FrameError with a detail fit to show; and whenever the reference
// readers of wiretest can read the frame's request id, the decoder reports
// that same id, accepted or not.
func FuzzDecodeClientFrame(f *testing.F) {
	f.Add(mustMarshal(&leveev2.ClientFrame{RequestId: 1, Action: arena.ActionGetProfile}), false)
	f.Add(mustMarshal(buyFrame(2, "potion", 3)), false)
	f.Add([]byte(`{"requestId":"1","action":"start_battle","request":{"battleId":"b","units":3,"ticks":10}}`), true)
	f.Add([]byte{0xff, 0xff}, false)
	for _, c := range jsonCases {
		f.Add([]byte(c.in), true)
	}
	for _, c := range binaryCases {
		f.Add(c.in, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, json bool) {
		if len(data) > MaxFrame {
			return // the gate's read limit closes the connection first (1009)
		}
		c := binCodec
		if json {
			c = jsonCodec
		}
		want := wiretest.RequestID(data, json)
		fr, req, err := c.DecodeClient(data)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FrameError", err)
			}
			if want != 0 && fe.RequestID != want {
				t.Fatalf("refused with id %d, the frame's id is %d (%v)", fe.RequestID, want, err)
			}
			if fr.GetRequestId() != fe.RequestID {
				t.Fatalf("frame id %d, error id %d", fr.GetRequestId(), fe.RequestID)
			}
			if fe.Detail == "" || !utf8.ValidString(fe.Detail) || len(fe.Detail) > maxDetail+len("…")+80 {
				t.Fatalf("detail %q", fe.Detail)
			}
			return
		}
		typ, _, ok := arenaTypes.Request(fr.GetAction())
		if fr.GetRequestId() == 0 || !ok || req == nil || req.ProtoReflect().Type() != typ {
			t.Fatalf("accepted invalid frame %v (request %v)", fr, req)
		}
		if want != 0 && fr.GetRequestId() != want {
			t.Fatalf("accepted with id %d, the frame's id is %d", fr.GetRequestId(), want)
		}
		// An accepted frame re-encodes and decodes to the same frame and
		// request.
		out, err := c.EncodeClient(fr)
		if err != nil {
			t.Fatal(err)
		}
		again, req2, err := c.DecodeClient(out)
		if err != nil || !proto.Equal(req, req2) {
			t.Fatalf("re-decode: %v %v %v", again, req2, err)
		}
		if !proto.Equal(fr, again) {
			t.Fatalf("re-decode: %v, want %v", again, fr)
		}
	})
}
