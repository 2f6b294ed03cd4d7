package queue

import (
	"math"
	"testing"
	"time"
)

// FuzzReleaseExactOverLongRun: 1,000 per 10 s, Release called at irregular
// steps the input chooses (then a seeded stream) for 10 simulated minutes
// with the line never empty, hands out exactly 60,000 tickets, in arrival
// order, and no call hands out more than the step earned plus one. The
// seed corpus is the former fixed-seed run, PCG(4, 4).
func FuzzReleaseExactOverLongRun(f *testing.F) {
	f.Add(uint64(4), uint64(4), []byte(nil))
	f.Add(uint64(5), uint64(5), []byte{0, 0, 0, 255, 1, 49, 200, 0, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, seed1, seed2 uint64, ops []byte) {
		releaseSteps(t, newSteps(seed1, seed2, ops))
	})
}

func releaseSteps(t *testing.T, rnd *steps) {
	q := newQ(t, paced)
	fill(t, q, 70_000, t0)
	var total int
	var lastSeq uint64
	prev := t0
	for now := t0; ; {
		step := time.Duration(1+rnd.IntN(300)) * time.Millisecond
		if rnd.IntN(50) == 0 {
			step = time.Duration(1+rnd.IntN(3000)) * time.Millisecond // an odd long gap
		}
		now = now.Add(step)
		if now.After(at(10 * time.Minute)) {
			now = at(10 * time.Minute)
		}
		got := q.Release(now)
		if limit := int(math.Floor(now.Sub(prev).Seconds()*100)) + 1; len(got) > limit {
			t.Fatalf("at %v: %d released after a %v step, want <= %d", now.Sub(t0), len(got), now.Sub(prev), limit)
		}
		for _, tk := range got {
			if tk.Seq <= lastSeq {
				t.Fatalf("seq %d released after %d", tk.Seq, lastSeq)
			}
			lastSeq = tk.Seq
		}
		total += len(got)
		prev = now
		if now.Equal(at(10 * time.Minute)) {
			break
		}
	}
	if total != 60_000 {
		t.Fatalf("released %d in 10 min at 1,000 per 10 s, want 60,000", total)
	}
	checkConservation(t, q, prev)
}

// TestReleaseSmooth: released every 10 ms at 100/s, each call hands out one
// ticket, never a batch of 1,000.
func TestReleaseSmooth(t *testing.T) {
	q := newQ(t, paced)
	fill(t, q, 5_000, t0)
	for i := 1; i <= 2_000; i++ {
		if got := q.Release(at(time.Duration(i) * 10 * time.Millisecond)); len(got) != 1 {
			t.Fatalf("call %d: %d released, want 1", i, len(got))
		}
	}
}

// TestReleaseIdleStoresNoBurst: after the line sat empty for 5 minutes, a
// crowd arriving is released at the pace, starting with one ticket.
func TestReleaseIdleStoresNoBurst(t *testing.T) {
	q := newQ(t, paced)
	for i := 1; i <= 300; i++ {
		q.Release(at(time.Duration(i) * time.Second)) // idle line, credit capped
	}
	now := at(300 * time.Second)
	fill(t, q, 1_000, now)
	if got := q.Release(now); len(got) != 1 {
		t.Fatalf("first release after idle: %d, want 1 (the stored credit)", len(got))
	}
	for i := 1; i <= 100; i++ {
		if got := q.Release(now.Add(time.Duration(i) * 10 * time.Millisecond)); len(got) != 1 {
			t.Fatalf("call %d after idle: %d released, want 1", i, len(got))
		}
	}
	// A call after a long gap with the line still full releases what the
	// gap earned (the caller's step), not more.
	if got := q.Release(now.Add(2 * time.Second)); len(got) != 100 {
		t.Fatalf("after 1 s more: %d, want 100", len(got))
	}
}

// TestReleaseMaxKeepsOneTicket: a max (the gate's room) holds releases back;
// the credit not used is capped at one ticket, so room that opens later
// does not let a burst through.
func TestReleaseMaxKeepsOneTicket(t *testing.T) {
	q := newQ(t, paced)
	fill(t, q, 1_000, t0)
	if got := q.AppendRelease(nil, at(5*time.Second), 0); len(got) != 0 {
		t.Fatalf("max 0 released %d", len(got))
	}
	if got := q.AppendRelease(nil, at(5*time.Second+10*time.Millisecond), 1000); len(got) != 2 {
		t.Fatalf("after room opened: %d, want 2 (1 kept + 1 earned)", len(got))
	}
	if got := q.AppendRelease(nil, at(6*time.Second), 3); len(got) != 3 {
		t.Fatalf("max 3: %d", len(got))
	}
}

// TestReleaseTimeBackwards: a Release with an older time (callers read the
// clock before the lock) releases nothing and does not disturb the pace.
func TestReleaseTimeBackwards(t *testing.T) {
	q := newQ(t, paced)
	fill(t, q, 1_000, t0)
	if got := q.Release(at(time.Second)); len(got) != 100 {
		t.Fatalf("got %d, want 100", len(got))
	}
	if got := q.Release(at(500 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("backwards: got %d", len(got))
	}
	if got := q.Release(at(2 * time.Second)); len(got) != 100 {
		t.Fatalf("got %d, want 100", len(got))
	}
}

// TestSetRateMidRun: the pace follows SetRate at once and exactly.
func TestSetRateMidRun(t *testing.T) {
	q := newQ(t, paced)
	fill(t, q, 50_000, t0)
	total := 0
	for i := 1; i <= 6000; i++ { // 5 min at 50 ms steps
		total += len(q.Release(at(time.Duration(i) * 50 * time.Millisecond)))
	}
	if total != 30_000 {
		t.Fatalf("first 5 min: %d, want 30,000", total)
	}
	if err := q.SetRate(3000, 10*time.Second, at(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 600; i++ { // 1 min at 100 ms steps
		got := q.Release(at(5*time.Minute + time.Duration(i)*100*time.Millisecond))
		if len(got) != 30 {
			t.Fatalf("step %d at 300/s: %d, want 30", i, len(got))
		}
		total += len(got)
	}
	if total != 48_000 {
		t.Fatalf("total %d, want 48,000", total)
	}
}

// TestReleaseNegativeLimit: a negative limit releases nothing and spends no
// credit beyond the cap.
func TestReleaseNegativeLimit(t *testing.T) {
	q := newQ(t, paced)
	fill(t, q, 10, t0)
	if got := q.AppendRelease(nil, at(time.Second), -1); len(got) != 0 {
		t.Fatalf("limit -1 released %d", len(got))
	}
	if got := q.Release(at(time.Second + 10*time.Millisecond)); len(got) != 2 {
		t.Fatalf("then %d, want 2", len(got))
	}
}
