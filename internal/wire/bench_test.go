package wire

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// BenchmarkEncodeReply is the gate's encoding of one reply to a purchase
// (the reply carries the player's state) on each subprotocol.
func BenchmarkEncodeReply(b *testing.B) {
	p := arena.NewPlayer("bench-player")
	p.Inventory["potion"] = 3
	f := &leveev2.ServerFrame{RequestId: 12345, Version: 7, Backpressure: &leveev2.Backpressure{QueueDepth: 3, Ratio: 0.25},
		Payload: &leveev2.ServerFrame_Reply{Reply: mustMarshal(&arenapb.BuyItemReply{Player: p, GoldSpent: 10})}}
	for _, c := range []Codec{binCodec, jsonCodec} {
		name := ProtoSubprotocol
		if c.JSON {
			name = JSONSubprotocol
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.EncodeServer(f, arena.ActionBuyItem); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestJSONHeadMatchesProtojson: a JSON reply frame, whose head is written
// by hand, decodes (protojson) to the frame it encodes, over random heads;
// and a ratio JSON has no number for is encoded by protojson instead.
func TestJSONHeadMatchesProtojson(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	reply := mustMarshal(&arenapb.BuyItemReply{Player: arena.NewPlayer("p"), GoldSpent: 10})
	ratios := []float64{0, 0.25, 1, 1e-7, 1e21, 123456.789, math.SmallestNonzeroFloat64, math.MaxFloat64, -0.5}
	for range 3000 {
		f := &leveev2.ServerFrame{RequestId: randomUint(r), Replayed: r.IntN(2) == 0, Version: randomUint(r),
			Payload: &leveev2.ServerFrame_Reply{Reply: reply}}
		if r.IntN(4) > 0 {
			f.Backpressure = &leveev2.Backpressure{QueueDepth: uint32(randomUint(r)), Ratio: ratios[r.IntN(len(ratios))], RetryAfterMs: uint32(randomUint(r))}
		}
		b, err := jsonCodec.EncodeServer(f, arena.ActionBuyItem)
		if err != nil {
			t.Fatal(err)
		}
		got, err := jsonCodec.DecodeServer(b, func(uint64) string { return arena.ActionBuyItem })
		if err != nil || !sameFrame(got, f) {
			t.Fatalf("%s decodes to %v (%v), want %v", b, got, err, f)
		}
	}
	f := &leveev2.ServerFrame{RequestId: 1, Backpressure: &leveev2.Backpressure{Ratio: math.NaN()}, Payload: &leveev2.ServerFrame_Reply{Reply: reply}}
	b, err := jsonCodec.EncodeServer(f, arena.ActionBuyItem)
	if err != nil || !strings.Contains(string(b), `"NaN"`) {
		t.Fatalf("NaN ratio: %s %v", b, err)
	}
}
