package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"levee/client/clienttest"
	leveev1 "levee/proto/leveev1"
)

// smallOverload is the scenario shrunk for tests: a few connections, half
// second phases, a low rate cap.
func smallOverload(metricsURL string) OverloadConfig {
	cfg := DefaultOverload()
	cfg.Conns = 4
	cfg.CapacityConcurrency = 2
	cfg.CapacityTime = 500 * time.Millisecond
	cfg.CapacityStepTime = 200 * time.Millisecond
	cfg.CapacitySearchTime = 400 * time.Millisecond
	cfg.CapacityP99SLO = time.Second
	cfg.PhaseTime = 500 * time.Millisecond
	cfg.OverloadTime = 500 * time.Millisecond
	cfg.MaxRate = 400
	cfg.MetricsEvery = 100 * time.Millisecond
	if metricsURL != "" {
		cfg.MetricsTargets = []MetricsTarget{{Name: "fake", URL: metricsURL}}
	}
	return cfg
}

// frameChecker is a fake gate handler that plays the game and checks what
// the overload bots send: criticality by kind, the timeout, unique battles.
type frameChecker struct {
	timeoutMs uint32
	mu        sync.Mutex
	battles   map[string]bool
	bad       []string
	// refuse, when set, answers some requests itself (nil: play).
	refuse func(f *leveev1.ClientFrame) (reply any, silent bool)
}

func (fc *frameChecker) handle(c *clienttest.Conn) {
	p := &leveev1.Player{Id: c.Player, Level: 1, Gold: clienttest.StartGold, Inventory: map[string]uint32{}}
	n := 0
	for {
		f, err := c.Recv()
		if err != nil {
			return
		}
		fc.check(f)
		var out any
		if fc.refuse != nil {
			var silent bool
			if out, silent = fc.refuse(f); silent {
				continue
			}
		}
		if out == nil {
			out = clienttest.GameReply(p, f, &n)
		}
		if c.Send(clienttest.Reply(f, out)) != nil {
			return
		}
	}
}

func (fc *frameChecker) check(f *leveev1.ClientFrame) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if f.GetTimeoutMs() != fc.timeoutMs {
		fc.bad = append(fc.bad, "timeout_ms "+f.String())
	}
	switch {
	case f.GetStartBattle() != nil:
		b := f.GetStartBattle()
		if f.GetCriticality() != leveev1.Criticality_CRITICALITY_DEFAULT || b.GetUnits() != 8 || b.GetTicks() != 200 {
			fc.bad = append(fc.bad, "battle "+f.String())
		}
		if fc.battles[b.GetBattleId()] {
			fc.bad = append(fc.bad, "battle id twice: "+b.GetBattleId())
		}
		fc.battles[b.GetBattleId()] = true
	case f.GetBuyItem() != nil:
		if f.GetCriticality() != leveev1.Criticality_CRITICALITY_CRITICAL || f.GetBuyItem().GetItemId() != "potion" {
			fc.bad = append(fc.bad, "purchase "+f.String())
		}
	default:
		fc.bad = append(fc.bad, "unexpected "+f.String())
	}
}

func metricsServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(metricsPage))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// checkPhases asserts the accounting of every phase and of the whole run.
func checkPhases(t *testing.T, rep *OverloadReport, cfg OverloadConfig) {
	t.Helper()
	if len(rep.Phases()) != 3 {
		t.Fatalf("phases ran: %d (capacity %v)", len(rep.Phases()), rep.Capacity)
	}
	answered, sent := 0, 0
	for _, p := range rep.AllPhases() {
		if p.Sent != p.Answered+Sum(p.Lost) || p.Answered != p.Served+Sum(p.Overload)+Sum(p.Failed) {
			t.Errorf("%s: sent %d answered %d served %d lost %v overload %v failed %v", p.Name, p.Sent, p.Answered,
				p.Served, p.Lost, p.Overload, p.Failed)
		}
		if p.Critical.Sent+p.Default.Sent != p.Sent || p.Critical.Sent != int(float64(p.Sent)*cfg.CriticalFraction) {
			t.Errorf("%s: %d critical, %d default of %d", p.Name, p.Critical.Sent, p.Default.Sent, p.Sent)
		}
		if p.Mode == "open" && p.Dispatch.Issued != p.Sent {
			t.Errorf("%s: issued %d, sent %d", p.Name, p.Dispatch.Issued, p.Sent)
		}
		if p.Mode == "open" && p.Dispatch.Issued+p.Dispatch.Unsent != p.Dispatch.Planned {
			t.Errorf("%s: dispatch %+v", p.Name, p.Dispatch)
		}
		// Every open-loop request is sent at or after its due time, so
		// each order statistic from the due time is at least the one from
		// the send; a closed loop has no due time.
		for _, l := range [][2]Latency{{p.Latency, p.LatencyFromDue}, {p.AnsweredLatency, p.AnsweredLatencyFromDue},
			{p.Critical.Latency, p.Critical.LatencyFromDue}, {p.Default.Latency, p.Default.LatencyFromDue}} {
			send, due := l[0], l[1]
			if p.Mode != "open" {
				if due.Count != 0 {
					t.Errorf("%s: closed loop with latency from due %+v", p.Name, due)
				}
				continue
			}
			if due.Count != send.Count || due.Mean < send.Mean || due.P50 < send.P50 || due.P90 < send.P90 ||
				due.P99 < send.P99 || due.Max < send.Max {
				t.Errorf("%s: from send %+v, from due %+v", p.Name, send, due)
			}
		}
		answered += p.Answered
		sent += p.Sent
	}
	if rep.Replies != uint64(answered) || rep.Frames != uint64(sent) || rep.UnexpectedReplies != 0 {
		t.Errorf("frames %d replies %d unexpected %d; sent %d answered %d", rep.Frames, rep.Replies,
			rep.UnexpectedReplies, sent, answered)
	}
	if rep.CapacityPhase.Mode != "closed" || rep.CapacityPhase.Concurrency != cfg.CapacityConcurrency {
		t.Errorf("capacity phase %+v", rep.CapacityPhase)
	}
	if rep.Connected != cfg.Conns {
		t.Errorf("connected %d of %d", rep.Connected, cfg.Conns)
	}
}

// The whole scenario, in process, against a fake gate that answers
// everything: the plumbing works and every request is accounted for.
func TestRunOverloadPlumbing(t *testing.T) {
	fc := &frameChecker{timeoutMs: 2000, battles: map[string]bool{}}
	g := startGate(t, fc.handle)
	r := newTestRunner(t, g, nil)
	cfg := smallOverload(metricsServer(t).URL + "/metrics")
	rep, err := r.RunOverload(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkPhases(t, rep, cfg)
	fc.mu.Lock()
	if len(fc.bad) > 0 {
		t.Errorf("bad frames: %v", fc.bad[:min(len(fc.bad), 5)])
	}
	fc.mu.Unlock()
	if rep.Capacity <= 0 || rep.Capacity > cfg.MaxRate {
		t.Errorf("capacity %v", rep.Capacity)
	}
	// The search: at most search time / step time steps, the first at C0,
	// each an open-loop phase of its own; C is a step's served rate.
	steps := rep.CapacitySteps
	if rep.CapacityClosed != rep.CapacityPhase.Goodput || len(steps) < 1 || len(steps) > 2 || rep.CapacitySearchEnd == "" {
		t.Fatalf("search: C0 %v, %d steps, end %q", rep.CapacityClosed, len(steps), rep.CapacitySearchEnd)
	}
	isStep := false
	for i, st := range steps {
		p := st.Phase
		if p == nil || p.Mode != "open" || p.Name != "search"+strconv.Itoa(i+1) || p.TargetRate != st.Rate || st.Served != p.Goodput {
			t.Errorf("step %d: %+v", i+1, st)
		}
		isStep = isStep || st.Served == rep.Capacity
	}
	if steps[0].Rate != min(rep.CapacityClosed, cfg.MaxRate) || !isStep {
		t.Errorf("first step %v (C0 %v); C %v", steps[0].Rate, rep.CapacityClosed, rep.Capacity)
	}
	if want := cfg.BaselineFactor * rep.Capacity; rep.BaselinePhase.TargetRate != want {
		t.Errorf("baseline rate %v, want %v", rep.BaselinePhase.TargetRate, want)
	}
	if want := min(cfg.OverloadFactor*rep.Capacity, cfg.MaxRate); rep.OverloadPhase.TargetRate != want ||
		(cfg.OverloadFactor*rep.Capacity > cfg.MaxRate && !rep.RateCapped) {
		t.Errorf("overload rate %v, want %v (capped %v)", rep.OverloadPhase.TargetRate, want, rep.RateCapped)
	}
	if crit := criterion(t, rep, "every request"); !crit.Pass {
		t.Errorf("%+v", crit)
	}
	if len(rep.Processes) != 3 || rep.Processes[2].Name != HostName || rep.Processes[0].Samples < 2 || rep.Processes[0].RSSMax != 25726976 ||
		rep.Processes[1].Name != SelfName || rep.Processes[1].RSSMax <= 0 || rep.Processes[1].GoroutinesMax <= 0 {
		t.Errorf("memory %+v", rep.Processes)
	}
	if len(rep.Criteria) < 5 {
		t.Errorf("criteria %+v", rep.Criteria)
	}
}

// A gate that refuses some requests and never answers others: refusals are
// counted by code, silence as lost after the timeout and grace, and the run
// fails on it while every request still has one outcome.
func TestRunOverloadCountsRefusalsAndLosses(t *testing.T) {
	var refused, silent atomic.Int64
	fc := &frameChecker{timeoutMs: 300, battles: map[string]bool{}, refuse: func(f *leveev1.ClientFrame) (any, bool) {
		id := f.GetStartBattle().GetBattleId()
		switch {
		case strings.HasSuffix(id, "3"):
			refused.Add(1)
			return &leveev1.Error{Code: leveev1.ErrorCode_ERROR_CODE_BUSY, RetryAfterMs: 50}, false
		case strings.HasSuffix(id, "7") && silent.Load() < 5:
			silent.Add(1)
			return nil, true
		}
		return nil, false
	}}
	g := startGate(t, fc.handle)
	r := newTestRunner(t, g, func(c *RunnerConfig) { c.RequestTimeout = 300 * time.Millisecond })
	cfg := smallOverload("")
	cfg.ReplyGrace = 100 * time.Millisecond
	rep, err := r.RunOverload(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkPhases(t, rep, cfg)
	busy, lost := 0, 0
	for _, p := range rep.AllPhases() {
		busy += p.Overload["BUSY"]
		lost += p.Lost[LostTimeout]
		if len(p.Lost) > 1 || len(p.Overload) > 1 {
			t.Errorf("%s: lost %v overload %v", p.Name, p.Lost, p.Overload)
		}
	}
	if int64(busy) != refused.Load() || int64(lost) != silent.Load() || lost == 0 {
		t.Errorf("BUSY %d (gate refused %d), lost %d (gate silent on %d)", busy, refused.Load(), lost, silent.Load())
	}
	if rep.Passed {
		t.Error("a run with lost requests passed")
	}
	if crit := criterion(t, rep, "every request"); crit.Pass || !strings.Contains(crit.Got, "lost "+strconv.Itoa(lost)) {
		t.Errorf("%+v", crit)
	}
}
