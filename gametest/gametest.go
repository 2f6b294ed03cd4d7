// Package gametest runs a game's handlers in a test, without a cluster, on
// Levee's real logic shard: the same idempotency by request id, outcome
// store, group commit and versioning the logic tier gives the game in
// production, with
//
//   - a fake clock the test moves with Advance (handlers read Ctx.Now);
//   - a temporary store, removed when the test ends;
//   - the game's jobs run in-process with their own Run, and a Hold that
//     keeps a job's result back, to test what waits for it and resends;
//   - calls by action name with the game's request and reply messages.
//
// A test logs players in, calls actions and checks the outcomes:
//
//	s := gametest.New(t, mygame.Game())
//	p := s.Login("alice")
//	r := p.Do("trade", &mypb.TradeRequest{Item: "plank", Quantity: 1})
//	reply := gametest.Decode[*mypb.TradeReply](r)
//	r.Resend().MustReplay(r)       // the same id: the first outcome, replayed
//	state := gametest.State[*mypb.Crafter](p)
//
// Everything a shard starts is stopped when the test ends.
package gametest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/logic"
	"github.com/leveehq/levee/proto/leveev2"
)

// Epoch is where a shard's fake clock starts unless Start says otherwise.
var Epoch = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// waitFor bounds every wait of the kit (a call's reply, a held job).
const waitFor = 10 * time.Second

// An Option changes how New builds a shard.
type Option func(*options)

type options struct {
	start  time.Time
	window time.Duration
	log    *slog.Logger
}

// Start sets the fake clock's start (Epoch otherwise).
func Start(t time.Time) Option { return func(o *options) { o.start = t } }

// Window sets the idempotency window: how long a mutation's first outcome
// answers a resend (the logic tier's default otherwise).
func Window(d time.Duration) Option { return func(o *options) { o.window = d } }

// Logger gives the shard a logger (none otherwise).
func Logger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// TB is what the kit needs of a test: *testing.T and *testing.B have it.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Shard is a game's logic tier in a test: every shard of it in this
// process, on a fake clock and a temporary store.
type Shard struct {
	t    TB
	g    *game.Game
	clk  *clock.Fake
	srv  *logic.Server
	jobs *jobs

	mu     sync.Mutex
	nextID uint64
}

// New starts the logic tier on g, which must validate, and stops it when
// the test ends.
func New(t TB, g *game.Game, opts ...Option) *Shard {
	t.Helper()
	o := options{start: Epoch}
	for _, opt := range opts {
		opt(&o)
	}
	if err := g.Validate(); err != nil {
		t.Fatalf("gametest: %v", err)
	}
	s := &Shard{t: t, g: g, clk: clock.NewFake(o.start), jobs: newJobs(g.Def())}
	cfg := logic.DefaultConfig()
	cfg.Game = g
	cfg.Jobs = s.jobs
	cfg.Clock = s.clk
	cfg.DataDir = t.TempDir()
	cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Shards = 4
	cfg.Drain, cfg.ShutdownGrace = 0, time.Second
	if o.window > 0 {
		cfg.IdempotencyWindow = o.window
	}
	srv, err := logic.New(cfg, o.log)
	if err != nil {
		t.Fatalf("gametest: start logic: %v", err)
	}
	s.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		s.jobs.releaseAll() // a held job must not keep the shard from stopping
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gametest: logic stopped: %v", err)
			}
		case <-time.After(waitFor):
			t.Errorf("gametest: logic did not stop within %v", waitFor)
		}
	})
	return s
}

// Game is the game the shard runs.
func (s *Shard) Game() *game.Game { return s.g }

// Now is the shard's clock.
func (s *Shard) Now() time.Time { return s.clk.Now() }

// Advance moves the shard's clock forward by d: a handler called after it
// sees Ctx.Now later by d, and outcomes older than the idempotency window
// are forgotten.
func (s *Shard) Advance(d time.Duration) { s.clk.Advance(d) }

// JobRuns is how many times job has been run (a held job counts once it is
// held).
func (s *Shard) JobRuns(job string) int { return s.jobs.runs(job) }

// Login logs playerID in (a new player gets the game's initial state) and
// returns the player to send requests as.
func (s *Shard) Login(playerID string) *Player {
	s.t.Helper()
	p := &Player{s: s, id: playerID}
	p.welcome = p.login()
	return p
}

func (s *Shard) id() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return s.nextID
}

func (s *Shard) do(req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	return s.srv.Do(ctx, req)
}

// Player is a logged-in player.
type Player struct {
	s       *Shard
	id      string
	welcome *leveev2.Welcome
}

// ID is the player's id.
func (p *Player) ID() string { return p.id }

// Welcome is what the player's login answered.
func (p *Player) Welcome() *leveev2.Welcome { return p.welcome }

func (p *Player) login() *leveev2.Welcome {
	p.s.t.Helper()
	rep, err := p.s.do(&leveev2.LogicRequest{PlayerId: p.id, Kind: &leveev2.LogicRequest_Login{Login: &leveev2.LoginRequest{}}})
	if err != nil {
		p.s.t.Fatalf("gametest: login %s: %v", p.id, err)
	}
	if e := rep.GetError(); e != nil {
		p.s.t.Fatalf("gametest: login %s: %v", p.id, toError(e))
	}
	if rep.GetWelcome() == nil {
		p.s.t.Fatalf("gametest: login %s: no welcome in %v", p.id, rep)
	}
	return rep.GetWelcome()
}

// Do sends action with req under a fresh request id and returns its
// outcome once the shard has answered (for a job action: once the job's
// result is applied).
func (p *Player) Do(action string, req proto.Message) *Result {
	p.s.t.Helper()
	return p.Go(action, req).Wait()
}

// DoID is Do under the request id id (a client's resend after a restart,
// or a reuse of an id for another request).
func (p *Player) DoID(id uint64, action string, req proto.Message) *Result {
	p.s.t.Helper()
	return p.send(id, uint64(p.s.Now().UnixMilli()), action, p.encode(req)).Wait()
}

// Go sends like Do and returns at once; Wait gets the outcome. With a
// Hold, a job action's outcome waits for the hold's Release.
func (p *Player) Go(action string, req proto.Message) *Pending {
	p.s.t.Helper()
	return p.send(p.s.id(), uint64(p.s.Now().UnixMilli()), action, p.encode(req))
}

func (p *Player) encode(req proto.Message) []byte {
	p.s.t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		p.s.t.Fatalf("gametest: encode %T: %v", req, err)
	}
	return b
}

func (p *Player) send(id, issued uint64, action string, req []byte) *Pending {
	pd := &Pending{p: p, id: id, issued: issued, action: action, req: req, done: make(chan struct{})}
	go func() {
		defer close(pd.done)
		pd.rep, pd.err = p.s.do(&leveev2.LogicRequest{PlayerId: p.id, RequestId: id, IssuedAtMs: issued,
			Kind: &leveev2.LogicRequest_Call{Call: &leveev2.Call{Action: action, Request: req}}})
	}()
	return pd
}

// Pending is a request sent with Go.
type Pending struct {
	p          *Player
	id, issued uint64
	action     string
	req        []byte
	done       chan struct{}
	rep        *leveev2.LogicReply
	err        error
}

// Wait returns the request's outcome; the test fails if it takes longer
// than ten seconds or the shard failed to answer.
func (pd *Pending) Wait() *Result {
	t := pd.p.s.t
	t.Helper()
	select {
	case <-pd.done:
	case <-time.After(waitFor + time.Second):
		t.Fatalf("gametest: %s #%d: no answer within %v", pd.action, pd.id, waitFor)
	}
	if pd.err != nil {
		// Levee's own refusals (INTERNAL, BUSY, ...) come as a status.
		if st, ok := status.FromError(pd.err); !ok || st.Code() == codes.Unknown {
			t.Fatalf("gametest: %s #%d: %v", pd.action, pd.id, pd.err)
		}
		e := apperr.FromStatus(pd.err).Player()
		return &Result{p: pd.p, issued: pd.issued, req: pd.req, ID: pd.id, Action: pd.action, Err: toError(e)}
	}
	r := &Result{p: pd.p, issued: pd.issued, req: pd.req, ID: pd.id, Action: pd.action,
		Replayed: pd.rep.GetReplayed(), Version: pd.rep.GetVersion(), Reply: pd.rep.GetReply()}
	if e := pd.rep.GetError(); e != nil {
		r.Err = toError(e)
	}
	return r
}

// Result is a request's outcome.
type Result struct {
	p      *Player
	issued uint64
	req    []byte

	// ID is the request id it was sent with.
	ID     uint64
	Action string
	// Replayed says the shard answered a resend with the stored first
	// outcome instead of running the handler again.
	Replayed bool
	// Version is the player's state version after the action (0 on an
	// error).
	Version uint64
	// Reply is the reply message's bytes (nil on an error); Decode reads it.
	Reply []byte
	// Err is the game's or Levee's error, nil when the action succeeded.
	Err *Error
}

// Resend sends the same request again under the same request id, as a
// client does when it never saw the reply: a mutation's resend is answered
// with its first outcome, Replayed.
func (r *Result) Resend() *Result {
	r.p.s.t.Helper()
	return r.p.send(r.ID, r.issued, r.Action, r.req).Wait()
}

// MustReplay fails the test unless r is a replay of first: marked
// Replayed, with first's reply (or error) and version.
func (r *Result) MustReplay(first *Result) *Result {
	t := r.p.s.t
	t.Helper()
	if !r.Replayed {
		t.Fatalf("gametest: %s #%d: resend not replayed (got %v, first %v)", r.Action, r.ID, r, first)
	}
	if r.Err.String() != first.Err.String() || string(r.Reply) != string(first.Reply) || r.Version != first.Version {
		t.Fatalf("gametest: %s #%d: replay %v differs from the first outcome %v", r.Action, r.ID, r, first)
	}
	return r
}

// MustFail fails the test unless r failed with code and reason ("" matches
// any reason).
func (r *Result) MustFail(code leveev2.ErrorCode, reason string) *Result {
	t := r.p.s.t
	t.Helper()
	if r.Err == nil || r.Err.Code != code || (reason != "" && r.Err.Reason != reason) {
		t.Fatalf("gametest: %s #%d: want %v %q, got %v", r.Action, r.ID, code, reason, r)
	}
	return r
}

// MustReject is MustFail(REJECTED, reason): the game refused by its rules.
func (r *Result) MustReject(reason string) *Result {
	r.p.s.t.Helper()
	return r.MustFail(leveev2.ErrorCode_ERROR_CODE_REJECTED, reason)
}

func (r *Result) String() string {
	if r.Err != nil {
		return fmt.Sprintf("%s #%d: %v (replayed %v)", r.Action, r.ID, r.Err, r.Replayed)
	}
	return fmt.Sprintf("%s #%d: ok, version %d, %d reply bytes (replayed %v)", r.Action, r.ID, r.Version, len(r.Reply), r.Replayed)
}

// Decode is r's reply as Rep; the test fails if r failed or the reply does
// not decode.
func Decode[Rep proto.Message](r *Result) Rep {
	t := r.p.s.t
	t.Helper()
	var zero Rep
	if r.Err != nil {
		t.Fatalf("gametest: %s #%d failed: %v", r.Action, r.ID, r.Err)
		return zero
	}
	m := zero.ProtoReflect().Type().New().Interface().(Rep)
	if err := proto.Unmarshal(r.Reply, m); err != nil {
		t.Fatalf("gametest: %s #%d: decode %T: %v", r.Action, r.ID, m, err)
	}
	return m
}

// State is p's current state as the shard holds it (p logs in again to
// read it) and its version.
func State[S proto.Message](p *Player) S {
	t := p.s.t
	t.Helper()
	st, _ := StateVersion[S](p)
	return st
}

// StateVersion is State and the state's version.
func StateVersion[S proto.Message](p *Player) (S, uint64) {
	t := p.s.t
	t.Helper()
	w := p.login()
	var zero S
	m := zero.ProtoReflect().Type().New().Interface().(S)
	if err := proto.Unmarshal(w.GetState(), m); err != nil {
		t.Fatalf("gametest: %s's state: decode %T: %v", p.id, m, err)
	}
	return m, w.GetVersion()
}

// Error is an error outcome: Levee's code, and the game's reason and
// message (see game.Reject and friends).
type Error struct {
	Code    leveev2.ErrorCode
	Reason  string
	Message string
}

func toError(e *leveev2.Error) *Error {
	return &Error{Code: e.GetCode(), Reason: e.GetReason(), Message: e.GetMessage()}
}

func (e *Error) Error() string { return e.String() }

// String is "CODE reason: message" ("" for a nil e).
func (e *Error) String() string {
	if e == nil {
		return ""
	}
	if e.Reason == "" {
		return fmt.Sprintf("%v: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%v %s: %s", e.Code, e.Reason, e.Message)
}
