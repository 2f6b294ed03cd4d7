package gate

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/lineapi"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/queue"
)

const testAdminToken = "s3cret-admin-token"

// syncBuffer is a log sink safe for the gate's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// adminGate starts a gate with the admin API on and its log captured.
func adminGate(t *testing.T, mode string, mod func(*Config)) (*testGate, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	g := startGateLog(t, func(c *Config) {
		c.LineMode = mode
		c.AdminToken = testAdminToken
		if mod != nil {
			mod(c)
		}
	}, newTextLogger(logs), startFakeLogic(t))
	testwait.Until(t, "the walker's ticker", g.line.ticking.Load)
	return g, logs
}

// admin calls the admin API; body is a form unless it starts with "{".
func (g *testGate) admin(t *testing.T, method, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+g.OpsAddr().String()+lineapi.Path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (g *testGate) getLine(t *testing.T) lineapi.View {
	t.Helper()
	code, body := g.admin(t, http.MethodGet, "Bearer "+testAdminToken, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", lineapi.Path, code, body)
	}
	var v lineapi.View
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("GET %s: %v in %s", lineapi.Path, err, body)
	}
	return v
}

func TestAdminAPIOffWithoutToken(t *testing.T) {
	g := startGate(t, nil, startFakeLogic(t))
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if code, _ := g.admin(t, m, "Bearer anything", "mode=closed"); code != http.StatusNotFound {
			t.Fatalf("%s with no -admin-token: %d, want 404", m, code)
		}
	}
	if g.line.q.Mode() != queue.Open {
		t.Fatal("the mode changed")
	}
}

func TestAdminAPIWantsTheToken(t *testing.T) {
	g, logs := adminGate(t, "paced", nil)
	for _, tok := range []string{"", "Bearer wrong", "Bearer " + testAdminToken + "x", "Basic " + testAdminToken, testAdminToken} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			code, body := g.admin(t, m, tok, "mode=open")
			if code != http.StatusUnauthorized || strings.Contains(body, "admitted_total") {
				t.Fatalf("%s with %q: %d %s, want 401 and nothing", m, tok, code, body)
			}
		}
	}
	if g.line.q.Mode() != queue.Paced {
		t.Fatal("an unauthorized call changed the mode")
	}
	if !strings.Contains(logs.String(), "unauthorized call") {
		t.Fatalf("unauthorized calls not logged: %s", logs)
	}
	if code, _ := g.admin(t, http.MethodPut, "Bearer "+testAdminToken, ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d, want 405", code)
	}
}

func TestAdminGetLine(t *testing.T) {
	g, _ := adminGate(t, "queueing", func(c *Config) { c.MaxHandshakes = 10 })
	g.join(t, "alice", "")
	g.join(t, "bob", "")
	g.advance(t, 3*time.Second)
	v := g.getLine(t)
	if v.Mode != "queueing" || v.Length != 2 || v.Waiting != 2 || v.Rate.N != 1000 || v.Rate.Interval != "10s" ||
		v.Rate.PerSecond != 100 || v.MaxLength != 200_000 || v.OldestWaitMs != 3000 || v.Room == nil || *v.Room != 10 ||
		v.Auto.Enabled || v.Auto.MinRate != 10 || v.Auto.MaxRate != 1000 {
		t.Fatalf("GET: %+v", v)
	}
	// Raw JSON has the documented names.
	_, body := g.admin(t, http.MethodGet, "Bearer "+testAdminToken, "")
	for _, k := range []string{`"mode"`, `"rate"`, `"interval"`, `"length"`, `"waiting"`, `"admitted_total"`, `"dropped_total"`,
		`"measured_rate"`, `"oldest_wait_ms"`, `"room"`, `"auto"`, `"min_rate"`, `"signals"`} {
		if !strings.Contains(body, k) {
			t.Errorf("GET lacks %s: %s", k, body)
		}
	}
}

func TestAdminRefusesBadValuesAndChangesNothing(t *testing.T) {
	g, logs := adminGate(t, "paced", nil)
	before := g.getLine(t)
	for _, body := range []string{
		"rate=0",
		"rate=-5",
		"rate=abc",
		"rate=1.5",
		"rate=10000000000",         // 10^10 per 10 s: absurd
		"rate=2000000&interval=1s", // 2 M per second: over the queue's bound
		"interval=0s",              // zero
		"interval=-1s",             // negative
		"interval=10",              // no unit
		"interval=2h",              // past the bound
		"mode=bogus",               // unknown mode
		"mode=open&rate=0",         // one bad value spoils the whole change
		"mode=open&max_length=0",   // idem
		"max_length=-1",            //
		"max_length=100000000",     // past the bound
		"retry_after=0s",           //
		"retry_after=-1m",          //
		"retry_after=48h",          //
		"auto_min_rate=0",          //
		"auto_min_rate=500&auto_max_rate=100",
		"auto_min_rate=2000",            // above the current max
		"mode=auto&rate=1&interval=1s",  // 1/s is below the 10/s auto minimum
		"speed=fast",                    // unknown field
		"mode=open&mode=closed",         // twice
		"",                              // nothing
		`{"rate": 0}`,                   // JSON too
		`{"mode": "paced", "rate": -1}`, //
		`{"rate": true}`,                //
		`{"interval": 10}`,              // a JSON number has no unit
		`[1, 2]`,                        // not an object
		`{"mode": "open", "extra": 1}`,  // unknown field
	} {
		code, msg := g.admin(t, http.MethodPost, "Bearer "+testAdminToken, body)
		if code != http.StatusBadRequest || len(strings.TrimSpace(msg)) < 10 {
			t.Errorf("POST %q: %d %q, want 400 with a message", body, code, msg)
		}
	}
	after := g.getLine(t)
	if after.Mode != before.Mode || after.Rate != before.Rate || after.MaxLength != before.MaxLength ||
		after.RetryAfter != before.RetryAfter || after.Auto.MinRate != before.Auto.MinRate || after.Auto.MaxRate != before.Auto.MaxRate {
		t.Fatalf("a refused change changed the line:\nbefore %+v\nafter  %+v", before, after)
	}
	if strings.Contains(logs.String(), "admission line changed") {
		t.Fatalf("a refused change was logged as a change: %s", logs)
	}
	// The message names the field.
	_, msg := g.admin(t, http.MethodPost, "Bearer "+testAdminToken, "interval=-1s")
	if !strings.Contains(msg, "interval") {
		t.Fatalf("message %q does not name the field", msg)
	}
}

func TestAdminChangesAreImmediateAndLogged(t *testing.T) {
	g, logs := adminGate(t, "paced", nil)
	tok := "Bearer " + testAdminToken
	code, body := g.admin(t, http.MethodPost, tok, "mode=queueing&retry_after=10m&max_length=5000")
	if code != http.StatusOK {
		t.Fatalf("POST: %d %s", code, body)
	}
	var v lineapi.View
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Mode != "queueing" || v.RetryAfter != "10m0s" || v.MaxLength != 5000 {
		t.Fatalf("POST answered %+v (%v)", v, err)
	}
	if st := g.stats(); st.Mode != queue.Queueing || st.RetryAfter != 10*time.Minute || st.MaxLength != 5000 {
		t.Fatalf("queue %+v", st)
	}
	code, body = g.admin(t, http.MethodPost, tok, `{"mode": "paced", "rate": 500, "interval": "5s"}`)
	if code != http.StatusOK {
		t.Fatalf("POST JSON: %d %s", code, body)
	}
	if st := g.stats(); st.Mode != queue.Paced || st.Rate != (queue.Rate{N: 500, Interval: 5 * time.Second}) {
		t.Fatalf("queue %+v", st)
	}
	if got := testutil.ToFloat64(g.m.line.releaseRate); got != 100 {
		t.Fatalf("gate_line_release_rate = %v, want 100", got)
	}
	if got := testutil.ToFloat64(g.m.line.mode.WithLabelValues("paced")); got != 1 {
		t.Fatalf("gate_line_mode{paced} = %v", got)
	}
	if got := testutil.ToFloat64(g.m.line.mode.WithLabelValues("queueing")); got != 0 {
		t.Fatalf("gate_line_mode{queueing} = %v", got)
	}
	log := logs.String()
	for _, want := range []string{"admission line changed", "mode.old=paced", "mode.new=queueing", "retry_after.old=1m0s",
		"retry_after.new=10m0s", "max_length.new=5000", "mode.old=queueing", "mode.new=paced",
		`rate.old="1000 per 10s"`, `rate.new="500 per 5s"`, "remote=127.0.0.1:"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestSeedTimeline runs the seed's launch with the admin API, at a scale a
// test can take: the line opens in queueing (accept, forward nothing), then
// releases at a pace, speeds up, and opens.
func TestSeedTimeline(t *testing.T) {
	logic := startFakeLogic(t)
	logs := &syncBuffer{}
	g := startGateLog(t, func(c *Config) { c.AdminToken = testAdminToken }, newTextLogger(logs), logic)
	testwait.Until(t, "the walker's ticker", g.line.ticking.Load)
	tok := "Bearer " + testAdminToken
	post := func(body string) {
		t.Helper()
		g.quiesce() // so the change's push reaches everyone (see quiesce)
		if code, msg := g.admin(t, http.MethodPost, tok, body); code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", body, code, msg)
		}
		g.waitPoked(t)
	}

	post("mode=queueing") // T-5 min
	var cs []*client
	for i := range 12 {
		c, st := g.join(t, fmt.Sprintf("p%02d", i), "")
		if st.GetPosition() != uint64(i+1) {
			t.Fatalf("p%02d at %d", i, st.GetPosition())
		}
		cs = append(cs, c)
	}
	if n := len(logic.requests()); n != 0 {
		t.Fatalf("queueing forwarded %d requests to logic", n)
	}

	post("mode=paced&rate=2&interval=1s") // T-0: 2 per second here (1,000 per 10 s in the seed)
	for _, c := range cs {
		c.recvStatus() // the switch is pushed at once
	}
	g.advance(t, 2*time.Second)
	if n := g.stats().Admitted; n != 4 {
		t.Fatalf("after 2 s at 2/s: %d admitted, want 4", n)
	}
	post("rate=4") // T+5: faster (the interval stays 1 s)
	g.advance(t, time.Second)
	if n := g.stats().Admitted; n != 8 {
		t.Fatalf("after 1 s more at 4/s: %d admitted, want 8", n)
	}
	post("mode=open") // T+15: the line is done
	if st := g.stats(); st.Admitted != 12 || st.Length != 0 {
		t.Fatalf("after opening: %+v", st)
	}
	for i, c := range cs {
		for {
			f := c.recv()
			if f.GetQueue() != nil {
				continue
			}
			if f.GetAdmitted() == nil {
				t.Fatalf("p%02d: want Admitted, got %v", i, f)
			}
			if w := c.recv(); w.GetWelcome() == nil {
				t.Fatalf("p%02d: want the welcome, got %v", i, w)
			}
			break
		}
	}
	// A newcomer now goes straight in.
	g.connect(t, "late", "")

	post("mode=closed&retry_after=30m") // maintenance
	dialURL := g.lineURL(t, "later", "")
	if e := g.refusedCode(t, dialURL); e.GetRetryAfterMs() != 1_800_000 {
		t.Fatalf("closed: %v", e)
	}
	for _, want := range []string{"mode.new=queueing", "mode.new=paced", `rate.new="4 per 1s"`, "mode.new=open", "mode.new=closed"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

func TestAdminAutoMode(t *testing.T) {
	g, _ := adminGate(t, "paced", nil)
	tok := "Bearer " + testAdminToken
	code, body := g.admin(t, http.MethodPost, tok, "mode=auto&auto_min_rate=50&auto_max_rate=400")
	if code != http.StatusOK {
		t.Fatalf("POST: %d %s", code, body)
	}
	v := g.getLine(t)
	if v.Mode != "auto" || !v.Auto.Enabled || v.Auto.MinRate != 50 || v.Auto.MaxRate != 400 || v.Auto.Rate != 100 {
		t.Fatalf("auto: %+v", v)
	}
	if g.line.q.Mode() != queue.Paced {
		t.Fatal("auto mode is paced underneath")
	}
	if got := testutil.ToFloat64(g.m.line.mode.WithLabelValues("auto")); got != 1 {
		t.Fatalf("gate_line_mode{auto} = %v", got)
	}
	// Bounds that exclude the current rate pull it in.
	if code, body = g.admin(t, http.MethodPost, tok, "auto_min_rate=200"); code != http.StatusOK {
		t.Fatalf("POST: %d %s", code, body)
	}
	if st := g.stats(); st.ConfiguredPerSecond != 200 {
		t.Fatalf("rate %v/s, want the new minimum 200/s", st.ConfiguredPerSecond)
	}
	if code, body = g.admin(t, http.MethodPost, tok, "mode=paced"); code != http.StatusOK {
		t.Fatalf("POST: %d %s", code, body)
	}
	if v := g.getLine(t); v.Mode != "paced" || v.Auto.Enabled {
		t.Fatalf("after leaving auto: %+v", v)
	}
}

// refusedCode dials and returns the refusal error (any code), after the close.
func (g *testGate) refusedCode(t *testing.T, rawURL string) interface {
	GetRetryAfterMs() uint32
	GetMessage() string
} {
	t.Helper()
	c := dialRaw(t, rawURL, "", nil)
	f := c.recv()
	if f.GetError() == nil {
		t.Fatalf("want a refusal, got %v", f)
	}
	c.recvClose()
	return f.GetError()
}
