package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/leveehq/levee/battle"
	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena/arenaclient"
	"github.com/leveehq/levee/gate"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/logic"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// secured is a cluster with wss at the gate and mutual TLS between the
// tiers, and the files its certificates were read from.
type secured struct {
	*cluster
	ca                   *tlstest.CA
	edge, gateC, logicC  tlstest.Files
	battleC              tlstest.Files
	logicAddr, battleAdr string
}

func loadCluster(t *testing.T, ca *tlstest.CA, f tlstest.Files) grpcdial.Security {
	t.Helper()
	c, err := tlsconf.LoadCluster(ca.CAFile, f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return grpcdial.MTLS(c)
}

func startSecured(t *testing.T) *secured {
	t.Helper()
	ca := tlstest.NewCA(t)
	s := &secured{ca: ca, edge: ca.Issue(t, "edge", tlstest.Localhost()),
		gateC: ca.Role(t, tlsconf.RoleGate), logicC: ca.Role(t, tlsconf.RoleLogic), battleC: ca.Role(t, tlsconf.RoleBattle)}
	var lc *logic.Config
	s.cluster = startTiers(t, tiers{
		battles: 1,
		battle:  func(c *battle.Config) { c.Security = loadCluster(t, ca, s.battleC) },
		logic:   func(c *logic.Config) { c.Security = loadCluster(t, ca, s.logicC); lc = c },
		gate: func(c *gate.Config) {
			c.Security = loadCluster(t, ca, s.gateC)
			c.TLSCert, c.TLSKey = s.edge.Cert, s.edge.Key
			s.logicAddr = c.LogicAddrs[0]
		},
	})
	s.battleAdr = lc.BattleAddrs[0]
	u, _ := url.Parse(s.gateURL)
	u.Scheme, u.Host = "wss", "localhost:"+u.Port()
	s.gateURL = u.String()
	return s
}

// dialWSS is a player's SDK connection over wss, trusting the test CA.
func (s *secured) dialWSS(ctx context.Context, player string) (*client.Client, error) {
	tok, err := token.Sign(testSecret, player, time.Now().Add(time.Hour))
	if err != nil {
		return nil, err
	}
	d := *websocket.DefaultDialer
	d.TLSClientConfig = s.ca.ClientTLS()
	return client.Dial(ctx, s.gateURL, tok, arenaclient.Options(client.Options{Dialer: &d}))
}

// edgeSerial is the serial of the certificate a new (full) wss handshake sees.
func (s *secured) edgeSerial(t *testing.T) string {
	t.Helper()
	u, _ := url.Parse(s.gateURL)
	cfg := s.ca.ClientTLS()
	cfg.ServerName = "localhost"
	c, err := tls.Dial("tcp", "127.0.0.1:"+u.Port(), cfg)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// tierSerial is the serial a new mTLS connection (as ops) to a tier sees.
func (s *secured) tierSerial(t *testing.T, addr string, role tlsconf.Role) string {
	t.Helper()
	ops := loadCluster(t, s.ca, s.ca.Role(t, tlsconf.RoleOps))
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(ops.DialCredentials(role)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return "check: " + err.Error()
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "not TLS"
	}
	return info.State.PeerCertificates[0].SerialNumber.String()
}

// Certificates renewed under load, at the edge and between the tiers:
// new handshakes see the new certificates, no player connection is
// dropped and every request gets its reply.
func TestCertificateRenewalUnderLoad(t *testing.T) {
	s := startSecured(t)
	const players, maxRequests = 12, 400
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var clients []*client.Client
	for i := range players {
		cl, err := s.dialWSS(ctx, fmt.Sprintf("renew-%d", i))
		if err != nil {
			t.Fatalf("player %d: %v", i, err)
		}
		t.Cleanup(func() { _ = cl.Close() })
		clients = append(clients, cl)
	}

	var (
		stop          = make(chan struct{})
		sent, lost    atomic.Int64
		replies, busy atomic.Int64
		perPlayer     = make([]atomic.Int64, players)
		firstLost     atomic.Value
		wg            sync.WaitGroup
	)
	for i, cl := range clients {
		wg.Go(func() {
			for n := range maxRequests {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				var err error
				if n%4 == 3 {
					// through logic to battle
					_, _, err = arenaclient.StartBattle(rctx, cl, fmt.Sprintf("b-%d-%d", i, n), 2, 5)
				} else {
					_, err = arenaclient.GetProfile(rctx, cl, "")
				}
				rcancel()
				sent.Add(1)
				var ce *client.Error
				switch {
				case err == nil:
					replies.Add(1)
				case errors.As(err, &ce) && (ce.Code == leveev2.ErrorCode_ERROR_CODE_BUSY || ce.Code == leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED):
					// Overload on shared cores: a reply that says so.
					replies.Add(1)
					busy.Add(1)
				default:
					// No reply, or one that says a tier could not be
					// reached (UNAVAILABLE): the renewal broke something.
					lost.Add(1)
					firstLost.CompareAndSwap(nil, err.Error())
				}
				perPlayer[i].Add(1)
			}
		})
	}
	everyone := func(min int64) func() bool {
		return func() bool {
			for i := range perPlayer {
				if perPlayer[i].Load() < min {
					return false
				}
			}
			return true
		}
	}
	testwait.Until(t, "every player's first requests", everyone(5))

	// Renew everything in place, as cert-manager or a renewal hook would.
	edge := s.ca.Write(t, s.edge.Cert, s.edge.Key, tlstest.Localhost())
	lg := s.ca.Write(t, s.logicC.Cert, s.logicC.Key, tlstest.Spec{Role: tlsconf.RoleLogic, DNS: []string{"localhost"}})
	bt := s.ca.Write(t, s.battleC.Cert, s.battleC.Key, tlstest.Spec{Role: tlsconf.RoleBattle, DNS: []string{"localhost"}})
	s.ca.Write(t, s.gateC.Cert, s.gateC.Key, tlstest.Spec{Role: tlsconf.RoleGate, DNS: []string{"localhost"}})
	renewedAt := make([]int64, players)
	for i := range perPlayer {
		renewedAt[i] = perPlayer[i].Load()
	}
	testwait.Until(t, "a new wss handshake with the renewed edge certificate", func() bool { return s.edgeSerial(t) == edge.String() })
	testwait.Until(t, "a new mTLS handshake with logic's renewed certificate", func() bool { return s.tierSerial(t, s.logicAddr, tlsconf.RoleLogic) == lg.String() })
	testwait.Until(t, "a new mTLS handshake with battle's renewed certificate", func() bool { return s.tierSerial(t, s.battleAdr, tlsconf.RoleBattle) == bt.String() })
	// A new player after the renewal plays too.
	late, err := s.dialWSS(ctx, "late")
	if err != nil {
		t.Fatalf("a player after the renewal: %v", err)
	}
	defer late.Close()
	if _, _, err := arenaclient.StartBattle(ctx, late, "late-1", 2, 5); err != nil {
		t.Fatalf("a battle after the renewal: %v", err)
	}
	testwait.Until(t, "every player's requests after the renewal", func() bool {
		for i := range perPlayer {
			if perPlayer[i].Load() < renewedAt[i]+5 {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()

	for i, cl := range clients {
		select {
		case <-cl.Done():
			t.Errorf("player %d's connection was dropped: %v", i, cl.Err())
		default:
		}
	}
	if lost.Load() != 0 {
		t.Fatalf("%d of %d requests got no reply (first: %v)", lost.Load(), sent.Load(), firstLost.Load())
	}
	if busy.Load()*2 > sent.Load() {
		t.Fatalf("%d of %d requests were refused BUSY", busy.Load(), sent.Load())
	}
	t.Logf("%d requests (%d BUSY) from %d players over wss, all answered, across the renewal of the edge and cluster certificates", replies.Load(), busy.Load(), players)
}
