package logic

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leveehq/levee/internal/freeport"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// buildLogic builds ./cmd/logic into a temp dir and returns its path.
func buildLogic(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(t.TempDir(), "logic")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/logic")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/logic: %v\n%s", err, out)
	}
	return bin
}

// freeAddr is a loopback address for the child process to bind, outside
// the kernel's ephemeral range.
func freeAddr(t *testing.T) string { return freeport.Addr(t) }

// lockedBuffer collects a child's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// child is a running logic binary.
type child struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
	addr   string
	ops    string
}

func startChild(t *testing.T, bin, dataDir, battleAddr string) *child {
	t.Helper()
	c := &child{out: &lockedBuffer{}, exited: make(chan struct{}), addr: freeAddr(t), ops: freeAddr(t)}
	c.cmd = exec.Command(bin, "-grpc-addr", c.addr, "-ops-addr", c.ops, "-data-dir", dataDir,
		"-battle-addrs", battleAddr, "-shards", "4", "-log-level", "warn")
	c.cmd.Env = append(os.Environ(), "LEVEE_INSECURE=1") // plaintext on loopback
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
	c.waitServing(t)
	return c
}

// waitServing polls the health service until it says SERVING.
func (c *child) waitServing(t *testing.T) {
	t.Helper()
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		select {
		case <-c.exited:
			t.Fatalf("logic exited before serving:\n%s", c.out)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("logic not SERVING after 30s (last: %v %v):\n%s", r, err, c.out)
		}
	}
}

// batchStats scrapes logic_commit_batch_size's sum and count.
func (c *child) batchStats() (sum, count float64, err error) {
	resp, err := http.Get("http://" + c.ops + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "logic_commit_batch_size_sum":
			sum = v
		case "logic_commit_batch_size_count":
			count = v
		}
	}
	return sum, count, sc.Err()
}

// purchase is one planned buy of the crash test.
type purchase struct {
	player string
	rid    uint64
	item   string
}

// TestCrashKeepsAcknowledgedPurchases is the durability contract: SIGKILL
// the real binary in the middle of a stream of purchases, restart it on the
// same data dir, and find every acknowledged purchase applied exactly once
// (and nothing applied twice, acknowledged or not).
func TestCrashKeepsAcknowledgedPurchases(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the logic binary")
	}
	const (
		players   = 20
		swords    = 6  // 100 gold each
		potions   = 30 // 10 gold each; 6*100 + 30*10 = 900 <= 1000
		workers   = 2  // concurrent streams per player
		killAfter = 300
	)
	price := map[string]int64{"sword": 100, "potion": 10}
	bin := buildLogic(t)
	dataDir := t.TempDir()
	fb := &fakeBattle{}
	battleAddr := startFakeBattle(t, fb)
	c := startChild(t, bin, dataDir, battleAddr)

	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli := leveev2.NewLogicClient(conn)

	// The plan: per player, swords and potions interleaved, request ids 1..n.
	var plan []purchase
	byPlayer := map[string][]purchase{}
	for p := range players {
		id := fmt.Sprintf("crash-%02d", p)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := cli.Do(ctx, loginReq(id))
		cancel()
		if err != nil || view(r).GetWelcome().GetPlayer().GetGold() != 1000 {
			t.Fatalf("login %s: %v %v", id, r, err)
		}
		for i := range swords + potions {
			item := "potion"
			if i%6 == 0 {
				item = "sword"
			}
			pu := purchase{player: id, rid: uint64(i + 1), item: item}
			plan = append(plan, pu)
			byPlayer[id] = append(byPlayer[id], pu)
		}
	}

	var (
		acked    sync.Map // purchase -> true
		nAcked   atomic.Int64
		killOnce sync.Once
		killed   = make(chan struct{})
		began    = time.Now()
		scraped  = make(chan string, 1)
	)
	// Halfway to the kill, read the batching so far (without holding up
	// the stream); at the kill, SIGKILL at once.
	scrape := func() {
		n, took := nAcked.Load(), time.Since(began)
		sum, count, err := c.batchStats()
		if err != nil || count == 0 {
			scraped <- fmt.Sprintf("no batching stats: %v", err)
			return
		}
		scraped <- fmt.Sprintf("%d purchases acknowledged in %v (%.0f/s); %v group commits, %.2f mutations per commit on average",
			n, took.Round(time.Millisecond), float64(n)/took.Seconds(), count, sum/count)
	}
	kill := func() {
		killOnce.Do(func() {
			// Mark the kill before sending it: a stream that sees the
			// connection drop must already know that it was expected.
			close(killed)
			if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Errorf("SIGKILL: %v", err)
			}
		})
	}
	var wg sync.WaitGroup
	for _, ops := range byPlayer {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(ops); i += workers {
					pu := ops[i]
					// Purchases are critical, as the SDK sends them: only the
					// fill rule may refuse them, never the wait estimate.
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					ctx = priority.Outgoing(ctx, priority.Critical)
					r, err := cli.Do(ctx, buyReq(pu.player, pu.rid, pu.item, 1))
					cancel()
					if err != nil {
						select {
						case <-killed:
							return // the expected end of the stream
						default:
						}
						t.Errorf("buy %v before the kill: %v", pu, err)
						return
					}
					if view(r).GetBuyItem() == nil || view(r).GetBuyItem().GetReplayed() {
						t.Errorf("buy %v: %v", pu, r)
						return
					}
					acked.Store(pu, true)
					switch nAcked.Add(1) {
					case killAfter / 2:
						go scrape()
					case killAfter:
						kill()
					}
				}
			}()
		}
	}
	wg.Wait()
	kill() // in case the stream ended first
	<-c.exited
	t.Logf("before the kill: %s", <-scraped)
	if n := nAcked.Load(); n < killAfter || n >= int64(len(plan)) {
		t.Fatalf("%d of %d purchases acknowledged; the kill was not mid-stream", n, len(plan))
	}

	// Restart on the same data dir.
	c2 := startChild(t, bin, dataDir, battleAddr)
	conn2, err := grpc.NewClient(c2.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	cli2 := leveev2.NewLogicClient(conn2)
	do := func(req *leveev2.LogicRequest) *leveev2.LogicReply {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := cli2.Do(ctx, req)
		if err != nil {
			t.Fatalf("after restart, %v: %v", req, err)
		}
		return r
	}

	presentTotal := 0
	for id, ops := range byPlayer {
		before := view(do(profileReq(id, ""))).GetProfile().GetPlayer()
		// Resend every planned request id: replayed means it was applied
		// before the crash.
		present := map[string]uint32{}
		spent := int64(0)
		n := 0
		for _, pu := range ops {
			r := view(do(buyReq(pu.player, pu.rid, pu.item, 1))).GetBuyItem()
			if r == nil {
				t.Fatalf("resend %v: no purchase reply", pu)
			}
			_, wasAcked := acked.Load(pu)
			if wasAcked && !r.GetReplayed() {
				t.Errorf("acknowledged purchase %v lost in the crash", pu)
			}
			if r.GetReplayed() {
				present[pu.item]++
				spent += price[pu.item]
				n++
			}
		}
		presentTotal += n
		if before.GetGold() != 1000-spent || before.GetVersion() != uint64(1+n) {
			t.Errorf("%s after restart: gold %d version %d, want %d and %d from the %d purchases present",
				id, before.GetGold(), before.GetVersion(), 1000-spent, 1+n, n)
		}
		for item, cnt := range before.GetInventory() {
			if cnt != present[item] {
				t.Errorf("%s after restart: %d %s, want %d", id, cnt, item, present[item])
			}
		}
		for item, cnt := range present {
			if before.GetInventory()[item] != cnt {
				t.Errorf("%s after restart: %d %s, want %d", id, before.GetInventory()[item], item, cnt)
			}
		}
		// Now everything is applied, once.
		after := view(do(profileReq(id, ""))).GetProfile().GetPlayer()
		if after.GetGold() != 1000-int64(swords)*100-int64(potions)*10 ||
			after.GetInventory()["sword"] != swords || after.GetInventory()["potion"] != potions ||
			after.GetVersion() != uint64(1+len(ops)) {
			t.Errorf("%s after resending everything: %v", id, after)
		}
		// And sending it all again changes nothing.
		for _, pu := range ops {
			if r := view(do(buyReq(pu.player, pu.rid, pu.item, 1))).GetBuyItem(); !r.GetReplayed() {
				t.Errorf("third send of %v applied again", pu)
			}
		}
		if again := view(do(profileReq(id, ""))).GetProfile().GetPlayer(); again.GetGold() != after.GetGold() || again.GetVersion() != after.GetVersion() {
			t.Errorf("%s changed by a third send: %v, was %v", id, again, after)
		}
	}
	t.Logf("%d purchases planned, %d acknowledged before SIGKILL, %d found applied after restart",
		len(plan), nAcked.Load(), presentTotal)
	if fb.calls.Load() != 0 {
		t.Errorf("battle called %d times", fb.calls.Load())
	}
}
