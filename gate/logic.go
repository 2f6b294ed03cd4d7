package gate

import (
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/tlsconf"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// logicPool holds one gRPC connection per logic instance and knows which
// instance owns a player.
type logicPool struct {
	shards  int
	conns   []*grpc.ClientConn
	clients []leveev2.LogicClient
}

func newLogicPool(sec grpcdial.Security, addrs []string, shards int) (*logicPool, error) {
	p := &logicPool{shards: shards}
	for _, a := range addrs {
		cc, err := sec.Dial(a, tlsconf.RoleLogic)
		if err != nil {
			_ = p.close()
			return nil, fmt.Errorf("logic %s: %w", a, err)
		}
		p.conns = append(p.conns, cc)
		p.clients = append(p.clients, leveev2.NewLogicClient(cc))
	}
	return p, nil
}

// route returns the shard that owns playerID and the client of the logic
// instance that hosts it.
func (p *logicPool) route(playerID string) (int, leveev2.LogicClient) {
	shard := shardmap.Shard(playerID, p.shards)
	return shard, p.clients[shardmap.Instance(shard, len(p.clients))]
}

// unreachable reports whether the connection to the logic instance that
// hosts shard is in TRANSIENT_FAILURE: its last connection attempt failed
// (the instance is down, or cut off: the keepalive of internal/grpcdial
// gives up a silent one). gRPC would fail a call at once then, without
// sending it; the gate refuses it itself, knowing it was not executed.
func (p *logicPool) unreachable(shard int) bool {
	return p.conns[shardmap.Instance(shard, len(p.conns))].GetState() == connectivity.TransientFailure
}

func (p *logicPool) close() error {
	var errs []error
	for _, cc := range p.conns {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}
