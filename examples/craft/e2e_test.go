package craft_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"example.com/craft"
	"example.com/craft/craftpb"
	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/proto/leveev2"
)

// The e2e test runs craft's own binary: battle, logic and gate as
// processes on loopback, and checks exactly-once across a SIGKILL of logic
// for craft's critical mutation (trade) and its job result (craft), both
// when logic dies after the player saw the reply and before.

// binDir holds the binary built by the first test that needs it; TestMain
// removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var buildCraft = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "craft-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "craft")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/craft")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/craft: %v\n%s", err, out)
	}
	return bin, nil
})

func craftBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the craft binary; skipped with -short")
	}
	bin, err := buildCraft()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// freeAddr is a loopback address nothing listened on a moment ago, outside
// the kernel's ephemeral range (so that no outgoing connection takes it
// before the binary binds it).
func freeAddr(t *testing.T) string {
	t.Helper()
	lo, hi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &lo, &hi)
	}
	base, span := 10000, lo-10000
	if 65535-hi > span {
		base, span = hi+1, 65535-hi
	}
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", base+rand.IntN(span))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free port outside the ephemeral range")
	return ""
}

// proc is one running craft subcommand; Cleanup kills it (SIGCONT first:
// a stopped process dies on SIGKILL too, but say it) and waits for it.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(craftBin(t), args...), out: &bytes.Buffer{}, done: make(chan struct{})}
	// Plaintext between the tiers on loopback (the tiers require a choice).
	p.cmd.Env = append(os.Environ(), "LEVEE_INSECURE=1")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out)
		}
	})
	return p
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("%s: %v: %v", p.name, sig, err)
	}
}

// kill SIGKILLs p and waits for it to be gone.
func (p *proc) kill(t *testing.T) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("%s still running 10s after SIGKILL", p.name)
	}
}

// healthy polls `craft <tier> healthcheck` until it passes (20 s at most).
func healthy(t *testing.T, tier, addr string) {
	t.Helper()
	eventually(t, 20*time.Second, tier+" at "+addr+" healthy", func() bool {
		return exec.Command(craftBin(t), tier, "healthcheck", "-addr", addr).Run() == nil
	})
}

// eventually checks cond every 100 ms until it holds, and fails the test
// naming what it waited for when it has not within d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("not %s after %v", what, d)
		case <-tick.C:
		}
	}
}

type cluster struct {
	t                 *testing.T
	battle, logic     *proc
	logicAddr, logOps string
	battleAddr        string
	dataDir           string
	gateURL, secret   string
}

func startCluster(t *testing.T) *cluster {
	c := &cluster{t: t, battleAddr: freeAddr(t), logicAddr: freeAddr(t), logOps: freeAddr(t),
		dataDir: t.TempDir(), secret: "craft-e2e-secret"}
	c.battle = start(t, "battle", "battle", "-grpc-addr", c.battleAddr, "-ops-addr", freeAddr(t))
	healthy(t, "battle", c.battleAddr)
	c.startLogic()
	gw, ggrpc := freeAddr(t), freeAddr(t)
	start(t, "gate", "gate", "-addr", gw, "-grpc-addr", ggrpc, "-ops-addr", freeAddr(t),
		"-logic-addrs", c.logicAddr, "-token-secret", c.secret, "-line-mode", "open")
	healthy(t, "gate", ggrpc)
	c.gateURL = "ws://" + gw + "/ws"
	return c
}

func (c *cluster) startLogic() {
	c.logic = start(c.t, "logic", "logic", "-grpc-addr", c.logicAddr, "-ops-addr", c.logOps,
		"-data-dir", c.dataDir, "-battle-addrs", c.battleAddr)
	healthy(c.t, "logic", c.logicAddr)
}

// restartLogic SIGKILLs logic and starts it again on the same address and
// data directory.
func (c *cluster) restartLogic() {
	c.t.Helper()
	c.logic.kill(c.t)
	c.startLogic()
}

// dial logs player in; it retries while the gate cannot reach logic yet
// (just after a restart).
func (c *cluster) dial(ctx context.Context, player string) *client.Client {
	t := c.t
	t.Helper()
	tok, err := exec.Command(craftBin(t), "gate", "token", "-player", player, "-token-secret", c.secret).Output()
	if err != nil {
		t.Fatalf("craft gate token: %v", err)
	}
	var cl *client.Client
	var last error
	eventually(t, 20*time.Second, "logged in as "+player, func() bool {
		cl, last = client.Dial(ctx, c.gateURL, strings.TrimSpace(string(tok)), client.Options{Game: craft.Game()})
		if last != nil {
			t.Logf("dial %s: %v", player, last)
		}
		return last == nil
	})
	t.Cleanup(func() { cl.Close() })
	return cl
}

func frame(t *testing.T, action string, req proto.Message) *leveev2.ClientFrame {
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return &leveev2.ClientFrame{Action: action, Request: b}
}

func replyOf[Rep proto.Message](t *testing.T, f *leveev2.ServerFrame) Rep {
	t.Helper()
	var zero Rep
	m := zero.ProtoReflect().New().Interface().(Rep)
	if err := proto.Unmarshal(f.GetReply(), m); err != nil {
		t.Fatalf("decode %T: %v", m, err)
	}
	return m
}

func stateOf(t *testing.T, c *client.Client) *craftpb.Crafter {
	t.Helper()
	st, err := client.StateOf[*craftpb.Crafter](c)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// do sends f and wants a reply.
func do(ctx context.Context, t *testing.T, c *client.Client, f *leveev2.ClientFrame) *leveev2.ServerFrame {
	t.Helper()
	sf, err := c.Do(ctx, f)
	if err != nil {
		t.Fatalf("%s: %v", f.GetAction(), err)
	}
	return sf
}

// unacked sends f to a tier that cannot answer (stopped) and wants the
// SDK's unresolved frame back: the request's outcome is unknown.
func unacked(ctx context.Context, t *testing.T, c *client.Client, f *leveev2.ClientFrame) *leveev2.ClientFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(client.WithMaxAttempts(ctx, 1), 2*time.Second)
	defer cancel()
	sf, err := c.Do(ctx, f)
	if err == nil {
		t.Fatalf("%s answered %v while its tier was stopped", f.GetAction(), sf)
	}
	u := client.Unresolved(err)
	if u == nil {
		t.Fatalf("%s: %v, want an unresolved outcome", f.GetAction(), err)
	}
	return u
}

// resend sends f again with its own request id.
func resend(ctx context.Context, t *testing.T, c *client.Client, f *leveev2.ClientFrame) *leveev2.ServerFrame {
	t.Helper()
	sf, err := c.Resend(ctx, f)
	if err != nil {
		t.Fatalf("resend %s #%d: %v", f.GetAction(), f.GetRequestId(), err)
	}
	return sf
}

func mustReplay(t *testing.T, got, first *leveev2.ServerFrame) {
	t.Helper()
	if !got.GetReplayed() || !bytes.Equal(got.GetReply(), first.GetReply()) || got.GetVersion() != first.GetVersion() {
		t.Fatalf("resend #%d: replayed %v version %d, want the first outcome (version %d) replayed",
			got.GetRequestId(), got.GetReplayed(), got.GetVersion(), first.GetVersion())
	}
}

func TestExactlyOnceAcrossLogicSIGKILL(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const player = "e2e-ann"
	ann := c.dial(ctx, player)

	// Two planks to sell: forged, then collected once ready (real time).
	for _, id := range []string{"p1", "p2"} {
		do(ctx, t, ann, frame(t, craft.ActionCraft, &craftpb.CraftRequest{CraftId: id, Recipe: "plank"}))
	}
	collected := 0
	eventually(t, craft.Recipes["plank"].Time+10*time.Second, "collected both planks", func() bool {
		_, err := client.Call[*craftpb.CollectReply](ctx, ann, craft.ActionCollect, &craftpb.CollectRequest{})
		var ce *client.Error
		switch {
		case err == nil:
			collected++
		case !errors.As(err, &ce) || ce.Reason != craft.ReasonNotReady:
			t.Fatalf("collect: %v", err)
		}
		return collected == 2
	})

	// trade, acknowledged, then logic killed: the resend replays.
	sell := frame(t, craft.ActionTrade, &craftpb.TradeRequest{Item: "plank", Quantity: 1})
	sold := do(ctx, t, ann, sell)
	if r := replyOf[*craftpb.TradeReply](t, sold); r.GetCoins() != 56 || r.GetLeft() != 1 {
		t.Fatalf("trade: %v", r)
	}
	c.restartLogic()
	ann = c.dial(ctx, player)
	mustReplay(t, resend(ctx, t, ann, sell), sold)
	// A new connection sees the state as logic holds it now; it replaces
	// the old one (one player, one place), so ann is this one from here.
	ann = c.dial(ctx, player)
	if st := stateOf(t, ann); st.GetCoins() != 56 || st.GetItems()["plank"] != 1 {
		t.Fatalf("after the acked trade and a restart: coins %d, planks %d", st.GetCoins(), st.GetItems()["plank"])
	}

	// trade sent to a stopped logic, which is then killed: the outcome is
	// unknown to the player; the resend applies it, once.
	c.logic.signal(t, syscall.SIGSTOP)
	sell2 := unacked(ctx, t, ann, frame(t, craft.ActionTrade, &craftpb.TradeRequest{Item: "plank", Quantity: 1}))
	c.restartLogic()
	ann = c.dial(ctx, player)
	sold2 := resend(ctx, t, ann, sell2)
	if sold2.GetReplayed() {
		t.Fatal("the trade a stopped logic never read was answered as a replay")
	}
	if r := replyOf[*craftpb.TradeReply](t, sold2); r.GetCoins() != 62 || r.GetLeft() != 0 {
		t.Fatalf("the resent trade: %v (replayed %v)", r, sold2.GetReplayed())
	}
	mustReplay(t, resend(ctx, t, ann, sell2), sold2)

	// craft, acknowledged, then logic killed: the resend and a new request
	// for the same craft id replay; the forge's result is applied once.
	forge := frame(t, craft.ActionCraft, &craftpb.CraftRequest{CraftId: "kB", Recipe: "ingot"})
	forged := do(ctx, t, ann, forge)
	c.restartLogic()
	ann = c.dial(ctx, player)
	mustReplay(t, resend(ctx, t, ann, forge), forged)
	if again := do(ctx, t, ann, frame(t, craft.ActionCraft, &craftpb.CraftRequest{CraftId: "kB", Recipe: "ingot"})); !again.GetReplayed() ||
		!bytes.Equal(again.GetReply(), forged.GetReply()) {
		t.Fatalf("craft kB under a new request id: replayed %v, want the first outcome", again.GetReplayed())
	}

	// craft while the job tier is stopped, logic killed with the forge in
	// flight: the resend forges again, and the result is applied once.
	c.battle.signal(t, syscall.SIGSTOP)
	forge2 := unacked(ctx, t, ann, frame(t, craft.ActionCraft, &craftpb.CraftRequest{CraftId: "kA", Recipe: "tonic"}))
	c.logic.kill(t)
	c.battle.signal(t, syscall.SIGCONT)
	c.startLogic()
	ann = c.dial(ctx, player)
	forged2 := resend(ctx, t, ann, forge2)
	if forged2.GetReplayed() {
		t.Fatal("the craft whose forge never finished was answered as a replay")
	}
	if r := replyOf[*craftpb.CraftReply](t, forged2); r.GetPending().GetCraftId() != "kA" {
		t.Fatalf("the resent craft: %v", r)
	}
	mustReplay(t, resend(ctx, t, ann, forge2), forged2)

	st := stateOf(t, c.dial(ctx, player))
	count := map[string]int{}
	for _, p := range st.GetPending() {
		count[p.GetCraftId()]++
	}
	if st.GetCoins() != 62 || st.GetItems()["plank"] != 0 || st.GetCrafted() != 4 || count["kA"] != 1 || count["kB"] != 1 ||
		st.GetMaterials()["ore"] != 4 || st.GetMaterials()["herb"] != 2 || st.GetMaterials()["wood"] != 6 {
		t.Fatalf("the final state does not show each trade and craft once: %v", st)
	}
}
