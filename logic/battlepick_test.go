package logic

import (
	"testing"
	"time"
)

// pickInst is one battle instance's state in a picker test, at epoch.
type pickInst struct {
	cool    time.Duration // cooling left; 0: not cooling
	full    bool          // as many calls outstanding as its adaptive limit
	failing bool          // its connection is in TRANSIENT_FAILURE
}

var (
	ready   = pickInst{}
	atLimit = pickInst{full: true}
	failing = pickInst{failing: true}
)

func cooling(d time.Duration) pickInst { return pickInst{cool: d} }

// testPicker is a picker over instances in the given states, with pushback
// on or off.
func testPicker(pushback bool, insts ...pickInst) *battlePicker {
	p := &battlePicker{pushback: pushback}
	down := make([]bool, len(insts))
	for i, in := range insts {
		l := &battleLimiter{}
		if in.cool > 0 {
			l.cool(epoch, in.cool)
		}
		if in.full {
			l.inflight.Store(aimdInitial)
		}
		p.limits = append(p.limits, l)
		down[i] = in.failing
	}
	p.failing = func(i int) bool { return down[i] }
	return p
}

// Which instance a call gets, by the instances' states: a table of states
// and the round robin's turn to the choice, the wait passed on when there
// is none, and whether an instance was passed over for its limit.
func TestBattlePick(t *testing.T) {
	ms := time.Millisecond
	const first = -1 // avoid: a first attempt
	for _, tc := range []struct {
		name     string
		off      bool // pushback off
		insts    []pickInst
		turn     uint64        // the round robin's counter (of retries when avoid >= 0)
		at       time.Duration // when, after epoch
		avoid    int
		critical bool

		want     int
		wantWait time.Duration
		wantFull bool
	}{
		{name: "all ready: the turn's", insts: []pickInst{ready, ready, ready}, avoid: first, want: 0},
		{name: "all ready: a later turn", insts: []pickInst{ready, ready, ready}, turn: 5, avoid: first, want: 2},
		{name: "cooling passed over", insts: []pickInst{cooling(200 * ms), ready}, avoid: first, want: 1},
		{name: "cooling over by now", insts: []pickInst{cooling(200 * ms), ready}, at: 200 * ms, avoid: first, want: 0},
		{name: "at its limit passed over", insts: []pickInst{atLimit, ready}, avoid: first, want: 1},
		{name: "at its limit passed over, its turn again", insts: []pickInst{atLimit, ready}, turn: 2, avoid: first, want: 1},

		{name: "all at their limit: refused after fullWait", insts: []pickInst{atLimit, atLimit}, avoid: first,
			want: -1, wantWait: fullWait, wantFull: true},
		{name: "all at their limit, critical: the turn's", insts: []pickInst{atLimit, atLimit}, turn: 1, avoid: first, critical: true,
			want: 1, wantFull: true},
		{name: "all cooling: refused until the first is ready", insts: []pickInst{cooling(200 * ms), cooling(150 * ms)}, avoid: first,
			want: -1, wantWait: 150 * ms},
		{name: "all cooling, later", insts: []pickInst{cooling(200 * ms), cooling(150 * ms)}, at: 100 * ms, avoid: first,
			want: -1, wantWait: 50 * ms},
		{name: "all cooling, critical: the one ready first", insts: []pickInst{cooling(200 * ms), cooling(150 * ms)}, avoid: first, critical: true,
			want: 1},
		{name: "a cooling that ends before fullWait", insts: []pickInst{atLimit, cooling(10 * ms)}, avoid: first,
			want: -1, wantWait: 10 * ms, wantFull: true},
		{name: "a cooling that ends after fullWait", insts: []pickInst{cooling(100 * ms), atLimit}, avoid: first,
			want: -1, wantWait: fullWait, wantFull: true},
		{name: "a cooling that ends after fullWait, critical", insts: []pickInst{cooling(100 * ms), atLimit}, avoid: first, critical: true,
			want: 1, wantFull: true},

		{name: "one instance cooling", insts: []pickInst{cooling(time.Second)}, avoid: first,
			want: -1, wantWait: time.Second},
		{name: "one instance cooling, critical", insts: []pickInst{cooling(time.Second)}, avoid: first, critical: true, want: 0},
		{name: "one instance cooling, over", insts: []pickInst{cooling(time.Second)}, at: time.Second, avoid: first, want: 0},
		{name: "one instance, retry: the same", insts: []pickInst{ready}, avoid: 0, want: 0},

		{name: "failing passed over", insts: []pickInst{failing, ready}, avoid: first, want: 1},
		{name: "all failing: the turn's", insts: []pickInst{failing, failing, failing}, turn: 1, avoid: first, want: 1},
		{name: "failing rather than cooling", insts: []pickInst{cooling(time.Second), failing}, avoid: first, want: 1},

		{name: "retry: the next after the first attempt's", insts: []pickInst{ready, ready, ready}, avoid: 0, want: 1},
		{name: "retry: its own later turn", insts: []pickInst{ready, ready, ready}, turn: 1, avoid: 0, want: 2},
		{name: "retry: wraps round", insts: []pickInst{ready, ready, ready}, turn: 1, avoid: 1, want: 0},
		{name: "retry: never the first attempt's", insts: []pickInst{ready, cooling(50 * ms), cooling(80 * ms)}, avoid: 0,
			want: -1, wantWait: 50 * ms},
		{name: "retry, critical: the other one ready first", insts: []pickInst{ready, cooling(80 * ms), cooling(50 * ms)}, avoid: 0, critical: true,
			want: 2},

		{name: "pushback off: cooling and limits ignored", off: true, insts: []pickInst{cooling(time.Second), atLimit}, avoid: first, want: 0},
		{name: "pushback off: failing still passed over", off: true, insts: []pickInst{failing, atLimit}, avoid: first, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPicker(!tc.off, tc.insts...)
			if tc.avoid < 0 {
				p.next.Store(tc.turn)
			} else {
				p.rnext.Store(tc.turn)
			}
			i, wait, full := p.pick(epoch.Add(tc.at), tc.avoid, tc.critical)
			if i != tc.want || wait != tc.wantWait || full != tc.wantFull {
				t.Fatalf("pick = %d, wait %v, full %v; want %d, %v, %v", i, wait, full, tc.want, tc.wantWait, tc.wantFull)
			}
		})
	}
}

// First attempts take turns round robin, and retries have turns of their
// own: a retry does not shift the next first attempt's instance.
func TestBattlePickTurns(t *testing.T) {
	p := testPicker(true, ready, ready, ready)
	var got []int
	// Retries after 0 alternate over 1 and 2, after 1 over 2 and 0.
	for _, avoid := range []int{-1, 0, -1, 1, -1, -1, 0} {
		i, _, _ := p.pick(epoch, avoid, false)
		got = append(got, i)
	}
	want := []int{0, 1, 1, 0, 2, 0, 1}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("picks = %v, want %v", got, want)
		}
	}
}

// allCooling: only when every instance is cooling, with the time until the
// first is ready; an instance at its limit is not cooling; never with
// pushback off.
func TestBattleAllCooling(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		off      bool
		insts    []pickInst
		at       time.Duration
		wantWait time.Duration
		wantAll  bool
	}{
		{name: "all cooling", insts: []pickInst{cooling(100 * ms), cooling(50 * ms), cooling(70 * ms)}, wantWait: 50 * ms, wantAll: true},
		{name: "all cooling, later", insts: []pickInst{cooling(100 * ms), cooling(50 * ms)}, at: 20 * ms, wantWait: 30 * ms, wantAll: true},
		{name: "the first ready again", insts: []pickInst{cooling(100 * ms), cooling(50 * ms)}, at: 50 * ms},
		{name: "one ready", insts: []pickInst{cooling(100 * ms), ready}},
		{name: "one at its limit", insts: []pickInst{cooling(100 * ms), atLimit}},
		{name: "pushback off", off: true, insts: []pickInst{cooling(100 * ms), cooling(50 * ms)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait, all := testPicker(!tc.off, tc.insts...).allCooling(epoch.Add(tc.at))
			if wait != tc.wantWait || all != tc.wantAll {
				t.Fatalf("allCooling = %v, %v; want %v, %v", wait, all, tc.wantWait, tc.wantAll)
			}
		})
	}
}
