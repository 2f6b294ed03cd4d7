package gate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/leveehq/levee/gate/autopace"
	"github.com/leveehq/levee/gate/waitpage"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/lineapi"
	"github.com/leveehq/levee/internal/metrics"
	"github.com/leveehq/levee/internal/serve"
	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/wire"
)

// Server is a running gate: the WebSocket listener, the gRPC health service,
// the ops endpoint, and the connections to the logic tier.
type Server struct {
	cfg     Config
	def     *gamedef.Def       // the game's declaration (cfg.Game's)
	codecs  [2]wire.Codec      // the game's, by subprotocol: protobuf, JSON
	actions map[string]*action // the declared actions, by name
	log     *slog.Logger
	clock   clock.Clock
	keys    keySource                 // player tokens' and tickets' keys
	jwt     jwtVerifier               // studio JWTs; nil without -jwks
	jwtRun  func(ctx context.Context) // the JWKS fetcher (a URL's); nil without -jwks
	reg     *prometheus.Registry
	m       *gateMetrics

	wsLis, grpcLis, opsLis net.Listener
	edgeTLS                *tls.Config // -tls-cert: the player and ops ports' TLS; nil: plaintext
	httpSrv                *http.Server
	grpcSrv                *grpc.Server // the gRPC health service only
	tier                   *serve.Tier  // health, readiness, the ops server and the stop
	logic                  *logicPool
	upgrader               websocket.Upgrader

	// Run's own goroutines (see start): the WebSocket server until wsDone,
	// the line's loops until Run's context ends, the keepalive pinger until
	// stopPing.
	wsDone    chan struct{}
	lineLoops sync.WaitGroup
	pinger    sync.WaitGroup
	stopPing  context.CancelFunc

	// refuser upgrades connections that are refused at once (server full,
	// bad token, the admission line): no buffers of its own, it reuses the ones
	// net/http hijacks, and nothing of the connection is kept.
	refuser websocket.Upgrader
	full    *fullReply              // the pre-encoded SERVER_FULL answers
	fullFn  func(wire.Codec) []byte // full.frames, bound once so refusals do not allocate it

	// slots counts connection slots: taken before a player's upgrade,
	// given back when the upgrade fails or the tracked connection ends.
	// The connection cap compares it to MaxConns.
	slots atomic.Int64
	// slotsPeak is the most slots held at once (gate_connections_peak).
	slotsPeak atomic.Int64
	// handshakes counts connections starting: from the upgrade request
	// until the player is welcomed or refused.
	handshakes atomic.Int64
	// tokenChecks counts the player tokens checked (authenticate), so
	// tests can show a refusal came before that cost.
	tokenChecks atomic.Int64

	// baseCtx is the parent of every connection's context. It is cancelled
	// when shutdown gives up waiting for in-flight requests.
	baseCtx    context.Context
	cancelBase context.CancelFunc

	// The admission line, auto mode's loop and the backpressure logic's
	// replies carry (auto mode reads it).
	line     *line
	auto     *autopace.Loop
	pressure autopace.Pressure
	cooling  *coolingTable  // logic's pushback per shard (-logic-pushback)
	admitWG  sync.WaitGroup // logins of players released from the line
	// The limits per source address and per player (limits.go); nil when
	// off. trusted are the -trusted-proxies.
	addrs   *addrLimits
	pLimits *playerLimits
	trusted []netip.Prefix

	// replaceWG: the goroutines closing replaced connections once their
	// requests are answered (replace.go).
	replaceWG sync.WaitGroup

	mu       sync.RWMutex // guards draining against new conns and requests
	draining bool
	conns    *connSet // in the keepalive's slots
	ka       *keepalive
	connWG   sync.WaitGroup // one per tracked connection, done when it is finished
	reqWG    sync.WaitGroup // one per request in flight, login included
}

// codecFor is the game's codec for a negotiated subprotocol.
func (s *Server) codecFor(subprotocol string) *wire.Codec {
	if c, _ := wire.ForSubprotocol(subprotocol); c.JSON {
		return &s.codecs[1]
	}
	return &s.codecs[0]
}

// New validates cfg and its game (refusing a declaration that cannot
// work, with Validate's message), opens the listeners (so ":0" works) and prepares the
// logic connections. Call Run to serve.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Game == nil {
		return nil, fmt.Errorf("%w: no game (Config.Game)", ErrInvalidConfig)
	}
	if err := cfg.Game.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:   cfg,
		log:   logger,
		clock: cfg.Clock,
		reg:   metrics.NewRegistry("gate"),
		ka:    newKeepalive(cfg.PingInterval, cfg.PongTimeout),
	}
	if err := cfg.Security.RegisterMetrics(s.reg, "gate"); err != nil {
		return nil, err
	}
	s.def = cfg.Game.Def()
	types := wire.ForGame(s.def)
	s.codecs = [2]wire.Codec{{Game: types, MaxFrame: cfg.MaxFrame}, {JSON: true, Game: types, MaxFrame: cfg.MaxFrame}}
	s.actions = newActions(s.def)
	s.conns = newConnSet(s.ka.slots)
	s.cooling = newCoolingTable(cfg.Shards)
	if err := s.newLimits(); err != nil {
		return nil, err
	}
	connCap := 0
	if cfg.connCapOn() {
		connCap = cfg.MaxConns
	}
	s.m = newMetrics(s.reg, s.actions, func() float64 { return float64(s.handshakes.Load()) },
		func() float64 { return float64(s.slotsPeak.Load()) }, connCap)
	card, err := loadCard(cfg.FullCardFile)
	if err != nil {
		return nil, err
	}
	s.m.line = newLineMetrics(s.reg)
	s.m.auth = newAuthMetrics(s.reg)
	if s.keys, err = newKeySource(cfg, logger, s.m.auth); err != nil {
		return nil, err
	}
	if v, err := newJWT(cfg, logger, s.m.auth); err != nil {
		return nil, err
	} else if v != nil {
		s.jwt, s.jwtRun = v, v.Run
	}
	s.m.keepalive = newKeepaliveMetrics(s.reg)
	if s.line, err = newLine(s, cfg.Clock.Now()); err != nil {
		return nil, err
	}
	s.m.line.releaseRate.Set(s.line.q.Stats(cfg.Clock.Now()).ConfiguredPerSecond)
	s.auto = autopace.NewLoop(cfg.Clock, cfg.AutoInterval, cfg.AutoMetricsURLs, &s.pressure, s.line)
	if s.full, err = newFullReply(cfg.FullRetryAfter, card); err != nil {
		return nil, err
	}
	s.fullFn = s.full.frames
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: cfg.WriteTimeout,
		ReadBufferSize:   readBufferSize,
		WriteBufferSize:  writeBufferSize,
		WriteBufferPool:  &sync.Pool{},
		Subprotocols:     wire.Subprotocols,
		// Players authenticate with a token, not an ambient cookie, so a
		// cross-origin page gains nothing by opening a socket.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	s.refuser = websocket.Upgrader{
		HandshakeTimeout: cfg.WriteTimeout,
		Subprotocols:     wire.Subprotocols,
		CheckOrigin:      s.upgrader.CheckOrigin,
	}

	if s.logic, err = newLogicPool(cfg.Security, cfg.LogicAddrs, cfg.Shards, s.m.ownerCache); err != nil {
		s.cancelBase()
		return nil, err
	}
	if err := s.listen(); err != nil {
		s.closeListeners()
		_ = s.logic.close()
		s.cancelBase()
		return nil, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/ws", s.handleWS)
	// The browser waiting page: the page at / and its assets.
	page := waitpage.Handler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET "+waitpage.AssetPrefix, page)
	s.httpSrv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	s.grpcSrv = grpc.NewServer(cfg.Security.ServerOptions(grpcdial.GateAccepts...)...)
	if s.tier, err = serve.New(serve.Config{
		Name:         "gate",
		GRPC:         s.grpcSrv,
		GRPCListener: s.grpcLis,
		OpsListener:  s.opsLis,
		Ops: map[string]http.Handler{
			"/metrics":   metrics.Handler(s.reg),
			lineapi.Path: s.adminHandler(),
		},
		Drain: cfg.Drain,
		Grace: cfg.ShutdownGrace,
		Log:   logger,
	}); err != nil {
		s.closeListeners()
		_ = s.logic.close()
		s.cancelBase()
		return nil, err
	}
	return s, nil
}

// Per-connection buffer sizes. The read buffer lives as long as the
// connection; write buffers come from a shared pool and are held only while
// a message is being written.
const (
	readBufferSize  = 1024
	writeBufferSize = 4096
)

func (s *Server) listen() error {
	var edge *tls.Config
	if s.cfg.TLSCert != "" {
		kp, err := tlsconf.LoadKeyPair(s.cfg.TLSCert, s.cfg.TLSKey, tlsconf.WithLogger(s.log))
		if err != nil {
			return fmt.Errorf("%w: -tls-cert/-tls-key: %w", ErrInvalidConfig, err)
		}
		edge = tlsconf.Edge(kp)
		// WebSocket upgrades need HTTP/1.1 (gorilla hijacks the
		// connection, which HTTP/2 cannot do); the ops paths are small.
		edge.NextProtos = []string{"http/1.1"}
		s.edgeTLS = edge
	}
	var err error
	if s.wsLis, err = net.Listen("tcp", s.cfg.Addr); err != nil {
		return fmt.Errorf("gate: listen -addr %s: %w", s.cfg.Addr, err)
	}
	if s.grpcLis, err = net.Listen("tcp", s.cfg.GRPCAddr); err != nil {
		return fmt.Errorf("gate: listen -grpc-addr %s: %w", s.cfg.GRPCAddr, err)
	}
	if s.opsLis, err = net.Listen("tcp", s.cfg.OpsAddr); err != nil {
		return fmt.Errorf("gate: listen -ops-addr %s: %w", s.cfg.OpsAddr, err)
	}
	if edge != nil {
		s.wsLis = tls.NewListener(s.wsLis, edge)
		s.opsLis = tls.NewListener(s.opsLis, edge)
	}
	return nil
}

// TLS reports whether the player and ops ports serve TLS (-tls-cert).
func (s *Server) TLS() bool { return s.edgeTLS != nil }

func (s *Server) closeListeners() {
	for _, l := range []net.Listener{s.wsLis, s.grpcLis, s.opsLis} {
		if l != nil {
			_ = l.Close()
		}
	}
}

// Addr is the WebSocket listener's address (/ws and /).
func (s *Server) Addr() net.Addr { return s.wsLis.Addr() }

// GRPCAddr is the gRPC health listener's address.
func (s *Server) GRPCAddr() net.Addr { return s.grpcLis.Addr() }

// OpsAddr is the /metrics /healthz /readyz listener's address.
func (s *Server) OpsAddr() net.Addr { return s.opsLis.Addr() }

// Registry is the gate's own Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Run serves until ctx is done, then stops as every tier does (package
// internal/serve): health NOT_SERVING and /readyz 503, wait Drain, then the
// gate's drain: the line stops, new connections and requests are refused,
// in-flight requests finish (up to ShutdownGrace, then they are cancelled
// and answered SHUTTING_DOWN), every player socket closes with 1012
// (Service Restart); then the gRPC server stops, the logic connections
// close, and the ops endpoints stop last. It returns nil on a clean stop; a
// second call returns serve.ErrAlreadyRun.
func (s *Server) Run(ctx context.Context) error {
	return s.tier.Run(ctx, serve.Steps{Start: s.start, Drain: s.drain, Stopped: s.closeLogic})
}

// start starts the WebSocket server, the keepalive pinger and the line.
// The line runs on ctx, so it stops moving as soon as the gate begins to
// stop: a gate that is going away lets nobody else in (waiting players keep
// their tickets; for another gate's line they are unknown, see the package
// doc).
func (s *Server) start(ctx context.Context, fail func(error)) {
	s.wsDone = make(chan struct{})
	go func() {
		defer close(s.wsDone)
		if err := s.httpSrv.Serve(s.wsLis); !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("gate: websocket server: %w", err))
		}
	}()
	pingCtx, stopPing := context.WithCancel(context.Background())
	s.stopPing = stopPing
	s.pinger.Go(func() { s.keepalive(pingCtx) })
	s.lineLoops.Go(func() { s.line.run(ctx) })
	s.lineLoops.Go(func() { s.autoLoop(ctx) })
	if s.jwtRun != nil {
		s.lineLoops.Go(func() { s.jwtRun(ctx) }) // the JWKS fetcher, stopped with Run's context
	}
	s.log.Info("gate serving", "tls", s.TLS(), "addr", s.Addr().String(), "grpc_addr", s.GRPCAddr().String(),
		"ops_addr", s.OpsAddr().String(), "logic_addrs", s.cfg.LogicAddrs, "shards", s.cfg.Shards)
}

// closeWait bounds how long a closing socket waits for the player's close
// frame before the TCP connection is closed.
const closeWait = time.Second

// drain is the gate's own drain, after the drain period; ctx expires after
// ShutdownGrace. Every goroutine start started has ended when it returns.
func (s *Server) drain(ctx context.Context) error {
	s.lineLoops.Wait() // stopped with Run's context

	// Refuse new connections and new requests, then stop the listener.
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	if err := s.httpSrv.Shutdown(ctx); err != nil {
		_ = s.httpSrv.Close()
	}
	<-s.wsDone

	// Let in-flight requests finish; past the grace, cancel them (they are
	// answered SHUTTING_DOWN).
	if !waitCtx(ctx, &s.reqWG) {
		s.log.Warn("shutdown grace expired; cancelling in-flight requests", "grace", s.cfg.ShutdownGrace)
		s.cancelBase()
		if !waitTimeout(&s.reqWG, s.cfg.WriteTimeout+closeWait) {
			s.log.Error("in-flight requests did not finish after cancellation")
		}
	}

	// Close every player socket with 1012, then wait for the readers to see
	// the players' close frames (or time out), forcing what remains.
	s.closeAll()
	if !waitTimeout(&s.connWG, s.cfg.WriteTimeout+2*closeWait) {
		s.log.Warn("forcing the remaining player sockets closed")
		for _, c := range s.snapshot(nil) {
			_ = c.ws.NetConn().Close()
		}
		s.connWG.Wait()
	}
	s.admitWG.Wait()   // their logins ended with the requests above
	s.replaceWG.Wait() // their connections' requests ended with them too
	s.cancelBase()
	s.stopPing()
	s.pinger.Wait()
	return nil
}

// closeLogic closes the logic connections once the gate has stopped.
func (s *Server) closeLogic(context.Context) error {
	if err := s.logic.close(); err != nil {
		s.log.Warn("closing logic connections", "err", err)
	}
	return nil
}

// closeWorkers is how many goroutines write close frames at shutdown, so one
// stalled socket does not hold up the others.
const closeWorkers = 16

func (s *Server) closeAll() {
	conns := s.snapshot(nil)
	ch := make(chan *conn)
	var wg sync.WaitGroup
	for range min(closeWorkers, len(conns)) {
		wg.Go(func() {
			for c := range ch {
				c.closeFromServer(websocket.CloseServiceRestart, "server restarting")
			}
		})
	}
	for _, c := range conns {
		ch <- c
	}
	close(ch)
	wg.Wait()
}

// waitTimeout waits for wg up to d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return waitCtx(ctx, wg)
}

// waitCtx waits for wg until ctx is done and reports whether it finished.
// When it did not, the goroutine that waits ends with wg.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// takeSlot takes a connection slot; false when the connection cap is on
// and MaxConns slots are taken. The slot is given back by releaseSlot.
func (s *Server) takeSlot() bool {
	if !s.cfg.connCapOn() {
		s.notePeak(s.slots.Add(1))
		return true
	}
	limit := int64(s.cfg.MaxConns)
	for {
		n := s.slots.Load()
		if n >= limit {
			return false
		}
		if s.slots.CompareAndSwap(n, n+1) {
			s.notePeak(n + 1)
			return true
		}
	}
}

// notePeak raises slotsPeak to n if it is lower.
func (s *Server) notePeak(n int64) {
	for {
		p := s.slotsPeak.Load()
		if n <= p || s.slotsPeak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (s *Server) releaseSlot() { s.slots.Add(-1) }

// room is how many players the gate may let in from the line now: the free
// handshakes (logins in progress count) and the free connection slots not
// taken by waiting players, for the caps that are on; math.MaxInt when no
// cap is on.
func (s *Server) room() int {
	room := math.MaxInt
	if s.cfg.handshakeCapOn() {
		room = min(room, s.cfg.MaxHandshakes-int(s.handshakes.Load()))
	}
	if s.cfg.connCapOn() {
		room = min(room, s.cfg.MaxConns-int(s.slots.Load()-s.line.nWaiting.Load()))
	}
	return max(room, 0)
}

// track registers a new connection; false once the gate is draining.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	c.lastSeen.Store(s.aliveNow()) // connecting is a sign of life
	s.conns.add(c)
	s.connWG.Add(1)
	s.m.active.Inc()
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	s.conns.remove(c)
	s.mu.Unlock()
	s.releaseSlot() // before the gauge, so a gauge that went down means a free slot
	s.addrs.release(c.addrKey)
	s.m.active.Dec()
	s.connWG.Done()
}

// snapshot appends every tracked connection to buf.
func (s *Server) snapshot(buf []*conn) []*conn {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.conns.appendAll(buf)
}

// beginRequest counts a request in flight; false once the gate is draining.
func (s *Server) beginRequest() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.draining {
		return false
	}
	s.reqWG.Add(1)
	return true
}

func (s *Server) endRequest() { s.reqWG.Done() }

func (s *Server) isDraining() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.draining
}
