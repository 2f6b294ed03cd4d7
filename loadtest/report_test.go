package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"levee/client"
	leveev1 "levee/proto/leveev1"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := Summarize(ds)
	want := Latency{Count: 100, Mean: 50500 * time.Microsecond, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond,
		P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if l != want {
		t.Fatalf("Summarize = %+v, want %+v", l, want)
	}
	cases := []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{7}, 50, 7},
		{[]time.Duration{7}, 99, 7},
		{[]time.Duration{1, 2, 3, 4}, 50, 2},  // rank ceil(2) = 2
		{[]time.Duration{1, 2, 3, 4}, 51, 3},  // rank ceil(2.04) = 3
		{[]time.Duration{1, 2, 3, 4}, 100, 4}, // the max
		{[]time.Duration{1, 2, 3, 4}, 0.1, 1}, // at least rank 1
		{[]time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9},
		{[]time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99, 10},
	}
	for _, c := range cases {
		if got := Percentile(c.in, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.in, c.p, got, c.want)
		}
	}
	if (Summarize(nil) != Latency{}) {
		t.Error("Summarize(nil) is not zero")
	}
}

func serverErr(code leveev1.ErrorCode) error {
	return fmt.Errorf("call: %w", &client.Error{Code: code, Message: "x"})
}

func TestDialReason(t *testing.T) {
	closed := fmt.Errorf("%w: %w", client.ErrClosed, &client.CloseError{Code: 1013, Text: "overloaded"})
	if r := dialReason(closed); r != "close 1013" {
		t.Errorf("dialReason = %q", r)
	}
	if r := dialReason(serverErr(leveev1.ErrorCode_ERROR_CODE_UNAUTHORIZED)); r != "UNAUTHORIZED" {
		t.Errorf("dialReason = %q", r)
	}
}

func TestReportFromRecorder(t *testing.T) {
	rec := newRecorder(100)
	record := func(op string, err error, ms int) {
		if !rec.take() {
			t.Fatal("budget")
		}
		rec.request(op, Classify(err), time.Duration(ms)*time.Millisecond)
	}
	for i := 1; i <= 10; i++ {
		record(OpGetProfile, nil, i)
	}
	record(OpBuyItem, serverErr(leveev1.ErrorCode_ERROR_CODE_INSUFFICIENT_GOLD), 20)
	record(OpBuyItem, nil, 30)
	rec.dial(nil)
	rec.clientStats(client.Stats{Sent: 12, Replies: 12})

	rep := rec.report()
	if rep.Sent != 12 || rep.Answered != 12 || rep.OK != 11 || rep.Business["INSUFFICIENT_GOLD"] != 1 {
		t.Fatalf("report = %+v", rep)
	}
	if rep.Latency.Count != 12 || rep.Latency.Max != 30*time.Millisecond || rep.Latency.P50 != 6*time.Millisecond {
		t.Fatalf("latency = %+v", rep.Latency)
	}
	if op := rep.Ops[OpBuyItem]; op.Sent != 2 || op.OK != 1 || op.Errors != 1 || op.Latency.P50 != 20*time.Millisecond {
		t.Fatalf("buy op = %+v", op)
	}
	if p := rep.Problems(); len(p) != 0 {
		t.Fatalf("ok and business errors only, yet problems: %v", p)
	}

	record(OpBuyItem, serverErr(leveev1.ErrorCode_ERROR_CODE_BUSY), 1)
	record(OpBuyItem, serverErr(leveev1.ErrorCode_ERROR_CODE_INTERNAL), 1)
	record(OpStartBattle, context.DeadlineExceeded, 5000)
	rec.dial(serverErr(leveev1.ErrorCode_ERROR_CODE_SERVER_FULL))
	rec.clientStats(client.Stats{Sent: 3, Replies: 2, Unexpected: 1})
	rep = rec.report()
	if rep.Sent != 15 || rep.Answered != 14 || Sum(rep.Lost) != 1 || rep.Latency.Count != 14 {
		t.Fatalf("report = %+v", rep)
	}
	problems := strings.Join(rep.Problems(), "\n")
	for _, want := range []string{"1 requests got no reply (timeout 1)", "refused for overload (BUSY 1)",
		"1 requests failed (INTERNAL 1)", "could not connect (SERVER_FULL 1)", "1 replies matched no request"} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems lack %q:\n%s", want, problems)
		}
	}

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"get_profile", "buy_item", "start_battle", "p99", "INSUFFICIENT_GOLD 1"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Sent != 15 || back.Ops[OpGetProfile].Latency.P90 != 9*time.Millisecond {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
}

func TestRecorderBudget(t *testing.T) {
	rec := newRecorder(2)
	if !rec.take() || !rec.take() || rec.take() || !rec.exhausted() {
		t.Fatal("budget of 2 not enforced")
	}
	if cap(rec.samples) != 2 {
		t.Fatal("samples not preallocated to the budget")
	}
}

func TestValidate(t *testing.T) {
	sm := DefaultSmoke()
	if err := sm.Validate(); err != nil {
		t.Fatal(err)
	}
	sc := sm.Scenario()
	if err := sc.Validate(); err != nil || sc.MaxRequests != 300*(80+2) {
		t.Fatalf("scenario %+v: %v", sc, err)
	}
	bad := []struct {
		mut  func(*SmokeConfig)
		flag string
	}{
		{func(c *SmokeConfig) { c.Bots = 0 }, "-bots"},
		{func(c *SmokeConfig) { c.Ramp = time.Minute }, "-ramp"},
		{func(c *SmokeConfig) { c.Duration = 0 }, "-duration"},
		{func(c *SmokeConfig) { c.Think = 0 }, "-think"},
		{func(c *SmokeConfig) { c.ThinkJitter = 1 }, "-think-jitter"},
		{func(c *SmokeConfig) { c.Items = nil }, "-items"},
		{func(c *SmokeConfig) { c.Bots, c.Think, c.Duration = MaxBots, time.Millisecond, time.Hour }, "-think"},
	}
	for _, b := range bad {
		c := DefaultSmoke()
		b.mut(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), b.flag+":") {
			t.Errorf("want an error naming %s, got %v", b.flag, err)
		}
	}
	rc := DefaultRunnerConfig()
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	for flag, mut := range map[string]func(*RunnerConfig){
		"-gate-url":        func(c *RunnerConfig) { c.GateURL = "http://127.0.0.1/ws" },
		"-token-secret":    func(c *RunnerConfig) { c.TokenSecret = "" },
		"-request-timeout": func(c *RunnerConfig) { c.RequestTimeout = 0 },
		"-json-fraction":   func(c *RunnerConfig) { c.JSONFraction = 1.5 },
		"-run-id":          func(c *RunnerConfig) { c.RunID = "has space" },
	} {
		c := DefaultRunnerConfig()
		mut(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), flag+":") {
			t.Errorf("want an error naming %s, got %v", flag, err)
		}
	}
	if err := (Scenario{Bots: 1, Duration: time.Second, MaxRequests: 1, Arrivals: LinearRamp(0)}).Validate(); !errors.Is(err, ErrScenario) {
		t.Errorf("scenario without behaviour: %v", err)
	}
}

func TestLinearRampAndJSONShare(t *testing.T) {
	ramp := LinearRamp(5 * time.Second)
	if ramp(0, 300) != 0 || ramp(150, 300) != 2500*time.Millisecond || ramp(299, 300) >= 5*time.Second {
		t.Fatal("linear ramp is off")
	}
	if LinearRamp(time.Second)(0, 1) != 0 {
		t.Fatal("single bot should arrive at once")
	}
	for _, c := range []struct {
		bots int
		f    float64
		want int
	}{{300, 0.1, 30}, {10, 0.5, 5}, {7, 0, 0}, {7, 1, 7}} {
		n := 0
		for i := range c.bots {
			if useJSON(i, c.f) {
				n++
			}
		}
		if n != c.want {
			t.Errorf("useJSON over %d bots at %v: %d, want %d", c.bots, c.f, n, c.want)
		}
	}
}
