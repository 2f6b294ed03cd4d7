package gate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestPacedLineOrderTicketsAndRelease(t *testing.T) {
	logic := startFakeLogic(t)
	g := lineGate(t, "paced", 1, time.Second, nil, logic)
	players := []string{"p0", "p1", "p2", "p3"}
	clients := map[string]*client{}
	for i, p := range players {
		c, st := g.join(t, p, "")
		clients[p] = c
		want := uint64(i + 1)
		if st.GetPosition() != want || st.GetLineLength() != want || st.GetMode() != "paced" ||
			st.GetTicket() == "" || st.GetGraceMs() != 60_000 || st.GetReleaseRate() != 1 {
			t.Fatalf("%s: status %v, want position %d of %d, paced, a ticket", p, st, want, want)
		}
		if st.GetEtaMs() != want*1000 { // position / 1 per second
			t.Fatalf("%s: eta %d ms, want %d", p, st.GetEtaMs(), want*1000)
		}
		if _, err := verifyTicket(g.ring(), st.GetTicket(), p, g.clock.Now()); err != nil {
			t.Fatalf("%s: ticket: %v", p, err)
		}
	}
	// Requests before admission: NOT_ADMITTED with the ETA as retry_after,
	// and logic sees nothing (no login either).
	if e := clients["p3"].probe(1); e.GetRetryAfterMs() != 4000 {
		t.Fatalf("NOT_ADMITTED retry_after %d ms, want the 4 s ETA", e.GetRetryAfterMs())
	}
	if n := len(logic.requests()); n != 0 {
		t.Fatalf("logic got %d requests from waiting players", n)
	}

	// One per second, in arrival order: Admitted, then the welcome.
	g.advance(t, time.Second)
	if w := clients["p0"].recvAdmitted("p0"); w != time.Second {
		t.Fatalf("p0 waited %v, want 1s", w)
	}
	clients["p0"].send(profileFrame(2))
	if f := clients["p0"].recv(); replyOf(f, &arenapb.ProfileReply{}).GetPlayer().GetId() != "p0" {
		t.Fatalf("p0 after admission: %v", f)
	}
	clients["p1"].probe(3) // no push at 1 s

	g.advance(t, time.Second) // t = 2 s: p1 goes in, the others get a push
	if w := clients["p1"].recvAdmitted("p1"); w != 2*time.Second {
		t.Fatalf("p1 waited %v", w)
	}
	for i, p := range []string{"p2", "p3"} {
		st := clients[p].recvStatus()
		if st.GetPosition() != uint64(i+1) || st.GetLineLength() != 2 {
			t.Fatalf("%s at 2 s: %v, want position %d of 2", p, st, i+1)
		}
	}
	g.advance(t, 2*time.Second) // p2 at 3 s, p3 at 4 s (released before the push)
	if w := clients["p2"].recvAdmitted("p2"); w != 3*time.Second {
		t.Fatalf("p2 waited %v", w)
	}
	if w := clients["p3"].recvAdmitted("p3"); w != 4*time.Second {
		t.Fatalf("p3 waited %v", w)
	}

	m := g.m.line
	if got := testutil.ToFloat64(m.admitted); got != 4 {
		t.Fatalf("gate_line_admitted_total = %v, want 4", got)
	}
	if got := testutil.ToFloat64(m.length); got != 0 {
		t.Fatalf("gate_line_length = %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.releaseRate); got != 1 {
		t.Fatalf("gate_line_release_rate = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.mode.WithLabelValues("paced")); got != 1 {
		t.Fatalf("gate_line_mode{paced} = %v", got)
	}
	if got := testutil.ToFloat64(m.pushes[pushSent]); got != 6 { // 4 first ones + 2 at 2 s
		t.Fatalf("gate_line_pushes_total{sent} = %v, want 6", got)
	}
	wantMetric(t, g, "gate_line_wait_seconds_sum", 10) // 1 + 2 + 3 + 4
	wantMetric(t, g, "gate_line_wait_seconds_count", 4)
	logins := 0
	for _, r := range logic.requests() {
		if r.GetLogin() != nil {
			logins++
		}
	}
	if logins != 4 {
		t.Fatalf("logic got %d logins, want 4", logins)
	}
}

// wantMetric checks one unlabelled sample of the gate's registry.
func wantMetric(t *testing.T, g *testGate, name string, want float64) {
	t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	base, suffix := name, ""
	for _, s := range []string{"_sum", "_count"} {
		if strings.HasSuffix(name, s) {
			base, suffix = strings.TrimSuffix(name, s), s
		}
	}
	for _, mf := range mfs {
		if mf.GetName() != base {
			continue
		}
		m := mf.GetMetric()[0]
		var got float64
		switch {
		case suffix == "_sum":
			got = m.GetHistogram().GetSampleSum()
		case suffix == "_count":
			got = float64(m.GetHistogram().GetSampleCount())
		case m.GetGauge() != nil:
			got = m.GetGauge().GetValue()
		default:
			got = m.GetCounter().GetValue()
		}
		if got != want {
			t.Fatalf("%s = %v, want %v", name, got, want)
		}
		return
	}
	t.Fatalf("%s not found", name)
}

func TestStatusPushesAreCoalesced(t *testing.T) {
	g := lineGate(t, "queueing", 1000, 10*time.Second, func(c *Config) { c.LinePush = 2 * time.Second })
	var cs []*client
	for i := range 3 {
		c, st := g.join(t, fmt.Sprintf("w%d", i), "")
		if st.GetMode() != "queueing" || st.GetEtaMs() != 0 || st.GetReleaseRate() != 0 {
			t.Fatalf("a held line: %v, want no ETA and no rate", st)
		}
		cs = append(cs, c)
	}
	id := uint64(0)
	probeAll := func() {
		for _, c := range cs {
			id++
			if e := c.probe(id); e.GetRetryAfterMs() != uint32(maxNotAdmittedRetry.Milliseconds()) {
				t.Fatalf("NOT_ADMITTED with no ETA: retry_after %d ms, want the cap", e.GetRetryAfterMs())
			}
		}
	}
	g.advance(t, 1900*time.Millisecond) // 19 walker steps, no push yet
	probeAll()
	for round := 1; round <= 2; round++ {
		g.advance(t, 100*time.Millisecond) // a push interval is up: exactly one push each
		if round == 2 {
			g.advance(t, 1900*time.Millisecond)
		}
		for i, c := range cs {
			if st := c.recvStatus(); st.GetPosition() != uint64(i+1) || st.GetLineLength() != 3 {
				t.Fatalf("round %d, waiter %d: %v", round, i, st)
			}
		}
		probeAll()
	}
	if got := testutil.ToFloat64(g.m.line.pushes[pushSent]); got != 9 { // 3 first + 2 rounds of 3
		t.Fatalf("gate_line_pushes_total{sent} = %v, want 9", got)
	}
	if got := testutil.ToFloat64(g.m.requests.WithLabelValues(arena.ActionGetProfile, "not_admitted")); got != 9 {
		t.Fatalf("gate_requests_total{get_profile,not_admitted} = %v, want 9", got)
	}
}

func TestResumeWithTicketKeepsThePlace(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, nil)
	a, _ := g.join(t, "alice", "")
	b, bst := g.join(t, "bob", "")
	c, _ := g.join(t, "carol", "")
	g.closeClient(t, b, 1)
	_ = b
	if st := g.stats(); st.Length != 3 || st.Away != 1 {
		t.Fatalf("stats %+v: bob keeps his place while away", st)
	}
	g.advance(t, 2*time.Second)
	if st := c.recvStatus(); st.GetPosition() != 3 {
		t.Fatalf("carol moved to %d while bob is away; want 3", st.GetPosition())
	}
	a.recvStatus()

	b2, st := g.join(t, "bob", bst.GetTicket())
	if st.GetPosition() != 2 || st.GetTicket() != bst.GetTicket() {
		t.Fatalf("bob resumed at %v, want position 2 with the same ticket", st)
	}
	// The same ticket on a second connection is refused, and changes nothing.
	e := g.refused(t, g.lineURL(t, "bob", bst.GetTicket()), leveev2.ErrorCode_ERROR_CODE_TICKET_IN_USE, websocket.ClosePolicyViolation)
	if !strings.Contains(e.GetMessage(), "another connection") {
		t.Fatalf("in-use message %q", e.GetMessage())
	}
	if got := testutil.ToFloat64(g.m.line.refusals[refuseTicketInUse]); got != 1 {
		t.Fatalf("gate_line_refusals_total{ticket_in_use} = %v", got)
	}
	b2.probe(1)

	g.setLine(t, map[string]string{"mode": "paced"}) // pushed at once
	for i, c := range []*client{a, b2, c} {
		if st := c.recvStatus(); st.GetPosition() != uint64(i+1) || st.GetMode() != "paced" || st.GetEtaMs() != uint64(i+1)*1000 {
			t.Fatalf("waiter %d after the switch: %v", i, st)
		}
	}
	g.advance(t, 3*time.Second) // alice at +1 s, bob at +2 s, the push, carol at +3 s
	a.recvAdmitted("alice")
	b2.recvAdmitted("bob")
	if st := c.recvStatus(); st.GetPosition() != 1 {
		t.Fatalf("carol: %v", st)
	}
	c.recvAdmitted("carol")
}

func TestGraceOverRejoinsAtTheBack(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, func(c *Config) { c.LineGrace = 5 * time.Second })
	a, ast := g.join(t, "alice", "")
	g.join(t, "bob", "")
	g.closeClient(t, a, 1)
	g.advance(t, 5*time.Second)
	_, st := g.join(t, "alice", ast.GetTicket())
	if st.GetPosition() != 2 || st.GetTicket() == ast.GetTicket() {
		t.Fatalf("alice after grace: %v, want the back of the line (2) with a new ticket", st)
	}
	if s := g.stats(); s.Dropped != 1 || s.Length != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBadTicketsAreRefusedAndChangeNothing(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, nil)
	a, ast := g.join(t, "alice", "")
	g.join(t, "bob", "")
	claims, err := verifyTicket(g.ring(), ast.GetTicket(), "alice", g.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	before := g.stats()
	tok := ast.GetTicket()
	sig := strings.LastIndexByte(tok, '.') + 1 // change the MAC's first character
	flipped := tok[:sig] + "A" + tok[sig+1:]
	if tok[sig] == 'A' {
		flipped = tok[:sig] + "B" + tok[sig+1:]
	}
	unauthorized, forbidden, inUse := leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED, leveev2.ErrorCode_ERROR_CODE_FORBIDDEN, leveev2.ErrorCode_ERROR_CODE_TICKET_IN_USE
	// Admission passes, of this line and of another: refused as tickets.
	pass := signPass(g.signingKey(), g.line.id+1, claims.ID, "alice", t0, t0.Add(time.Hour))
	psig := strings.LastIndexByte(pass, '.') + 1
	forgedPass := pass[:psig] + "A" + pass[psig+1:]
	if pass[psig] == 'A' {
		forgedPass = pass[:psig] + "B" + pass[psig+1:]
	}
	for _, tc := range []struct {
		name, player, ticket string
		code                 leveev2.ErrorCode
		msg                  string
	}{
		{"forged signature", "alice", flipped, unauthorized, "signature"},
		{"garbage", "alice", "not-a-ticket", unauthorized, "malformed"},
		{"other secret", "alice", signTicket(keyOf([]byte("other")), g.line.id, claims.ID, "alice", t0, t0.Add(time.Hour)), unauthorized, "signature"},
		{"expired", "alice", signTicket(g.signingKey(), g.line.id, claims.ID, "alice", t0, t0.Add(-time.Second)), unauthorized, "expired"},
		{"player token as ticket", "alice", g.tokenFor(t, "alice"), unauthorized, "malformed"},
		{"another player's", "bob", tok, forbidden, "another player"},
		{"in use", "alice", tok, inUse, "another connection"},
		{"forged pass", "alice", forgedPass, unauthorized, "signature"},
		{"expired pass", "alice", signPass(g.signingKey(), g.line.id, claims.ID, "alice", t0, t0.Add(-time.Second)), unauthorized, "expired"},
		{"another player's pass", "bob", pass, forbidden, "another player"},
		{"pass of another secret", "alice", signPass(keyOf([]byte("other")), g.line.id+1, claims.ID, "alice", t0, t0.Add(time.Hour)), unauthorized, "signature"},
	} {
		e := g.refused(t, g.lineURL(t, tc.player, tc.ticket), tc.code, websocket.ClosePolicyViolation)
		if !strings.Contains(e.GetMessage(), tc.msg) {
			t.Errorf("%s: message %q lacks %q", tc.name, e.GetMessage(), tc.msg)
		}
	}
	after := g.stats()
	if after.Joined != before.Joined || after.Length != before.Length || after.Away != before.Away || after.Dropped != before.Dropped {
		t.Fatalf("the line changed: before %+v, after %+v", before, after)
	}
	if got := testutil.ToFloat64(g.m.line.refusals[refuseBadTicket]); got != 10 {
		t.Fatalf("gate_line_refusals_total{bad_ticket} = %v, want 10", got)
	}
	if got := testutil.ToFloat64(g.m.line.refusals[refuseTicketInUse]); got != 1 {
		t.Fatalf("gate_line_refusals_total{ticket_in_use} = %v, want 1", got)
	}
	g.advance(t, 2*time.Second)
	if st := a.recvStatus(); st.GetPosition() != 1 {
		t.Fatalf("alice is at %d, want 1", st.GetPosition())
	}

	// A t1 ticket of another gate's line (same secret, no join time) is
	// not an error: the player comes as a new arrival, and as alice holds
	// a place (one player, one place) the new connection takes it over and
	// the old one is closed with 4001.
	other := signTicketV1(g.signingKey().Secret, g.line.id+1, claims.ID, "alice", t0.Add(time.Hour))
	_, st := g.join(t, "alice", other)
	if st.GetPosition() != 1 || st.GetTicket() == other {
		t.Fatalf("a ticket from another gate: %v, want alice's one place (1) and this line's ticket", st)
	}
	if nu, err := verifyTicket(g.ring(), st.GetTicket(), "alice", g.clock.Now()); err != nil || nu.ID != claims.ID {
		t.Fatalf("alice's ticket after the second connection: %+v %v, want ticket %v", nu, err, claims.ID)
	}
	if code := a.recvClose(); code != apperr.CloseReplaced {
		t.Fatalf("alice's first connection closed with %d, want %d", code, apperr.CloseReplaced)
	}
	if s := g.stats(); s.Length != 2 {
		t.Fatalf("stats %+v: still two places", s)
	}
}

func TestClosedModeRefusesNewcomersWithRetryAfter(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, func(c *Config) { c.LineRetryAfter = 10 * time.Minute })
	a, ast := g.join(t, "alice", "")
	g.closeClient(t, a, 1)
	g.setLine(t, map[string]string{"mode": "closed"})

	for _, sp := range []string{wire.ProtoSubprotocol, wire.JSONSubprotocol} {
		c := dialRaw(t, g.lineURL(t, "bob", ""), sp, nil)
		e := wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE)
		if e.GetRetryAfterMs() != 600_000 || !strings.Contains(e.GetMessage(), "maintenance") || !strings.Contains(e.GetMessage(), "10 minutes") {
			t.Fatalf("closed refusal %v", e)
		}
		if code := c.recvClose(); code != websocket.CloseTryAgainLater {
			t.Fatalf("close %d, want 1013", code)
		}
	}
	if got := testutil.ToFloat64(g.m.line.refusals[refuseClosed]); got != 2 {
		t.Fatalf("gate_line_refusals_total{closed} = %v", got)
	}
	// A player who was in line before the closing keeps their place.
	_, st := g.join(t, "alice", ast.GetTicket())
	if st.GetPosition() != 1 || st.GetMode() != "closed" {
		t.Fatalf("alice back in a closed line: %v", st)
	}
	if got := testutil.ToFloat64(g.m.line.mode.WithLabelValues("closed")); got != 1 {
		t.Fatalf("gate_line_mode{closed} = %v", got)
	}
}

func TestFullLineRefusesWithServerFull(t *testing.T) {
	g := lineGate(t, "paced", 1, time.Second, func(c *Config) { c.LineMax = 2 })
	g.join(t, "a", "")
	g.join(t, "b", "")
	e := g.refused(t, g.lineURL(t, "c", ""), leveev2.ErrorCode_ERROR_CODE_SERVER_FULL, websocket.CloseTryAgainLater)
	if ms := e.GetRetryAfterMs(); ms < 800 || ms > 1200 {
		t.Fatalf("retry_after %d ms, want the 1 s interval ± 20 %%", ms)
	}
	if got := testutil.ToFloat64(g.m.line.refusals[refuseFull]); got != 1 {
		t.Fatalf("gate_line_refusals_total{full} = %v", got)
	}
}

func TestReconnectAfterAdmissionTakesThePriorityLane(t *testing.T) {
	g := lineGate(t, "paced", 1, time.Second, nil)
	a, ast := g.join(t, "alice", "")
	g.advance(t, time.Second)
	a.recvAdmitted("alice")
	b, _ := g.join(t, "bob", "")
	c, _ := g.join(t, "carol", "")
	_ = a.ws.Close() // alice drops in the middle of a match

	a2, st := g.join(t, "alice", ast.GetTicket())
	if st.GetPosition() != 1 || st.GetTicket() == ast.GetTicket() {
		t.Fatalf("alice reconnecting: %v, want the priority lane's first place and a new ticket", st)
	}
	if s := g.stats(); s.Priority != 1 || s.Length != 3 {
		t.Fatalf("stats %+v", s)
	}
	g.advance(t, time.Second) // t = 2 s: alice goes first, then the push
	a2.recvAdmitted("alice")
	for i, x := range []*client{b, c} {
		if st := x.recvStatus(); st.GetPosition() != uint64(i+1) {
			t.Fatalf("after alice: %v, want position %d", st, i+1)
		}
	}
	g.advance(t, 2*time.Second)
	b.recvAdmitted("bob")
	c.recvAdmitted("carol")

	// The old ticket was used: a second reconnect with it goes to the back.
	g.setLine(t, map[string]string{"mode": "queueing"})
	g.join(t, "dave", "")
	if _, st := g.join(t, "alice", ast.GetTicket()); st.GetPosition() != 2 {
		t.Fatalf("reusing a spent ticket: %v, want the back", st)
	}
}

func TestReleasedWhileAwayIsAdmittedOnReturn(t *testing.T) {
	g := lineGate(t, "paced", 1, time.Second, nil)
	a, ast := g.join(t, "alice", "")
	g.closeClient(t, a, 1)
	g.advance(t, 3*time.Second) // alice's turn came while she was away
	if st := g.stats(); st.Held != 1 || st.Length != 0 {
		t.Fatalf("stats %+v, want alice held", st)
	}
	c := dialRaw(t, g.lineURL(t, "alice", ast.GetTicket()), wire.ProtoSubprotocol, nil)
	if w := c.recvAdmitted("alice"); w != 3*time.Second {
		t.Fatalf("waited %v, want 3s", w)
	}
	c.send(profileFrame(1))
	if f := c.recv(); !isProfile(f) {
		t.Fatalf("after admission: %v", f)
	}
}

func TestOpenModeAdmitsAtOnceAndSwitchingReleasesEveryone(t *testing.T) {
	logic := startFakeLogic(t)
	g := lineGate(t, "open", 1000, 10*time.Second, nil, logic)
	g.connect(t, "alice", wire.ProtoSubprotocol) // welcome first, as before the line
	if got := testutil.ToFloat64(g.m.line.admitted); got != 1 {
		t.Fatalf("gate_line_admitted_total = %v", got)
	}
	g.setLine(t, map[string]string{"mode": "queueing"})
	b, _ := g.join(t, "bob", "")
	c, _ := g.join(t, "carol", "")
	g.setLine(t, map[string]string{"mode": "open"})
	g.advance(t, lineTick)
	b.recvAdmitted("bob")
	c.recvAdmitted("carol")
	// With someone waiting, a newcomer in open mode joins the line first.
	g.setLine(t, map[string]string{"mode": "queueing"})
	d, _ := g.join(t, "dave", "")
	g.setLine(t, map[string]string{"mode": "open"})
	_ = d
	g.advance(t, lineTick)
	d.recvAdmitted("dave")
}

func TestWaitingPlayersDoNotCountAsHandshakes(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, func(c *Config) { c.MaxHandshakes = 2 })
	for i := range 5 {
		g.join(t, fmt.Sprintf("w%d", i), "")
	}
	// The handshake ends just after the first push is written.
	testwait.Until(t, "no handshakes in progress with 5 players waiting", func() bool { return g.handshakes.Load() == 0 })
	if got := g.room(); got != 2 {
		t.Fatalf("room %d, want the 2 free handshakes", got)
	}
	// Open: released at most 2 per step (the handshake cap bounds logins).
	g.setLine(t, map[string]string{"mode": "open"})
	if n := g.stats().Admitted; n != 2 {
		t.Fatalf("the switch to open released %d, want the 2 the handshake cap has room for", n)
	}
	for i := 0; g.stats().Admitted < 5; i++ {
		if i == 100 {
			t.Fatalf("admitted %d of 5", g.stats().Admitted)
		}
		g.advance(t, lineTick)
	}
}

func TestShutdownClosesWaitingPlayers(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, nil)
	c, _ := g.join(t, "alice", "")
	g.cancel()
	if code := c.recvClose(); code != websocket.CloseServiceRestart {
		t.Fatalf("close %d, want 1012", code)
	}
	g.stop(t)
	if st := g.stats(); st.Away != 1 {
		t.Fatalf("stats %+v: alice left", st)
	}
}

func TestPaceIsSmoothAndMeasured(t *testing.T) {
	g := lineGate(t, "paced", 10, time.Second, nil) // one every 100 ms
	var cs []*client
	for i := range 25 {
		c, _ := g.join(t, fmt.Sprintf("p%02d", i), "")
		cs = append(cs, c)
	}
	for step := 1; step <= 25; step++ {
		g.advance(t, lineTick)
		if n := g.stats().Admitted; n != uint64(step) {
			t.Fatalf("after %d steps of 100 ms: %d admitted, want %d (no bursts)", step, n, step)
		}
	}
	for i, c := range cs {
		for {
			f := c.recv()
			if f.GetQueue() != nil {
				continue
			}
			if f.GetAdmitted() == nil || f.GetAdmitted().GetWaitedMs() != uint64(i+1)*100 {
				t.Fatalf("p%02d: %v, want Admitted after %d ms", i, f, (i+1)*100)
			}
			break
		}
	}
	if got := testutil.ToFloat64(g.m.line.measuredRate); got < 9.5 || got > 10.5 {
		t.Fatalf("gate_line_measured_rate = %v, want about 10", got)
	}
}

func TestQueueStatusOverJSON(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, nil)
	c := dialRaw(t, g.lineURL(t, "alice", ""), wire.JSONSubprotocol, nil)
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	mt, b, err := c.ws.ReadMessage()
	if err != nil || mt != websocket.TextMessage {
		t.Fatalf("read %v %v", mt, err)
	}
	for _, want := range []string{`"queue"`, `"position":"1"`, `"ticket":"t2.`, `"mode":"queueing"`, `"graceMs":60000`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("JSON push %s lacks %s", b, want)
		}
	}
}
