package wire

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// randomShared is a shared status part with each field set or left zero
// at random, over the whole range of its type.
func randomShared(r *rand.Rand) *leveev2.QueueStatus {
	s := &leveev2.QueueStatus{}
	if r.IntN(4) > 0 {
		s.ReleaseRate = [...]float64{r.Float64() * 1000, float64(r.IntN(1000)), math.MaxFloat64, math.SmallestNonzeroFloat64}[r.IntN(4)]
	}
	if r.IntN(4) > 0 {
		s.LineLength = randomUint(r)
	}
	if r.IntN(4) > 0 {
		s.GraceMs = r.Uint32()
	}
	if r.IntN(4) > 0 {
		s.Mode = [...]string{"queueing", "paced", "closed", "open", "\u00e9t\u00e9 \"quoted\""}[r.IntN(5)]
	}
	if r.IntN(8) == 0 {
		s.Ticket = "t1.abc.def.YWxpY2U.1700000000.sig-_"
	}
	return s
}

// randomUint is 0, a small number or any uint64, at random.
func randomUint(r *rand.Rand) uint64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return uint64(r.IntN(200))
	case 2:
		return math.MaxUint64 - uint64(r.IntN(3))
	}
	return r.Uint64() >> r.UintN(64)
}

// Append's frames decode to what EncodeServer would have sent, in both
// codecs, over many random statuses.
func TestStatusTemplateMatchesEncodeServer(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []Codec{{}, {JSON: true}} {
		var buf []byte
		for i := range 5000 {
			shared := randomShared(r)
			tmpl, err := c.StatusTemplate(shared)
			if err != nil {
				t.Fatalf("json=%v: %v: %v", c.JSON, shared, err)
			}
			for range 4 {
				pos, eta := randomUint(r), randomUint(r)
				buf = tmpl.Append(buf[:0], pos, eta)
				got, err := c.DecodeServer(buf, nil)
				if err != nil {
					t.Fatalf("json=%v, case %d: %q does not decode: %v", c.JSON, i, buf, err)
				}
				want := proto.Clone(shared).(*leveev2.QueueStatus)
				want.Position, want.EtaMs = pos, eta
				wantFrame := &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Queue{Queue: want}}
				if !proto.Equal(got, wantFrame) {
					t.Fatalf("json=%v, case %d: %q decodes to %v, want %v", c.JSON, i, buf, got, wantFrame)
				}
			}
		}
	}
}

func TestStatusTemplateRefusesPerPlayerFields(t *testing.T) {
	for _, c := range []Codec{{}, {JSON: true}} {
		for _, s := range []*leveev2.QueueStatus{{Position: 1}, {EtaMs: 1, Mode: "paced"}} {
			if _, err := c.StatusTemplate(s); !errors.Is(err, ErrStatusTemplate) {
				t.Errorf("json=%v, %v: err %v, want ErrStatusTemplate", c.JSON, s, err)
			}
		}
	}
}

// BenchmarkStatusTemplateAppend is the per-player encoding of a push.
func BenchmarkStatusTemplateAppend(b *testing.B) {
	shared := &leveev2.QueueStatus{ReleaseRate: 97.5, LineLength: 16000, GraceMs: 60000, Mode: "paced"}
	for _, c := range []Codec{{}, {JSON: true}} {
		b.Run(map[bool]string{false: "proto", true: "json"}[c.JSON], func(b *testing.B) {
			tmpl, err := c.StatusTemplate(shared)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			var pos uint64
			for b.Loop() {
				pos++
				buf = tmpl.Append(buf[:0], pos, pos*10)
			}
		})
	}
}
