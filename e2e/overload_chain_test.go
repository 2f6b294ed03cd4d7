package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/battle"
	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/examples/arena/arenaclient"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/gate"
	"github.com/leveehq/levee/internal/serve/servetest"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/logic"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
	"google.golang.org/protobuf/proto"
)

// Bounds of TestOverloadChain: chainPlayers players on one shard each
// fight at most chainBattles battles one after another, and the players
// stop as soon as every link of the chain has been seen.
const (
	chainPlayers = 8
	chainBattles = 25
	chainUnits   = 8
	chainTicks   = 400
	chainBound   = 60 * time.Second
)

// TestOverloadChain runs the whole overload chain in one process on
// loopback: battle, capped at one simulation in flight, refuses the
// battles beyond it; logic cools the refusing instance and answers busy
// with a retry hint, without a battle call; the gate, told so, cools the
// shard's battles and answers them itself, without a call to logic; the
// SDK waits each refusal's retry_after before it resends. A recording
// proxy between the SDK and the gate sees every frame: no resend comes
// sooner than the retry_after of the refusal before it, every attempt is
// answered exactly once with its own request id, and every call ends with
// a result or a typed error, none lost.
func TestOverloadChain(t *testing.T) {
	ops := startChainCluster(t)
	px := newRecordingProxy(t, ops.gateURL)

	players := sameShardPlayers(chainPlayers)
	clients := make([]*client.Client, len(players))
	for i, p := range players {
		clients[i] = dialVia(t, px.url(), p)
	}

	// The links, read from the tiers' own counters.
	battleCapRefusals := func() float64 { return scrape(t, ops.battleOps[0], "battle_shed_total", `reason="inflight_cap"`) }
	logicCooling := func() float64 {
		return scrape(t, ops.logicOps, "logic_battle_calls_total", `outcome="cooling"`) +
			scrape(t, ops.logicOps, "logic_rejections_total", `reason="battle_cooling"`)
	}
	gateCooling := func() float64 {
		return scrape(t, ops.gateOps, "gate_request_rejections_total", `reason="logic_cooling"`)
	}

	ctx, cancel := context.WithTimeout(context.Background(), chainBound)
	defer cancel()
	var seen atomic.Bool // every link seen: the players stop
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() { // owned by the test: ends on stop
		defer close(watched)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if battleCapRefusals() > 0 && logicCooling() > 0 && gateCooling() > 0 {
					seen.Store(true)
					return
				}
			}
		}
	}()

	type call struct {
		player string
		err    error
		reply  *arenapb.BattleReply
	}
	var mu sync.Mutex
	var calls []call
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for n := range chainBattles {
				if seen.Load() || ctx.Err() != nil {
					return
				}
				r, _, err := arenaclient.StartBattle(ctx, c, fmt.Sprintf("%s-b%d", players[i], n), chainUnits, chainTicks)
				mu.Lock()
				calls = append(calls, call{players[i], err, r})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	<-watched
	if ctx.Err() != nil {
		t.Fatalf("the players did not finish within %v", chainBound)
	}
	// The counters are read after the last reply, so they include
	// everything the proxy saw.
	capRefused, logicCooled, gateCooled := battleCapRefusals(), logicCooling(), gateCooling()
	logicBattles := scrape(t, ops.logicOps, "logic_requests_total", `action="start_battle"`)
	gateOwn := scrape(t, ops.gateOps, "gate_request_rejections_total", "")
	t.Logf("%d calls; battle refused %v at its cap; logic cooled %v; gate answered %v from its cooling (%v of its own refusals in all); logic answered %v battles",
		len(calls), capRefused, logicCooled, gateCooled, gateOwn, logicBattles)

	// Every link of the chain happened.
	if capRefused == 0 || logicCooled == 0 || gateCooled == 0 {
		t.Fatalf("a link of the chain never happened in %d calls: battle cap refusals %v, logic cooling %v, gate cooling %v",
			len(calls), capRefused, logicCooled, gateCooled)
	}

	// Every call ended with a result or a typed error: none was lost to a
	// timeout or a dropped connection.
	ok, busy := 0, 0
	for _, c := range calls {
		switch {
		case c.err == nil && c.reply.GetResult() != nil:
			ok++
		case client.IsBusy(c.err):
			busy++
		default:
			t.Errorf("%s: a call ended with %v (reply %v), want a result or BUSY", c.player, c.err, c.reply)
		}
	}
	if ok == 0 {
		t.Errorf("no battle was fought in %d calls", len(calls))
	}

	// On the wire: every attempt answered exactly once, resends only after
	// the retry_after of the refusal before them, and the gate's own
	// refusals never reached logic.
	log := px.log()
	ids, sends, refusals, resends := 0, 0, 0, 0
	for id, evs := range log {
		ids++
		var last *frameEvent // the previous reply to id
		pending := 0
		for i := range evs {
			ev := &evs[i]
			if ev.fromClient {
				if pending != 0 {
					t.Errorf("request %d: sent again before its reply came", id)
				}
				pending++
				sends++
				if last != nil {
					resends++
					if gap := ev.at.Sub(last.at); gap < last.retryAfter {
						t.Errorf("request %d: resent %v after a refusal that asked for %v", id, gap, last.retryAfter)
					}
				}
				continue
			}
			if pending != 1 {
				t.Errorf("request %d: a reply with no attempt waiting for it", id)
			}
			pending--
			if ev.code == leveev2.ErrorCode_ERROR_CODE_BUSY {
				refusals++
				if ev.retryAfter <= 0 {
					t.Errorf("request %d: BUSY without a retry_after", id)
				}
			}
			last = ev
		}
		if pending != 0 {
			t.Errorf("request %d: %d attempt(s) never answered", id, pending)
		}
	}
	if ids != len(calls) {
		t.Errorf("the proxy saw %d request ids for %d calls", ids, len(calls))
	}
	if resends == 0 {
		t.Error("the SDK never resent a refused battle")
	}
	if float64(sends) != logicBattles+gateOwn {
		t.Errorf("%d battle attempts reached the gate, logic answered %v and the gate itself %v: the gate's refusals are not all answered without logic",
			sends, logicBattles, gateOwn)
	}
	var sdkSent uint64
	for _, c := range clients {
		st := c.Stats()
		sdkSent += st.Sent
		if st.Unexpected != 0 || st.Late != 0 {
			t.Errorf("a client got replies it did not wait for: %+v", st)
		}
	}
	if sdkSent != uint64(sends) {
		t.Errorf("the SDK sent %d frames, the proxy saw %d", sdkSent, sends)
	}
	t.Logf("%d ids, %d attempts, %d BUSY replies, %d resends; %d fought, %d busy to the end", ids, sends, refusals, resends, ok, busy)
}

// startChainCluster starts one battle instance that runs one simulation at
// a time and refuses the rest (no CPU throttle or adaptive shedding, so
// that the cap is the one refusing), one logic whose battle calls never
// wait for a slot (refused at once), and one gate, all with their
// overload protection on otherwise.
func startChainCluster(t *testing.T) *cluster {
	t.Helper()
	return startTiers(t, tiers{
		battle: func(cfg *battle.Config) {
			cfg.MaxInFlight = 1
			cfg.Throttle, cfg.AdaptiveShed = false, false
		},
		logic: func(cfg *logic.Config) { cfg.BattleWait = 0 },
	})
}

// sameShardPlayers is n player ids that the gate routes to one shard, so
// that the shard's cooling covers all of them.
func sameShardPlayers(n int) []string {
	shards := gate.DefaultConfig().Shards
	var out []string
	want := shardmap.Shard("chain-0", shards)
	for i := 0; len(out) < n; i++ {
		p := "chain-" + strconv.Itoa(i)
		if shardmap.Shard(p, shards) == want {
			out = append(out, p)
		}
	}
	return out
}

func dialVia(t *testing.T, rawURL, player string) *client.Client {
	t.Helper()
	tok, err := token.Sign(testSecret, player, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A tiny backoff ceiling (1 ms) makes each resend's delay the
	// server's retry_after and nearly nothing else, so that a resend that
	// ignored it would be seen; a budget as large as the requests lets
	// every refused call retry.
	c, err := client.Dial(ctx, rawURL, tok, arenaclient.Options(client.Options{
		Retry:  backoff.Policy{Base: time.Millisecond, Cap: time.Millisecond},
		Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1}),
	}))
	if err != nil {
		t.Fatalf("dial as %s: %v", player, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// scrape sums the samples of metric at base+"/metrics" whose labels
// contain match (every sample when match is empty).
func scrape(t *testing.T, base, metric, match string) float64 {
	t.Helper()
	code, body := servetest.Get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("scrape %s: %d %s", base, code, body)
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		if match != "" && !strings.Contains(line, match) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("scrape %s: %q: %v", base, line, err)
		}
		sum += v
	}
	return sum
}

// frameEvent is one frame with a request id, as the proxy saw it.
type frameEvent struct {
	at         time.Time
	fromClient bool
	code       leveev2.ErrorCode // of a reply; UNSPECIFIED for a result
	retryAfter time.Duration     // of a reply: the longer of its error's and its backpressure's
}

// recordingProxy relays WebSocket connections from the SDK to the gate,
// frame by frame, and logs every frame that has a request id.
type recordingProxy struct {
	srv      *httptest.Server
	upstream string

	mu     sync.Mutex
	events map[uint64][]frameEvent
	wg     sync.WaitGroup // the pumps
	conns  []*websocket.Conn
}

func newRecordingProxy(t *testing.T, upstream string) *recordingProxy {
	p := &recordingProxy{upstream: upstream, events: map[uint64][]frameEvent{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.close)
	return p
}

func (p *recordingProxy) url() string {
	return "ws" + strings.TrimPrefix(p.srv.URL, "http") + "/ws"
}

// close drops every relayed connection and waits for the pumps.
func (p *recordingProxy) close() {
	p.srv.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// log is a copy of the events by request id, in the order seen.
func (p *recordingProxy) log() map[uint64][]frameEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[uint64][]frameEvent, len(p.events))
	for id, evs := range p.events {
		out[id] = append([]frameEvent(nil), evs...)
	}
	return out
}

func (p *recordingProxy) serve(w http.ResponseWriter, r *http.Request) {
	d := websocket.Dialer{Subprotocols: websocket.Subprotocols(r), HandshakeTimeout: 10 * time.Second}
	up, _, err := d.Dial(p.upstream+"?"+r.URL.RawQuery, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	upg := websocket.Upgrader{Subprotocols: []string{up.Subprotocol()}}
	down, err := upg.Upgrade(w, r, nil)
	if err != nil {
		_ = up.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up, down)
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pump(down, up, true)
	go p.pump(up, down, false)
}

// pump relays from src to dst until either fails, then closes both (the
// other pump then ends too). Close frames are relayed as close frames.
func (p *recordingProxy) pump(src, dst *websocket.Conn, fromClient bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	for {
		mt, data, err := src.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				_ = dst.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(ce.Code, ce.Text), time.Now().Add(time.Second))
			}
			return
		}
		p.record(data, fromClient)
		if err := dst.WriteMessage(mt, data); err != nil {
			return
		}
	}
}

// record logs a frame of the binary subprotocol (the SDK's default).
func (p *recordingProxy) record(data []byte, fromClient bool) {
	ev := frameEvent{at: time.Now(), fromClient: fromClient}
	var id uint64
	if fromClient {
		f := &leveev2.ClientFrame{}
		if proto.Unmarshal(data, f) != nil {
			return
		}
		id = f.GetRequestId()
	} else {
		f := &leveev2.ServerFrame{}
		if proto.Unmarshal(data, f) != nil {
			return
		}
		id = f.GetRequestId()
		ev.code = f.GetError().GetCode()
		ev.retryAfter = time.Duration(max(f.GetError().GetRetryAfterMs(), f.GetBackpressure().GetRetryAfterMs())) * time.Millisecond
	}
	if id == 0 {
		return
	}
	p.mu.Lock()
	p.events[id] = append(p.events[id], ev)
	p.mu.Unlock()
}
