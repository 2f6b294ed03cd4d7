package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/gate/waitpage"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/testbrowser"
)

// The browser test drives Debian's chromium against the waiting page,
// served by a fake gate: the real gate's admission line is tested on its own,
// this test is about what a person sees. The fake gate's script, for one
// player: 5 and 4 on the first connection, then a 1012 close (a gate
// restart); the page reconnects with its ticket; 3 (held there until the
// test has its screenshot), 2, 1, admitted, welcome. As the real gate does,
// only a connection's first status carries the ticket. Real time, as a
// browser needs it: about 2 s plus the page's random 0-5 s reconnect delay.
// Another player ("carl") is pushed one status far back in a moving line
// and nothing more: the page counts it down.

const (
	browserTicket      = "tkt-1"
	pushEvery          = 300 * time.Millisecond
	browserFarPosition = 5000
)

var browserSecret = []byte("browser-test-secret")

// browserGate serves the waiting page at "/" and a scripted line at /ws.
type browserGate struct {
	srv  *httptest.Server
	ctx  context.Context
	hold chan struct{} // closed by the test to let the line move past 3
	wg   sync.WaitGroup

	mu      sync.Mutex
	tickets []string // the ticket each accepted connection presented
	tlsWS   []bool   // for each /ws request: whether it came over TLS
}

func startBrowserGate(t *testing.T) *browserGate { return startBrowserGateScheme(t, false) }

// startBrowserGateScheme is startBrowserGate serving https and wss when
// useTLS (httptest's certificate for 127.0.0.1).
func startBrowserGateScheme(t *testing.T, useTLS bool) *browserGate {
	ctx, cancel := context.WithCancel(context.Background())
	g := &browserGate{ctx: ctx, hold: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("GET /", waitpage.Handler())
	mux.HandleFunc("GET /ws", g.serveWS)
	g.srv = httptest.NewUnstartedServer(mux) // 127.0.0.1
	if useTLS {
		g.srv.StartTLS()
	} else {
		g.srv.Start()
	}
	t.Cleanup(func() {
		cancel()
		g.srv.Close()
		g.wg.Wait() // the upgraded connections' handlers
	})
	return g
}

var browserUpgrader = websocket.Upgrader{Subprotocols: []string{wire.JSONSubprotocol}}

func (g *browserGate) serveWS(w http.ResponseWriter, r *http.Request) {
	g.wg.Add(1)
	defer g.wg.Done()
	g.mu.Lock()
	g.tlsWS = append(g.tlsWS, r.TLS != nil)
	g.mu.Unlock()
	ws, err := browserUpgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	gone := make(chan struct{})
	go func() { // the reader, needed to see the player's close frame
		defer close(gone)
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
	defer func() { _ = ws.Close(); <-gone }()
	c := &browserConn{ws: ws, codec: wire.Codec{JSON: true, Game: wire.ForGame(arena.Game().Def())}, gone: gone, ctx: g.ctx}
	if ws.Subprotocol() != wire.JSONSubprotocol {
		c.close(websocket.CloseProtocolError, "want "+wire.JSONSubprotocol)
		return
	}
	player, err := token.Verify(browserSecret, r.URL.Query().Get("token"), time.Now())
	if err != nil {
		c.send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: apperr.Reply(fmt.Errorf("%w: %v", apperr.ErrUnauthorized, err), 0)}})
		c.close(websocket.ClosePolicyViolation, "unauthorized")
		return
	}
	if player == "carl" { // far back in a moving line; the next push is far off
		if c.send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Queue{Queue: &leveev2.QueueStatus{
			Position: browserFarPosition, EtaMs: browserFarPosition * 10, ReleaseRate: 100,
			LineLength: browserFarPosition + 50, Ticket: "tkt-carl", GraceMs: 60_000, Mode: "paced",
		}}}) {
			c.stay()
		}
		return
	}
	if player == "dave" { // the page over https: one status, then stay
		if c.queue(2, nil) {
			c.stay()
		}
		return
	}
	if player == "bob" { // the gate is full: SERVER_FULL with retry_after, then 1013
		c.send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: &leveev2.Error{
			Code: leveev2.ErrorCode_ERROR_CODE_SERVER_FULL, Message: "the server is full", RetryAfterMs: 30_000}}})
		c.close(websocket.CloseTryAgainLater, "try again later")
		return
	}
	g.mu.Lock()
	g.tickets = append(g.tickets, r.URL.Query().Get("ticket"))
	n := len(g.tickets)
	g.mu.Unlock()
	switch n {
	case 1: // 5, 4, then the gate "restarts"
		_ = c.queue(5, nil) && c.queue(4, nil) && c.close(websocket.CloseServiceRestart, "server restarting")
	case 2: // 3 (held), 2, 1, admitted, welcome; then stay connected
		if c.queue(3, g.hold) && c.queue(2, nil) && c.queue(1, nil) &&
			c.after(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Admitted{Admitted: &leveev2.Admitted{WaitedMs: 4200}}}) &&
			c.send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Welcome{Welcome: &leveev2.Welcome{
				PlayerId: player, Shard: 3, Version: 4, State: welcomeState(player)}}}) {
			c.stay()
		}
	default:
		c.close(websocket.CloseTryAgainLater, "unexpected connection")
	}
}

// welcomeState is arena's state of a player at level 7 with 1,234 gold:
// a welcome carries the game's state, which the waiting page does not show.
func welcomeState(player string) []byte {
	b, err := proto.Marshal(&arenapb.Player{Id: player, Level: 7, Gold: 1234})
	if err != nil {
		panic(err)
	}
	return b
}

// browserConn is one scripted connection; each step reports whether to go on.
type browserConn struct {
	ws       *websocket.Conn
	codec    wire.Codec
	gone     chan struct{}
	ctx      context.Context
	ticketed bool // a status with the ticket was sent: later ones leave it out
}

func (c *browserConn) send(f *leveev2.ServerFrame) bool {
	data, err := c.codec.EncodeServer(f, "")
	if err != nil {
		return false
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, data) == nil
}

// wait paces the script: it returns true after one push interval, or when
// release is closed if release is not nil, and false once the player or the
// test is gone. While it waits it repeats last every interval (the real
// gate's heartbeat near the front of the line).
func (c *browserConn) wait(release <-chan struct{}, last ...*leveev2.ServerFrame) bool {
	tick := time.NewTicker(pushEvery)
	defer tick.Stop()
	for {
		select {
		case <-c.gone:
			return false
		case <-c.ctx.Done():
			return false
		case <-release:
			return true
		case <-tick.C:
			if release == nil {
				return true
			}
			for _, f := range last {
				c.send(f)
			}
		}
	}
}

// stay keeps the connection until the player or the test is gone.
func (c *browserConn) stay() {
	select {
	case <-c.gone:
	case <-c.ctx.Done():
	}
}

// after sends f after one push interval.
func (c *browserConn) after(f *leveev2.ServerFrame) bool { return c.wait(nil) && c.send(f) }

// queue pushes position pos (with the ticket if it is the connection's
// first status), then waits one interval (or until release).
func (c *browserConn) queue(pos uint64, release <-chan struct{}) bool {
	q := &leveev2.QueueStatus{
		Position: pos, EtaMs: pos * uint64(pushEvery/time.Millisecond), ReleaseRate: 3.3,
		LineLength: pos + 7, GraceMs: 60_000, Mode: "paced",
	}
	if !c.ticketed {
		q.Ticket, c.ticketed = browserTicket, true
	}
	f := &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Queue{Queue: q}}
	if !c.send(f) {
		return false
	}
	again := proto.Clone(f).(*leveev2.ServerFrame)
	again.GetQueue().Ticket = ""
	return c.wait(release, again)
}

// close sends a close frame and waits (briefly) for the player's reply.
func (c *browserConn) close(code int, reason string) bool {
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	select {
	case <-c.gone:
	case <-time.After(2 * time.Second):
	}
	return false
}

// browserPageState is the page's machine-readable state and visible text.
type browserPageState struct {
	State, Position, Seen string
	Live, Text, Search    string // the aria-live position line, all of <main>'s text, location.search
}

const browserReadState = `(() => { const m = document.getElementById("app");
  return {State: m.dataset.state, Position: m.dataset.position, Seen: m.dataset.positionsSeen,
          Live: document.getElementById("position").textContent, Text: m.innerText, Search: location.search}; })()`

type chromeBrowser struct {
	t    *testing.T
	ctx  context.Context
	dir  string // screenshots
	mu   sync.Mutex
	errs []string // exceptions and console errors seen in the page
}

func startChromium(t *testing.T, bin string, extra ...chromedp.ExecAllocatorOption) *chromeBrowser {
	actx := testbrowser.Start(t, bin, 390, 844, 90*time.Second, extra...) // bounds the whole browser
	return &chromeBrowser{t: t, ctx: actx, dir: t.TempDir()}
}

// tab opens a new tab with a phone-sized viewport and records its errors.
func (b *chromeBrowser) tab() context.Context {
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + (&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error()
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				msg = fmt.Sprintf("%s error: %s", e.Entry.Source, e.Entry.Text)
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errs = append(b.errs, msg)
			b.mu.Unlock()
		}
	})
	if err != nil {
		b.t.Fatalf("starting chromium: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		b.t.Fatalf("viewport: %v", err)
	}
	return ctx
}

// waitFor polls a JavaScript condition and returns the page's state.
func (b *chromeBrowser) waitFor(ctx context.Context, what, cond string) browserPageState {
	b.t.Helper()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		s, _ := chromedp.Run(ctx, chromedp.Evaluate[browserPageState](browserReadState))
		b.t.Fatalf("waiting for %s: %v; page: %+v", what, err, s)
	}
	s, err := chromedp.Run(ctx, chromedp.Evaluate[browserPageState](browserReadState))
	if err != nil {
		b.t.Fatalf("reading the page: %v", err)
	}
	return s
}

// screenshot saves the viewport as name.png, and a copy in
// $LEVEE_SCREENSHOT_DIR when that is set.
func (b *chromeBrowser) screenshot(ctx context.Context, name string) {
	b.t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	paths := []string{filepath.Join(b.dir, name+".png")}
	if d := os.Getenv("LEVEE_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.t.Fatal(err)
		}
		paths = append(paths, filepath.Join(d, name+".png"))
	}
	for _, p := range paths {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.t.Logf("screenshot: %s", paths[len(paths)-1])
}

func (b *chromeBrowser) noErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("page: %s", e)
	}
}

// pageFor opens the waiting page in a new tab with a token for player.
func (b *chromeBrowser) pageFor(g *browserGate, player string) context.Context {
	b.t.Helper()
	tok, err := token.Sign(browserSecret, player, time.Now().Add(time.Hour))
	if err != nil {
		b.t.Fatal(err)
	}
	page := b.tab()
	if err := chromedp.Do(page, chromedp.Navigate(g.srv.URL+"/?token="+tok)); err != nil {
		b.t.Fatalf("navigate: %v", err)
	}
	return page
}

const browserMainIs = `document.getElementById("app").dataset.state === %q`

func TestBrowserWaitingPage(t *testing.T) {
	bin := testbrowser.Find(t)
	g := startBrowserGate(t)
	b := startChromium(t, bin)

	page := b.pageFor(g, "alice")
	// Position 3 comes after a 1012 close and a reconnect with the ticket;
	// the gate holds the line there until the screenshot is taken.
	s := b.waitFor(page, "position 3", fmt.Sprintf(browserMainIs, "waiting")+` && document.getElementById("app").dataset.position === "3"`)
	b.screenshot(page, "waiting")
	close(g.hold)
	if s.Live != "You are number 3 in line" || !strings.Contains(s.Text, "3 a second") || !strings.Contains(s.Text, "less than a minute") {
		t.Errorf("waiting page lacks the position, the rate or the ETA: %q\n%s", s.Live, s.Text)
	}
	if s.Search != "" {
		t.Errorf("the token is still in the address bar: %q", s.Search)
	}

	s = b.waitFor(page, "the welcome", fmt.Sprintf(browserMainIs, "admitted")+` && !document.getElementById("player").hidden`)
	b.screenshot(page, "admitted")
	// The gate is game-agnostic: the page names the player, not the game's
	// state (arena's level and gold are the game's to show).
	for _, want := range []string{"You're in!", "alice"} {
		if !strings.Contains(s.Text, want) {
			t.Errorf("admitted page lacks %q:\n%s", want, s.Text)
		}
	}
	seen := browserPositions(t, s.Seen)
	if len(seen) < 2 {
		t.Errorf("positions seen %v: want at least two", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] >= seen[i-1] {
			t.Errorf("positions seen %v: want each smaller than the one before", seen)
			break
		}
	}
	if !slices.Equal(seen, []int{5, 4, 3, 2, 1}) {
		t.Errorf("positions seen %v, want 5,4,3,2,1 (none lost across the reconnect)", seen)
	}
	g.mu.Lock()
	tickets := slices.Clone(g.tickets)
	g.mu.Unlock()
	if !slices.Equal(tickets, []string{"", browserTicket}) {
		t.Errorf("tickets presented %q, want none and then %q (the reconnect keeps the place)", tickets, browserTicket)
	}

	// Far back in a moving line the gate pushes seldom: the page counts
	// the place down at 90 % of the rate (100 a second) but never by the
	// 10 % step at which the gate would have pushed (500 places).
	far := b.pageFor(g, "carl")
	s = b.waitFor(far, "the count-down", fmt.Sprintf(browserMainIs, "waiting")+` && Number(document.getElementById("app").dataset.position) < 4900`)
	if p, _ := strconv.Atoi(s.Position); p <= browserFarPosition-browserFarPosition/10 || s.Seen != strconv.Itoa(browserFarPosition) {
		t.Errorf("counting down from %d: shows %q (pushed %q), want above %d", browserFarPosition, s.Position, s.Seen, browserFarPosition-browserFarPosition/10)
	}
	est, err := chromedp.Run(far, chromedp.Evaluate[[]map[string]int](browserEstimates, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("estimate.js: %v", err)
	}
	for i, want := range []map[string]int{
		{"position": 4910, "etaMs": 49100}, // 1 s at 90 of 100 a second
		{"position": 4501, "etaMs": 45001}, // 30 s: the gate's step stops it
		{"position": 3, "etaMs": 900},      // near the front the step is 1: as pushed
		{"position": 1000, "etaMs": 0},     // a paused line does not move
		{"position": 1, "etaMs": 1000},     // never below 1, nor 1 s
	} {
		if i >= len(est) || est[i]["position"] != want["position"] || est[i]["etaMs"] != want["etaMs"] {
			t.Errorf("estimate case %d: %v, want %v", i, est, want)
			break
		}
	}

	// A bad token: the gate's error frame and 1008 close; no retry.
	bad := b.tab()
	if err := chromedp.Do(bad, chromedp.Navigate(g.srv.URL+"/?token=forged")); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	s = b.waitFor(bad, "the refusal", fmt.Sprintf(browserMainIs, "error"))
	b.screenshot(bad, "refused")
	if !strings.Contains(s.Text, "not valid") || !strings.Contains(s.Text, "Unauthorized") {
		t.Errorf("refusal page lacks the close meaning or the error message:\n%s", s.Text)
	}
	// A full gate: the error's retry_after (30 s) and a 1013 close; the page
	// counts down to its retry.
	full := b.pageFor(g, "bob")
	s = b.waitFor(full, "the countdown", fmt.Sprintf(browserMainIs, "retrying"))
	b.screenshot(full, "retrying")
	if !strings.Contains(s.Text, "The server is full") || !strings.Contains(s.Text, "Trying again in 3") {
		t.Errorf("retrying page lacks the message or a countdown from 30-35 s:\n%s", s.Text)
	}
	b.noErrors()
}

// Served over https (a gate with -tls-cert), the page opens its WebSocket
// over wss:// to the same host: a ws:// one would be blocked as mixed
// content. The browser is told to accept httptest's certificate, which no
// CA it knows signed; the page's scheme is what is tested.
func TestBrowserWaitingPageOverTLS(t *testing.T) {
	bin := testbrowser.Find(t)
	g := startBrowserGateScheme(t, true)
	if !strings.HasPrefix(g.srv.URL, "https://") {
		t.Fatalf("the gate serves %s", g.srv.URL)
	}
	b := startChromium(t, bin, chromedp.Flag("ignore-certificate-errors", true))
	page := b.pageFor(g, "dave")
	s := b.waitFor(page, "position 2 over wss", fmt.Sprintf(browserMainIs, "waiting")+` && document.getElementById("app").dataset.position === "2"`)
	if s.Live != "You are number 2 in line" {
		t.Errorf("waiting page over https: %q\n%s", s.Live, s.Text)
	}
	g.mu.Lock()
	tlsWS := slices.Clone(g.tlsWS)
	g.mu.Unlock()
	if len(tlsWS) == 0 || slices.Contains(tlsWS, false) {
		t.Errorf("/ws requests over TLS: %v, want every one", tlsWS)
	}
	b.noErrors()
}

// browserEstimates runs the page's estimate.js on cases checked above.
const browserEstimates = `import("/waitpage/estimate.js").then(({ estimate }) => [
  estimate({ position: 5000, etaMs: 50000, releaseRate: 100 }, 1000),
  estimate({ position: 5000, etaMs: 50000, releaseRate: 100 }, 30000),
  estimate({ position: 3, etaMs: 900, releaseRate: 3.3 }, 300),
  estimate({ position: 1000, etaMs: 0, releaseRate: 0 }, 5000),
  estimate({ position: 1, etaMs: 1500, releaseRate: 50 }, 60000),
])`

func browserPositions(t *testing.T, csv string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Split(csv, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("data-positions-seen %q: %v", csv, err)
		}
		out = append(out, n)
	}
	return out
}
