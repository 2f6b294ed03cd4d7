package battle

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// benchAdmission returns an admission (cap 16) whose shedder has learned a
// limit of 8 (40 completions of 20 ms in a 100 ms bucket), with inFlight
// requests of criticality crit admitted and still running.
func benchAdmission(b *testing.B, inFlight int, crit priority.Class) (*admission, time.Time) {
	cfg := DefaultConfig()
	cfg.MaxInFlight = 16
	a, err := newAdmission(cfg)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	a.shedder.Stats(t0) // the window starts at t0
	for range 40 {
		s, why := a.admit(t0.Add(30*time.Millisecond), 0, priority.Default)
		if why != admitted {
			b.Fatal("refused while learning")
		}
		s.done(t0.Add(50 * time.Millisecond))
	}
	now := t0.Add(100 * time.Millisecond)
	if got := a.shedder.Limit(now); got != 8 {
		b.Fatalf("limit = %v, want 8", got)
	}
	for range inFlight {
		if _, why := a.admit(now, 0, crit); why != admitted {
			b.Fatal("refused while filling")
		}
	}
	return a, now
}

// BenchmarkAdmit measures the battle tier's whole admission decision (the
// adaptive shedder, then the hard in-flight cap; the throttle's wait is not
// part of it) with the slot released again by cancel. The time moves on by
// 100 ns a call, so the window rolls as it would at 10 M decisions a second.
// admit-done releases with done instead, which records a completion in the
// shedder's window under its lock.
func BenchmarkAdmit(b *testing.B) {
	for _, bc := range []struct {
		name     string
		inFlight int
		heldCrit priority.Class
		cpu      float64
		crit     priority.Class
		want     refusal
		done     bool
	}{
		{"cpu-low-admit", 4, priority.Default, 0.5, priority.Default, admitted, false},
		{"cpu-high-admit", 4, priority.Default, 0.95, priority.Default, admitted, false},
		{"cpu-high-shed", 12, priority.Default, 0.95, priority.Default, refusedAdaptive, false},
		{"cpu-high-shed-sheddable", 7, priority.Default, 0.95, priority.Sheddable, refusedAdaptive, false},
		{"cpu-high-critical-admit", 12, priority.Default, 0.95, priority.Critical, admitted, false},
		{"cap-refuses-critical", 16, priority.Critical, 0.95, priority.Critical, refusedInFlightCap, false},
		{"admit-done", 0, priority.Default, 0.95, priority.Default, admitted, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a, now := benchAdmission(b, bc.inFlight, bc.heldCrit)
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(100 * time.Nanosecond)
				s, why := a.admit(now, bc.cpu, bc.crit)
				if why != bc.want {
					b.Fatalf("refusal = %d, want %d", why, bc.want)
				}
				if why == admitted {
					if bc.done {
						s.done(now)
					} else {
						s.cancel()
					}
				}
			}
		})
	}
}

// BenchmarkHandle measures one request through the tier's handler, as the
// gRPC server would run it, without the transport: the JobRequest decoded
// from its bytes, the job looked up and its request decoded, the throttle's
// check, admission, a battle of arena's simulate job, and the reply encoded
// into the JobReply's bytes. tiny_1x1 (one unit a side, one tick) is almost
// all the tier's own work; small_4x50 is a small real battle. The CPU
// reading is low, so nothing is throttled or shed. Compare with the old
// tree's Simulate handler over the same battles (the report of issue 21).
func BenchmarkHandle(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Game = arena.Game()
	cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	s, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.grpcLis.Close(); s.opsLis.Close() })
	s.cpu = func() float64 { return 0.1 }
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(priority.Key, priority.Default.String()))
	for _, c := range []struct {
		name         string
		units, ticks int
	}{{"tiny_1x1", 1, 1}, {"small_4x50", 4, 50}} {
		b.Run(c.name, func(b *testing.B) {
			wire, err := proto.Marshal(jobRequest(b, sturdyRequest(c.units, c.ticks, 42)))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				var in leveev2.JobRequest
				if err := proto.Unmarshal(wire, &in); err != nil {
					b.Fatal(err)
				}
				rep, err := s.handle(ctx, &in)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := proto.Marshal(rep); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
