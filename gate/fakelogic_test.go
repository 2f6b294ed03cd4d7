package gate

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// fakeLogic is an in-process logic server. By default it welcomes every
// player and answers every action; handle overrides that.
type fakeLogic struct {
	leveev2.UnimplementedLogicServer
	addr string

	mu     sync.Mutex
	reqs   []*leveev2.LogicRequest
	crits  []priority.Class // the class each of reqs arrived with
	handle func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error)
	got    chan *leveev2.LogicRequest // every request, if not nil (buffered)
	stop   func()                     // stops the server (idempotent)
}

func startFakeLogic(t testing.TB) *fakeLogic {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeLogic{addr: lis.Addr().String(), got: make(chan *leveev2.LogicRequest, 1024)}
	srv := grpc.NewServer()
	leveev2.RegisterLogicServer(srv, f)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	f.stop = sync.OnceFunc(func() { srv.Stop(); <-done })
	t.Cleanup(f.stop)
	return f
}

func (f *fakeLogic) setHandle(h func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handle = h
}

func (f *fakeLogic) requests() []*leveev2.LogicRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*leveev2.LogicRequest(nil), f.reqs...)
}

// classOf is the class logic's request requestID arrived with (the last
// such request); ok is false when logic saw none.
func (f *fakeLogic) classOf(requestID uint64) (c priority.Class, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.reqs) - 1; i >= 0; i-- {
		if f.reqs[i].GetRequestId() == requestID {
			return f.crits[i], true
		}
	}
	return 0, false
}

func (f *fakeLogic) Do(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.crits = append(f.crits, priority.FromIncoming(ctx))
	h := f.handle
	f.mu.Unlock()
	select {
	case f.got <- req:
	default:
	}
	if h != nil {
		return h(ctx, req)
	}
	return defaultReply(req), nil
}

// defaultReply is an arena-shaped answer: a welcome with arena's state, a
// profile, a purchase, a battle for the request's battle id.
func defaultReply(req *leveev2.LogicRequest) *leveev2.LogicReply {
	p := &arenapb.Player{Id: req.GetPlayerId(), Level: 1, Gold: 100}
	bp := &leveev2.Backpressure{QueueDepth: 3, Ratio: 0.25}
	if req.GetLogin() != nil {
		return &leveev2.LogicReply{Backpressure: bp, Version: 1, Result: &leveev2.LogicReply_Welcome{Welcome: &leveev2.Welcome{
			State: marshal(p), PlayerId: req.GetPlayerId(), Version: 1}}}
	}
	call := req.GetCall()
	var rep proto.Message
	switch call.GetAction() {
	case arena.ActionGetProfile:
		rep = &arenapb.ProfileReply{Player: p}
	case arena.ActionBuyItem:
		rep = &arenapb.BuyItemReply{Player: p, GoldSpent: 10}
	case arena.ActionStartBattle:
		sb := &arenapb.StartBattleRequest{}
		_ = proto.Unmarshal(call.GetRequest(), sb)
		rep = &arenapb.BattleReply{BattleId: sb.GetBattleId(), Player: p}
	default:
		return &leveev2.LogicReply{}
	}
	return &leveev2.LogicReply{Backpressure: bp, Version: 1, Result: &leveev2.LogicReply_Reply{Reply: marshal(rep)}}
}

func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}
