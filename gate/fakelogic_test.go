package gate

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/leveehq/levee/internal/priority"
	leveev1 "github.com/leveehq/levee/proto/leveev1"
)

// fakeLogic is an in-process logic server. By default it welcomes every
// player and answers every action; handle overrides that.
type fakeLogic struct {
	leveev1.UnimplementedLogicServer
	addr string

	mu     sync.Mutex
	reqs   []*leveev1.LogicRequest
	crits  []priority.Class // the class each of reqs arrived with
	handle func(ctx context.Context, req *leveev1.LogicRequest) (*leveev1.LogicReply, error)
	got    chan *leveev1.LogicRequest // every request, if not nil (buffered)
	stop   func()                     // stops the server (idempotent)
}

func startFakeLogic(t testing.TB) *fakeLogic {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeLogic{addr: lis.Addr().String(), got: make(chan *leveev1.LogicRequest, 1024)}
	srv := grpc.NewServer()
	leveev1.RegisterLogicServer(srv, f)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	f.stop = sync.OnceFunc(func() { srv.Stop(); <-done })
	t.Cleanup(f.stop)
	return f
}

func (f *fakeLogic) setHandle(h func(ctx context.Context, req *leveev1.LogicRequest) (*leveev1.LogicReply, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handle = h
}

func (f *fakeLogic) requests() []*leveev1.LogicRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*leveev1.LogicRequest(nil), f.reqs...)
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

func (f *fakeLogic) Do(ctx context.Context, req *leveev1.LogicRequest) (*leveev1.LogicReply, error) {
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

func defaultReply(req *leveev1.LogicRequest) *leveev1.LogicReply {
	p := &leveev1.Player{Id: req.GetPlayerId(), Level: 1, Gold: 100}
	bp := &leveev1.Backpressure{QueueDepth: 3, Ratio: 0.25}
	switch a := req.GetAction().(type) {
	case *leveev1.LogicRequest_Login:
		return &leveev1.LogicReply{Backpressure: bp, Result: &leveev1.LogicReply_Welcome{Welcome: &leveev1.Welcome{Player: p}}}
	case *leveev1.LogicRequest_GetProfile:
		return &leveev1.LogicReply{Backpressure: bp, Result: &leveev1.LogicReply_Profile{Profile: &leveev1.ProfileReply{Player: p}}}
	case *leveev1.LogicRequest_BuyItem:
		return &leveev1.LogicReply{Backpressure: bp, Result: &leveev1.LogicReply_BuyItem{BuyItem: &leveev1.BuyItemReply{Player: p, GoldSpent: 10}}}
	case *leveev1.LogicRequest_StartBattle:
		return &leveev1.LogicReply{Backpressure: bp, Result: &leveev1.LogicReply_Battle{Battle: &leveev1.BattleReply{BattleId: a.StartBattle.GetBattleId(), Player: p}}}
	}
	return &leveev1.LogicReply{}
}
