package codec

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// TestAgreesWithTheGate: the SDK's codec and the gate's (internal/wire) are
// two implementations of one wire format. Every frame one side writes, the
// other reads back as the same frame, on both subprotocols. A change to
// either that the other does not follow fails here, not in a player's
// client.
func TestAgreesWithTheGate(t *testing.T) {
	def := arena.Game().Def()
	clientFrames := []*leveev2.ClientFrame{
		{RequestId: 7, Action: arena.ActionBuyItem, Criticality: leveev2.Criticality_CRITICALITY_CRITICAL, TimeoutMs: 4750, IssuedAtMs: 1700000000123,
			Request: mustMarshal(t, &arenapb.BuyItemRequest{ItemId: "potion", Quantity: 2})},
		{RequestId: 8, Action: arena.ActionGetProfile},
		{RequestId: 9, Action: arena.ActionGetProfile, Request: mustMarshal(t, &arenapb.GetProfileRequest{PlayerId: "bob"})},
		{RequestId: 1 << 60, Action: arena.ActionStartBattle,
			Request: mustMarshal(t, &arenapb.StartBattleRequest{BattleId: "b-1", Units: 8, Ticks: 200})},
	}
	actionOf := map[uint64]string{}
	for _, f := range clientFrames {
		actionOf[f.GetRequestId()] = f.GetAction()
	}
	serverFrames := []*leveev2.ServerFrame{
		{RequestId: 7, Replayed: true, Version: 4, Backpressure: &leveev2.Backpressure{Ratio: 0.5},
			Payload: &leveev2.ServerFrame_Reply{Reply: mustMarshal(t, &arenapb.BuyItemReply{GoldSpent: 20})}},
		{RequestId: 8, Version: 3, Payload: &leveev2.ServerFrame_Reply{Reply: mustMarshal(t, &arenapb.ProfileReply{Player: arena.NewPlayer("ann")})}},
		{RequestId: 1 << 60, Payload: &leveev2.ServerFrame_Error{Error: &leveev2.Error{
			Code: leveev2.ErrorCode_ERROR_CODE_REJECTED, Message: "not enough gold", Reason: "insufficient_gold", RetryAfterMs: 0}}},
		{RequestId: 9, Payload: &leveev2.ServerFrame_Error{Error: &leveev2.Error{
			Code: leveev2.ErrorCode_ERROR_CODE_BUSY, Message: "try later", RetryAfterMs: 1500}}},
		{Payload: &leveev2.ServerFrame_Welcome{Welcome: &leveev2.Welcome{
			PlayerId: "ann", Shard: 3, Version: 1, State: mustMarshal(t, arena.NewPlayer("ann"))}}},
		{Payload: &leveev2.ServerFrame_Queue{Queue: &leveev2.QueueStatus{
			Position: 12, EtaMs: 3000, ReleaseRate: 4.5, LineLength: 40, Ticket: "t-1", GraceMs: 30000, Mode: "paced"}}},
		{Payload: &leveev2.ServerFrame_Admitted{Admitted: &leveev2.Admitted{WaitedMs: 2500}}},
	}

	for _, sub := range []string{ProtoSubprotocol, JSONSubprotocol} {
		sdk, ok := ForSubprotocol(sub, def)
		gate, ok2 := wire.ForSubprotocol(sub)
		if !ok || !ok2 {
			t.Fatalf("%s: a codec lacks the subprotocol (sdk %v, gate %v)", sub, ok, ok2)
		}
		gate.Game = wire.ForGame(def)

		for _, f := range clientFrames {
			data, err := sdk.EncodeClient(f)
			if err != nil {
				t.Fatalf("%s: sdk encodes %v: %v", sub, f, err)
			}
			got, _, err := gate.DecodeClient(data)
			if err != nil || !proto.Equal(got, f) {
				t.Errorf("%s: the gate reads the SDK's %s as %v (%v), want %v", sub, data, got, err, f)
			}
			data, err = gate.EncodeClient(f)
			if err != nil {
				t.Fatalf("%s: gate codec encodes %v: %v", sub, f, err)
			}
			back, err := sdk.DecodeClient(data)
			if err != nil || !proto.Equal(back, f) {
				t.Errorf("%s: the SDK reads wire's %s as %v (%v), want %v", sub, data, back, err, f)
			}
		}

		of := func(id uint64) string { return actionOf[id] }
		for _, f := range serverFrames {
			action := ""
			if f.GetReply() != nil {
				action = actionOf[f.GetRequestId()]
			}
			data, err := gate.EncodeServer(f, action)
			if err != nil {
				t.Fatalf("%s: gate encodes %v: %v", sub, f, err)
			}
			got, err := sdk.DecodeServer(data, of)
			if err != nil || !proto.Equal(got, f) {
				t.Errorf("%s: the SDK reads the gate's %s as %v (%v), want %v", sub, data, got, err, f)
			}
			data, err = sdk.EncodeServer(f, action)
			if err != nil {
				t.Fatalf("%s: sdk codec encodes %v: %v", sub, f, err)
			}
			back, err := gate.DecodeServer(data, of)
			if err != nil || !proto.Equal(back, f) {
				t.Errorf("%s: wire reads the SDK codec's %s as %v (%v), want %v", sub, data, back, err, f)
			}
		}
	}
}
