package gate

import (
	"testing"

	"levee/internal/wire"
)

// BenchmarkRequestRoundTrip measures one player's request through the gate
// to an in-process fake logic and back, one at a time.
func BenchmarkRequestRoundTrip(b *testing.B) {
	g := startGate(b, nil, startFakeLogic(b))
	c, _ := g.connect(b, "bench", wire.ProtoSubprotocol)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := uint64(i + 1)
		c.send(profileFrame(id))
		if f := c.recv(); f.GetRequestId() != id {
			b.Fatalf("reply %v", f)
		}
	}
}
