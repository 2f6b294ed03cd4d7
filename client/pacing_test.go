package client_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/client/pacer"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// pacerFast hardly paces at all, for tests about other things.
var pacerFast = pacer.Config{Rate: 10000, MinRate: 1000}

func profileReply(f *leveev2.ClientFrame, ratio float64) *leveev2.ServerFrame {
	r := clienttest.Reply(f, &arenapb.ProfileReply{Player: &arenapb.Player{Id: "p"}})
	r.Backpressure = &leveev2.Backpressure{Ratio: ratio}
	return r
}

// The pacer's rate follows the backpressure ratio of the replies: ratio 1
// slows a 10/s client to 1.5/s (15 %), ratio 0 brings it back at once.
func TestPacingFollowsPressure(t *testing.T) {
	clk := clock.NewFake(time.Now())
	got := make(chan *leveev2.ClientFrame, 8)
	ratios := []float64{1, 0, 0}
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		return profileReply(f, ratios[n])
	}))
	c := dial(t, g, "ann", client.Options{Clock: clk, Pacer: pacer.Config{Rate: 10}})
	if r := c.PaceRate(); r != 10 {
		t.Fatalf("base rate %v, want 10", r)
	}
	// A goes at once (a leaky bucket starts empty) and brings ratio 1.
	if _, err := getProfile(ctx5s(t), c, ""); err != nil {
		t.Fatal(err)
	}
	next(t, got)
	if r := c.PaceRate(); math.Abs(r-1.5) > 1e-9 {
		t.Fatalf("rate at ratio 1 = %v, want 1.5 (15 %% of 10)", r)
	}
	// B waits one slow interval, 666.67 ms.
	res := make(chan error, 1)
	go func() { _, err := getProfile(ctx5s(t), c, ""); res <- err }()
	testwait.Until(t, "B to wait in the pacer", func() bool { return clk.Waiters() == 1 })
	clk.Advance(666 * time.Millisecond)
	nothing(t, got)
	clk.Advance(time.Millisecond)
	next(t, got)
	if err := result(t, res); err != nil {
		t.Fatal(err)
	}
	if r := c.PaceRate(); r != 10 {
		t.Fatalf("rate after ratio 0 = %v, want 10", r)
	}
	// C waits a fast interval after B's slot, 100 ms.
	go func() { _, err := getProfile(ctx5s(t), c, ""); res <- err }()
	testwait.Until(t, "C to wait in the pacer", func() bool { return clk.Waiters() == 1 })
	clk.Advance(99 * time.Millisecond)
	nothing(t, got)
	clk.Advance(time.Millisecond)
	next(t, got)
	if err := result(t, res); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.PacerWaits != 2 || st.PacerWaited < 765*time.Millisecond || st.PacerWaited > 768*time.Millisecond {
		t.Fatalf("stats = %+v", st)
	}
}

// A busy refusal without hints counts as full pressure; the retry's reply,
// with its ratio, sets the rate again.
func TestPacingBusyWithoutHints(t *testing.T) {
	clk := clock.NewFake(time.Now())
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		if n == 0 {
			return busy(f, 100)
		}
		return profileReply(f, 0.5)
	}))
	c := dial(t, g, "ben", client.Options{Clock: clk, Rand: constRand(0), Pacer: pacer.Config{Rate: 10}})
	res := make(chan error, 1)
	go func() { _, err := getProfile(ctx5s(t), c, ""); res <- err }()
	next(t, got)
	testwait.Until(t, "the retry timer", func() bool { return clk.Waiters() == 1 })
	if r := c.PaceRate(); math.Abs(r-1.5) > 1e-9 {
		t.Fatalf("rate after a bare BUSY = %v, want 1.5", r)
	}
	// The retry waits 100 ms for retry_after, then the pacer's slot at
	// 666.67 ms.
	clk.Advance(100 * time.Millisecond)
	testwait.Until(t, "the retry to wait in the pacer", func() bool { return clk.Waiters() == 1 })
	clk.Advance(566 * time.Millisecond)
	nothing(t, got)
	clk.Advance(time.Millisecond)
	next(t, got)
	if err := result(t, res); err != nil {
		t.Fatal(err)
	}
	if r, want := c.PaceRate(), 10*(1-0.85*0.5); math.Abs(r-want) > 1e-9 {
		t.Fatalf("rate at ratio 0.5 = %v, want %v", r, want)
	}
}

// A full local queue: a CRITICAL purchase evicts a waiting SHEDDABLE
// request, which fails locally; a SHEDDABLE one finds no room at all.
func TestPacingEvictsSheddableForCritical(t *testing.T) {
	clk := clock.NewFake(time.Now())
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, func(c *clienttest.Conn) {
		for {
			f, err := c.Recv()
			if err != nil {
				return
			}
			got <- f
			if buyReq(f) != nil {
				_ = c.Send(bought(f))
			} else {
				_ = c.Send(profileReply(f, 0))
			}
		}
	})
	c := dial(t, g, "cat", client.Options{Clock: clk, Pacer: pacer.Config{Rate: 1, Capacity: 1}})
	if _, err := getProfile(ctx5s(t), c, ""); err != nil { // takes the open slot
		t.Fatal(err)
	}
	next(t, got)
	sheddable := func() *leveev2.ClientFrame {
		f := frame(arena.ActionGetProfile, &arenapb.GetProfileRequest{})
		f.Criticality = leveev2.Criticality_CRITICALITY_SHEDDABLE
		return f
	}
	resB := make(chan error, 1)
	go func() { _, err := c.Do(ctx5s(t), sheddable()); resB <- err }()
	testwait.Until(t, "B to wait in the pacer", func() bool { return clk.Waiters() == 1 })
	resC := make(chan error, 1)
	go func() { _, err := buyItem(ctx5s(t), c, "potion", 1); resC <- err }()

	errB := result(t, resB)
	var le *client.LocalError
	if !errors.As(errB, &le) || !errors.Is(errB, client.ErrEvicted) || !errors.Is(errB, pacer.ErrEvicted) ||
		le.Criticality != leveev2.Criticality_CRITICALITY_SHEDDABLE || client.AsError(errB) != nil || !client.IsLocal(errB) {
		t.Fatalf("evicted request: %v", errB)
	}
	// The queue holds the purchase: a sheddable request cannot get in,
	// and neither can a DEFAULT one (WithCriticality on a purchase).
	_, errD := c.Do(ctx5s(t), sheddable())
	if !errors.Is(errD, client.ErrQueueFull) || !client.IsLocal(errD) {
		t.Fatalf("request into the full queue: %v", errD)
	}
	_, errE := buyItem(client.WithCriticality(ctx5s(t), leveev2.Criticality_CRITICALITY_DEFAULT), c, "potion", 1)
	if !errors.Is(errE, client.ErrQueueFull) || errE.Error() == "" {
		t.Fatalf("default purchase into the full queue: %v", errE)
	}
	nothing(t, got)
	testwait.Until(t, "C to hold the pacer's timer", func() bool { return clk.Waiters() == 1 })
	clk.Advance(time.Second)
	if f := next(t, got); buyReq(f) == nil || f.GetCriticality() != leveev2.Criticality_CRITICALITY_CRITICAL {
		t.Fatalf("sent %v", f)
	}
	if err := result(t, resC); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Evicted != 1 || st.QueueFull != 2 || st.Sent != 2 || st.PacerWaits != 2 || st.Requests != 5 {
		t.Fatalf("stats = %+v", st)
	}
}

// NoPacing: requests go at once whatever the rate and pressure.
func TestNoPacing(t *testing.T) {
	clk := clock.NewFake(time.Now())
	g := newGate(t, scripted(nil, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame { return profileReply(f, 1) }))
	c := dial(t, g, "dan", client.Options{Clock: clk, NoPacing: true, Pacer: pacer.Config{Rate: 1}})
	for range 5 {
		if _, err := getProfile(ctx5s(t), c, ""); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Sent != 5 || st.PacerWaits != 0 || c.PaceRate() != 0 || clk.Waiters() != 0 {
		t.Fatalf("stats = %+v, rate %v", st, c.PaceRate())
	}
}

func TestPriorityOf(t *testing.T) {
	for crit, want := range map[leveev2.Criticality]pacer.Priority{
		leveev2.Criticality_CRITICALITY_CRITICAL:    pacer.Critical,
		leveev2.Criticality_CRITICALITY_DEFAULT:     pacer.Default,
		leveev2.Criticality_CRITICALITY_UNSPECIFIED: pacer.Default,
		leveev2.Criticality_CRITICALITY_SHEDDABLE:   pacer.Sheddable,
	} {
		if got := client.PriorityOf(crit); got != want {
			t.Errorf("PriorityOf(%v) = %v, want %v", crit, got, want)
		}
	}
}

func TestInvalidOptions(t *testing.T) {
	g := newGate(t, arenaPlay)
	for _, o := range []client.Options{
		{Pacer: pacer.Config{Factor: 2}},
		{Retry: backoff.Policy{Base: -1}},
		{Reconnect: backoff.Reconnect{Spread: -1}},
	} {
		if _, err := client.Dial(ctx5s(t), g.URL(), mint(t, "eve"), o); !errors.Is(err, client.ErrInvalidOptions) {
			t.Errorf("%+v: err = %v", o, err)
		}
	}
}
