package loadtest

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"levee/client/clienttest"
	"levee/internal/lineapi"
)

// fakeLine is a FIFO admission line for the clienttest gate: it releases
// players at a pace (exact by elapsed time, checked every tick), pushes
// each waiting player its position every push, and takes pace changes from
// an admin handler.
type fakeLine struct {
	mu      sync.Mutex
	waiting []*waiter // FIFO
	rate    float64   // per second
	credit  float64
	last    time.Time
	order   []string // players in the order they joined
	admits  []string // players in the order they were released
	posts   []map[string]any
	token   string
	push    time.Duration
	stop    chan struct{}
	done    chan struct{}
}

// waiter is one player in the fake line: ch is closed at its release.
type waiter struct {
	ch               chan struct{}
	joined, released time.Time
}

func newFakeLine(rate float64, push time.Duration) *fakeLine {
	l := &fakeLine{rate: rate, last: time.Now(), push: push, token: "adm", stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *fakeLine) close() { close(l.stop); <-l.done }

func (l *fakeLine) run() {
	defer close(l.done)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case now := <-t.C:
			l.mu.Lock()
			l.credit += now.Sub(l.last).Seconds() * l.rate
			l.last = now
			for l.credit >= 1 && len(l.waiting) > 0 {
				l.waiting[0].released = now
				close(l.waiting[0].ch)
				l.waiting = l.waiting[1:]
				l.credit--
			}
			if len(l.waiting) == 0 {
				l.credit = min(l.credit, 1)
			}
			l.mu.Unlock()
		}
	}
}

// line is the clienttest.Line: join, statuses until released, admitted.
func (l *fakeLine) line(c *clienttest.Conn) bool {
	me := &waiter{ch: make(chan struct{})}
	l.mu.Lock()
	me.joined = time.Now()
	l.waiting = append(l.waiting, me)
	l.order = append(l.order, c.Player)
	l.mu.Unlock()
	status := func() bool {
		l.mu.Lock()
		pos := 0
		for i, w := range l.waiting {
			if w == me {
				pos = i + 1
			}
		}
		n, rate := len(l.waiting), l.rate
		l.mu.Unlock()
		if pos == 0 {
			return true
		}
		return c.Send(clienttest.Status(uint64(pos), uint64(n), rate, "t-"+c.Player)) == nil
	}
	if !status() {
		return false
	}
	t := time.NewTicker(l.push)
	defer t.Stop()
	for {
		select {
		case <-me.ch:
			l.mu.Lock()
			l.admits = append(l.admits, c.Player)
			waited := me.released.Sub(me.joined)
			l.mu.Unlock()
			return c.Send(clienttest.Admit(waited)) == nil
		case <-t.C:
			if !status() {
				return false
			}
		case <-c.Context().Done():
			return false
		}
	}
}

// admin is the fake POST /admin/line.
func (l *fakeLine) admin(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+l.token {
		http.Error(w, "no", http.StatusUnauthorized)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Method == http.MethodGet {
		_ = json.NewEncoder(w).Encode(lineapi.View{Mode: "paced", Rate: lineapi.RateView{N: int(l.rate), Interval: "1s", PerSecond: l.rate}, Length: len(l.waiting)})
		return
	}
	var m map[string]any
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	l.posts = append(l.posts, m)
	// The time so far is paid at the old rate; the new one starts now.
	now := time.Now()
	l.credit += now.Sub(l.last).Seconds() * l.rate
	l.last = now
	if len(l.waiting) == 0 {
		l.credit = min(l.credit, 1)
	}
	iv, _ := time.ParseDuration(m["interval"].(string))
	l.rate = m["rate"].(float64) / iv.Seconds()
	_, _ = w.Write([]byte(`{}`))
}

func testRunner(t *testing.T, url string) *Runner {
	t.Helper()
	cfg := DefaultRunnerConfig()
	cfg.GateURL, cfg.TokenSecret, cfg.ProgressEvery = url, "s3cret", 0
	r, err := NewRunner(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The line scenario end to end against a fake FIFO line: everyone
// admitted, in order, at the pace, before and after a pace change made
// through the admin API.
func TestRunLine(t *testing.T) {
	fl := newFakeLine(0, 50*time.Millisecond) // held until every bot is in
	defer fl.close()
	g := clienttest.NewGateWithLine([]byte("s3cret"), fl.line, clienttest.Game)
	defer g.Close()
	adm := httptest.NewServer(http.HandlerFunc(fl.admin))
	defer adm.Close()

	cfg := DefaultLine()
	cfg.Bots, cfg.DialParallel, cfg.Bound = 1000, 16, 30*time.Second
	cfg.Window, cfg.Settle, cfg.PaceTolerance = 100*time.Millisecond, 50*time.Millisecond, 0.3
	cfg.MaxStatusGap = 2 * time.Second
	cfg.Admin = &Admin{URL: adm.URL, Token: "adm"}
	// Each pace is measured over a second or more of admissions (~400
	// in 2 s before the change, ~600 in 1.2 s after): with 400/s then
	// 1,000/s the second pace was judged over ~0.3 s, where a busy
	// machine's delivery bursts alone moved it past the tolerance.
	cfg.Start, cfg.StartWhenJoined = LineSetting{Mode: "paced", Rate: 200, Interval: time.Second}, true
	cfg.ChangeAt = 2 * time.Second
	cfg.Change = LineSetting{Rate: 500, Interval: time.Second}
	rep, err := testRunner(t, g.URL()).RunLine(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_ = rep.WriteTable(&out)
	t.Log(out.String())
	if rep.ConfiguredRate != 200 || rep.ChangedRate != 500 {
		t.Fatalf("rates %v -> %v", rep.ConfiguredRate, rep.ChangedRate)
	}
	judge := func(t *testing.T, timing bool) {
		for _, c := range rep.Criteria {
			if !c.Pass && IsTimingCriterion(c.Key) == timing {
				t.Errorf("%s: %s", c.Name, c.Got)
			}
		}
	}
	judge(t, false)
	// Timing is judged only when this process was not starved of CPU (a
	// busy machine makes the admissions reach the bots in bursts);
	// otherwise the subtest says so and is skipped, never passed.
	t.Run("timing", func(t *testing.T) {
		if rep.MaxStall > 100*time.Millisecond {
			t.Skipf("timing not judged: this process got no CPU for %v at a stretch, more than 100ms (the machine is busy)",
				rep.MaxStall.Round(time.Millisecond))
		}
		// A slow admin call means the fake line's lock and its releases
		// stalled around the change; what follows is a catch-up burst, not
		// the pace (seen: a 340 ms call, then 1,700/s for 300 ms).
		if rep.ChangeTook > 100*time.Millisecond {
			t.Skipf("timing not judged: the admin call took %v, more than 100ms (the machine is busy); order and losses were judged",
				rep.ChangeTook.Round(time.Millisecond))
		}
		judge(t, true)
	})
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.posts) != 2 || fl.posts[1]["rate"] != 500.0 || fl.posts[1]["interval"] != "1s" {
		t.Fatalf("admin posts %v", fl.posts)
	}
	if len(fl.admits) != cfg.Bots {
		t.Fatalf("the line released %d", len(fl.admits))
	}
}

// A line that admits out of order (LIFO) and loses a player is caught.
func TestRunLineCatchesDisorder(t *testing.T) {
	var mu sync.Mutex
	var waiting []*waiter
	full := make(chan struct{}) // closed when the 19 that stay are waiting
	lose := "bot-x-3"
	line := func(c *clienttest.Conn) bool {
		if c.Player == lose {
			_ = c.Send(clienttest.Status(1, 1, 1, "t"))
			return false // dropped
		}
		me := &waiter{ch: make(chan struct{}), joined: time.Now()}
		_ = c.Send(clienttest.Status(1, 1, 1, "t"))
		mu.Lock()
		waiting = append(waiting, me)
		if len(waiting) == 19 {
			close(full)
		}
		mu.Unlock()
		select {
		case <-me.ch:
			mu.Lock()
			waited := me.released.Sub(me.joined)
			mu.Unlock()
			return c.Send(clienttest.Admit(waited)) == nil
		case <-c.Context().Done():
			return false
		}
	}
	g := clienttest.NewGateWithLine([]byte("s3cret"), line, clienttest.Game)
	defer g.Close()
	cfg := DefaultLine()
	cfg.Bots, cfg.DialParallel, cfg.Bound = 20, 1, 20*time.Second
	r := testRunner(t, g.URL())
	r.cfg.RunID = "x"
	released := make(chan struct{})
	go func() { // once all 19 wait, release them last arrival first, 40 ms apart
		defer close(released)
		select {
		case <-full:
		case <-time.After(20 * time.Second):
			return
		}
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for i := 18; i >= 0; i-- {
			mu.Lock()
			waiting[i].released = time.Now()
			close(waiting[i].ch)
			mu.Unlock()
			<-tick.C
		}
	}()
	rep, err := r.RunLine(context.Background(), cfg)
	<-released
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lost != 1 || rep.Admitted != 19 || rep.Inversions == 0 || rep.Passed {
		t.Fatalf("lost %d, admitted %d, inversions %d, passed %v", rep.Lost, rep.Admitted, rep.Inversions, rep.Passed)
	}
	// With one handshake at a time most of the 19·18/2 pairs are surely
	// ordered (a bot's handshake may start before the previous bot's
	// first status came), and they are inverted; most of them surely so
	// (released 40 ms apart, more than a handshake usually takes here).
	if rep.OrderedPairs < 100 || rep.Inversions < rep.OrderedPairs/2 {
		t.Fatalf("ordered %d, inversions %d", rep.OrderedPairs, rep.Inversions)
	}
}

// definiteInversions agrees with the pairwise definition.
func TestDefiniteInversions(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	for round := range 50 {
		n := 1 + rnd.IntN(60)
		s := make([]lineSample, n)
		for i := range s {
			d := rnd.IntN(100)
			s[i].dialStart = at(d)
			if rnd.IntN(10) > 0 {
				s[i].joined = at(d + 1 + rnd.IntN(20))
			}
			if rnd.IntN(10) > 0 {
				s[i].admitted = at(50 + rnd.IntN(200))
				s[i].hasWaited = true
				if !s[i].joined.IsZero() {
					s[i].waited = max(s[i].admitted.Sub(s[i].joined)-time.Duration(rnd.IntN(20))*time.Millisecond, 0)
				}
			}
		}
		slack := time.Duration(rnd.IntN(30)) * time.Millisecond
		var wantInv, wantOrd int64
		for _, x := range s {
			for _, y := range s {
				if x.joined.IsZero() || x.admitted.IsZero() || y.admitted.IsZero() || !x.joined.Before(y.dialStart) {
					continue
				}
				wantOrd++
				// x was released at or after dialStart + waited; y at or
				// before both its admission and joined + waited + 1 ms.
				xLo := x.dialStart.Add(x.waited)
				yHi := y.admitted
				if !y.joined.IsZero() && y.joined.Add(y.waited+time.Millisecond).Before(yHi) {
					yHi = y.joined.Add(y.waited + time.Millisecond)
				}
				if yHi.Add(slack).Before(xLo) {
					wantInv++
				}
			}
		}
		inv, ord := definiteInversions(s, slack)
		if inv != wantInv || ord != wantOrd {
			t.Fatalf("round %d: got %d/%d, want %d/%d", round, inv, ord, wantInv, wantOrd)
		}
	}
}

func TestTimestampOrder(t *testing.T) {
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	s := []lineSample{
		{joined: at(1), admitted: at(30)},
		{joined: at(2), admitted: at(10)},
		{joined: at(3), admitted: at(20)},
		{joined: at(4)}, // not admitted: left out
	}
	inv, disp := timestampOrder(s)
	if inv != 2 || disp != 2 {
		t.Fatalf("inversions %d, displacement %d", inv, disp)
	}
}

func TestPaceSpanAndWindows(t *testing.T) {
	first := time.Now()
	var adm []time.Time
	for i := range 100 { // 10/s for 10 s
		adm = append(adm, first.Add(time.Duration(i)*100*time.Millisecond))
	}
	p := paceSpan(adm, first, 0, 5*time.Second, false, time.Second, 10)
	if p.Admitted != 50 || p.Rate != 10 || p.MinWindow != 10 || p.MaxWindow != 10 {
		t.Fatalf("span %+v", p)
	}
	if paceSpan(adm, first, time.Second, time.Second, false, time.Second, 10) != nil {
		t.Fatal("an empty span was measured")
	}
	w := windowRates(adm, first, time.Second)
	if len(w) != 9 || w[0] != 10 || w[8] != 10 {
		t.Fatalf("windows %v", w)
	}
}

func TestLineConfigValidate(t *testing.T) {
	for _, c := range []struct {
		mod  func(*LineConfig)
		want string
	}{
		{func(c *LineConfig) { c.Bots = 0 }, "-bots"},
		{func(c *LineConfig) { c.DialParallel = 0 }, "-dial-parallel"},
		{func(c *LineConfig) { c.PaceTolerance = 1 }, "-pace-tolerance"},
		{func(c *LineConfig) { c.ChangeAt = time.Second }, "-change-at"},
		{func(c *LineConfig) { c.ChangeAt, c.Change.Rate = time.Second, 5 }, "-admin-url"},
		{func(c *LineConfig) { c.Start.Mode = "paced" }, "-admin-url"},
	} {
		cfg := DefaultLine()
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %s: %v", c.want, err)
		}
	}
	if err := DefaultLine().Validate(); err != nil {
		t.Fatal(err)
	}
}

// With -start-when-joined the line holds (rate 0 here) until every bot is
// in it, then the Start setting opens it.
func TestRunLineStartWhenJoined(t *testing.T) {
	fl := newFakeLine(0, 50*time.Millisecond)
	defer fl.close()
	g := clienttest.NewGateWithLine([]byte("s3cret"), fl.line, clienttest.Game)
	defer g.Close()
	adm := httptest.NewServer(http.HandlerFunc(fl.admin))
	defer adm.Close()

	cfg := DefaultLine()
	cfg.Bots, cfg.DialParallel, cfg.Bound = 200, 8, 30*time.Second
	cfg.Window, cfg.PaceTolerance = 100*time.Millisecond, 0.3
	cfg.Admin = &Admin{URL: adm.URL, Token: "adm"}
	cfg.Start, cfg.StartWhenJoined = LineSetting{Mode: "paced", Rate: 500, Interval: time.Second}, true
	rep, err := testRunner(t, g.URL()).RunLine(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_ = rep.WriteTable(&out)
	if !rep.Passed || rep.OpenedAfter <= 0 || rep.ConfiguredRate != 500 || rep.Backlogged != 0 {
		t.Fatalf("report:\n%s", out.String())
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.posts) != 1 || fl.posts[0]["mode"] != "paced" {
		t.Fatalf("admin posts %v", fl.posts)
	}
}
