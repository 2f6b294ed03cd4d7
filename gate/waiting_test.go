package gate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/wire"
)

// checkStatusEnc checks that the walker's encoding of one push decodes,
// with the codec's own decoder, to exactly the frame statusFrame makes
// (without a ticket: only a connection's first status has one).
func checkStatusEnc(t *testing.T, enc *statusEnc, codec wire.Codec, pos int, eta time.Duration) {
	t.Helper()
	data, err := enc.frame(codec, pos, etaMillis(eta))
	if err != nil {
		t.Fatalf("json=%v: %v", codec.JSON, err)
	}
	got, err := codec.DecodeServer(data, nil)
	if err != nil {
		t.Fatalf("json=%v: %q does not decode: %v", codec.JSON, data, err)
	}
	want := statusFrame(pos, eta, &enc.info, "")
	if !proto.Equal(got, want) {
		t.Fatalf("json=%v, pos %d, eta %v, info %+v:\n%q decodes to %v,\nwant %v", codec.JSON, pos, eta, enc.info, data, got, want)
	}
}

var codecs = []wire.Codec{{}, {JSON: true}}

// randomInfo is a walk's shared part as pushInfo can hold it.
func randomInfo(r *rand.Rand) pushInfo {
	return pushInfo{
		rate:    [...]float64{0, r.Float64() * 2000, float64(r.IntN(1000)), 1.0 / 3}[r.IntN(4)],
		length:  [...]uint64{0, uint64(r.IntN(100)), r.Uint64N(queueMax)}[r.IntN(3)],
		graceMs: [...]uint32{0, 60_000, r.Uint32()}[r.IntN(3)],
		mode:    lineModes[r.IntN(len(lineModes))],
	}
}

const queueMax = 10_000_000 // queue.MaxMaxLength

// The encoding the walker uses (the shared part once per walk and codec)
// gives the frame statusFrame would have, for many random walks and
// players, in both codecs, a walk's template reused across its players.
func TestStatusEncMatchesStatusFrame(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	var enc statusEnc
	for range 2000 {
		enc.reset(randomInfo(r))
		for range 8 {
			pos := [...]int{1, r.IntN(200) + 1, r.IntN(queueMax) + 1}[r.IntN(3)]
			eta := [...]time.Duration{0, queueNoETA, time.Duration(r.Int64N(int64(1000 * time.Hour))), time.Duration(r.IntN(5000))}[r.IntN(4)]
			for _, c := range codecs {
				checkStatusEnc(t, &enc, c, pos, eta)
			}
		}
	}
}

// queueNoETA is an ETA statusFrame sends as 0 (unknown).
const queueNoETA = -time.Nanosecond

// FuzzStatusEnc is TestStatusEncMatchesStatusFrame over the fuzzer's values.
func FuzzStatusEnc(f *testing.F) {
	f.Add(1.5, uint64(16000), uint32(60_000), uint8(2), 1, int64(time.Second))
	f.Add(0.0, uint64(0), uint32(0), uint8(0), 0, int64(0))
	f.Add(math.MaxFloat64, uint64(math.MaxUint64), uint32(math.MaxUint32), uint8(255), math.MaxInt32, int64(math.MaxInt64))
	f.Add(1e-300, uint64(1), uint32(1), uint8(1), 7, int64(-1))
	f.Fuzz(func(t *testing.T, rate float64, length uint64, graceMs uint32, mode uint8, pos int, eta int64) {
		if math.IsNaN(rate) || math.IsInf(rate, 0) || pos < 0 {
			t.Skip() // not a status the line makes: rates are finite, positions positive
		}
		var enc statusEnc
		enc.reset(pushInfo{rate: rate, length: length, graceMs: graceMs, mode: lineModes[int(mode)%len(lineModes)]})
		for _, c := range codecs {
			checkStatusEnc(t, &enc, c, pos, time.Duration(eta))
		}
	})
}
