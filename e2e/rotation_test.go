package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena/arenaclient"
	"github.com/leveehq/levee/gate"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/loadtest/engine"
	"github.com/leveehq/levee/loadtest/scenario"
)

// ringFile writes a -token-keys file by a rename, as an operator (or a
// Secret volume) replaces it.
func ringFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// rotPlayer is one player of the rotation run: it calls get_profile in a
// loop, counting what it sent and what came back, until told to stop or
// its bounded count is spent.
type rotPlayer struct {
	id, tok string
	cl      atomic.Pointer[client.Client]

	sent, ok  atomic.Int64
	errs      atomic.Int64
	lastErr   atomic.Value // error
	dropped   atomic.Int64 // connections that ended without our Close
	redials   atomic.Int64
	redialNow chan struct{}
}

const rotMaxRequests = 2000 // per player: the load is bounded in count as well as in time

func (p *rotPlayer) dial(ctx context.Context, url string) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := client.Dial(dctx, url, p.tok, arenaclient.Options(client.Options{NoRetry: true}))
	if err != nil {
		return fmt.Errorf("dial %s: %w", p.id, err)
	}
	p.cl.Store(cl)
	return nil
}

// run plays until stop is closed; a signal on redialNow closes the
// connection and dials again with the same token, as a player who lost
// the network would.
func (p *rotPlayer) run(ctx context.Context, url string, stop <-chan struct{}) {
	for n := 0; n < rotMaxRequests; n++ {
		select {
		case <-stop:
			return
		case <-p.redialNow:
			_ = p.cl.Load().Close()
			if err := p.dial(ctx, url); err != nil {
				p.errs.Add(1)
				p.lastErr.Store(err)
				return
			}
			p.redials.Add(1)
		default:
		}
		cl := p.cl.Load()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		p.sent.Add(1)
		_, err := arenaclient.GetProfile(rctx, cl, "")
		cancel()
		if err != nil {
			p.errs.Add(1)
			p.lastErr.Store(err)
			select {
			case <-cl.Done():
				p.dropped.Add(1)
				return
			default:
			}
			continue
		}
		p.ok.Add(1)
	}
}

// TestKeyRotationUnderLoad rotates the gate's token key while players
// play, following docs/keys.md: 20 players hold sessions under key a; the
// ring gets key b as a non-current key (the gate takes it within a second,
// no restart); then b becomes current and a is set to retire in an hour.
// Ten new players sign with b and join, and a quarter of the first players
// reconnect with their a tokens. Every request gets its reply (0 lost, 0
// errors), no connection is dropped, and the only token refusals are the
// probes' for b before the gate had read the file that added it.
func TestKeyRotationUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a load run of a few seconds")
	}
	keyA := token.Key{ID: "a", Secret: []byte("e2e-rotation-key-a-0123")}
	keyB := token.Key{ID: "b", Secret: []byte("e2e-rotation-key-b-4567")}
	path := filepath.Join(t.TempDir(), "keys.json")
	ringFile(t, path, `{"keys":[{"id":"a","secret":"`+string(keyA.Secret)+`","current":true}]}`)
	c := startTiers(t, tiers{gate: func(cfg *gate.Config) {
		cfg.TokenSecret, cfg.TokenKeys = "", path
		// Not what this test is about: players call back to back, which
		// a fast machine could take past the per-connection rate.
		cfg.ConnRate, cfg.ConnBurst = 10_000, 10_000
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exp := time.Now().Add(2 * time.Hour)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var players []*rotPlayer
	start := func(k token.Key, n int, prefix string) []*rotPlayer {
		var ps []*rotPlayer
		for i := range n {
			p := &rotPlayer{id: fmt.Sprintf("%s-%d", prefix, i), redialNow: make(chan struct{}, 1)}
			var err error
			if p.tok, err = k.Sign(p.id, exp); err != nil {
				t.Fatal(err)
			}
			if err := p.dial(ctx, c.gateURL); err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
			wg.Go(func() { p.run(ctx, c.gateURL, stop) })
		}
		players = append(players, ps...)
		return ps
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
		for _, p := range players {
			if cl := p.cl.Load(); cl != nil {
				_ = cl.Close()
			}
		}
	}()
	progressed := func(ps []*rotPlayer, n int64) func() bool {
		return func() bool {
			for _, p := range ps {
				if p.ok.Load() < n && p.errs.Load() == 0 {
					return false
				}
			}
			return true
		}
	}

	first := start(keyA, 20, "early")
	testwait.Until(t, "every early player's first replies", progressed(first, 5))

	// Step 1: b added, not current. Probe with a b token until the gate
	// has read the file (at most a second: it looks once per second).
	ringFile(t, path, `{"keys":[{"id":"a","secret":"`+string(keyA.Secret)+`","current":true},{"id":"b","secret":"`+string(keyB.Secret)+`"}]}`)
	probeTok, err := keyB.Sign("probe", exp)
	if err != nil {
		t.Fatal(err)
	}
	probes := 0
	var lastProbe time.Time
	testwait.UntilWithin(t, 10*time.Second, "the gate to accept key b", func() bool {
		if time.Since(lastProbe) < 100*time.Millisecond {
			return false
		}
		lastProbe = time.Now()
		probes++
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cl, err := client.Dial(dctx, c.gateURL, probeTok, arenaclient.Options(client.Options{NoRetry: true}))
		if err != nil {
			var ce *client.Error
			if !errors.As(err, &ce) {
				t.Fatalf("probe: %v", err)
			}
			return false
		}
		_ = cl.Close()
		return true
	})
	refusedBefore := scrape(t, c.gateOps, "gate_token_refusals_total", "")

	// Step 2: b current, a retiring in an hour (after the longest-lived
	// token signed with it).
	ringFile(t, path, `{"keys":[{"id":"b","secret":"`+string(keyB.Secret)+`","current":true},`+
		`{"id":"a","secret":"`+string(keyA.Secret)+`","retire_at":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}]}`)
	late := start(keyB, 10, "late")
	for i, p := range first {
		if i%4 == 0 {
			p.redialNow <- struct{}{}
		}
	}
	base := make(map[*rotPlayer]int64, len(first))
	for _, p := range first {
		base[p] = p.ok.Load()
	}
	testwait.Until(t, "the new players' replies", progressed(late, 20))
	testwait.Until(t, "the early players' replies after the rotation", func() bool {
		for _, p := range first {
			if p.ok.Load() < base[p]+20 && p.errs.Load() == 0 {
				return false
			}
		}
		return true
	})
	testwait.Until(t, "the reconnects", func() bool {
		for i, p := range first {
			if i%4 == 0 && p.redials.Load() == 0 && p.errs.Load() == 0 {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()

	var sent, ok, redials int64
	for _, p := range players {
		sent, ok, redials = sent+p.sent.Load(), ok+p.ok.Load(), redials+p.redials.Load()
		if p.errs.Load() != 0 || p.dropped.Load() != 0 {
			t.Errorf("%s: %d errors (last %v), %d connections dropped", p.id, p.errs.Load(), p.lastErr.Load(), p.dropped.Load())
		}
		select {
		case <-p.cl.Load().Done():
			t.Errorf("%s: its connection ended before the run did: %v", p.id, p.cl.Load().Err())
		default:
		}
	}
	t.Logf("%d players, %d requests, %d replies, %d reconnects, %d probes for key b", len(players), sent, ok, redials, probes)
	if sent != ok {
		t.Errorf("%d requests, %d replies: %d lost", sent, ok, sent-ok)
	}
	if redials != 5 {
		t.Errorf("%d reconnects, want 5", redials)
	}
	refused := scrape(t, c.gateOps, "gate_token_refusals_total", "")
	unknown := scrape(t, c.gateOps, "gate_token_refusals_total", `reason="unknown_key"`)
	if refused != refusedBefore || refused != unknown || int(refused) != probes-1 {
		t.Errorf("token refusals: %v in all, %v before step 2, %v unknown_key; want only the %d probes before b was read", refused, refusedBefore, unknown, probes-1)
	}
	if got := scrape(t, c.gateOps, "gate_token_keys_errors_total", ""); got != 0 {
		t.Errorf("gate_token_keys_errors_total = %v", got)
	}
}

// The load tool signs with the ring's key (loadtest -token-keys gives the
// engine the current key's id and secret): its players all get in, with
// v2 tokens, at a gate that has no -token-secret.
func TestLoadToolSignsWithTheRing(t *testing.T) {
	if testing.Short() {
		t.Skip("a load run of a few seconds")
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	ringFile(t, path, `{"keys":[{"id":"k1","secret":"e2e-load-ring-key-0123456","current":true}]}`)
	c := startTiers(t, tiers{gate: func(cfg *gate.Config) { cfg.TokenSecret, cfg.TokenKeys = "", path }})
	r, err := token.LoadFileRing(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := r.Ring().Current()
	sc, err := scenario.Parse("ring-signed.yaml", []byte(`
version: 1
name: ring-signed
seed: 3
arrivals:
  phases:
    - {duration: 1s, players: 10}
players:
  login: {do: get_profile, request: {}}
  actions:
    - {do: get_profile, weight: 1, request: {}}
  think: 500ms
client:
  request_timeout: 3s
run:
  duration: 3s
  workers: 1
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := engine.Run(context.Background(), engine.Config{
		Scenario: sc, Gates: []string{c.gateURL}, TokenSecret: string(cur.Secret), TokenKeyID: cur.ID,
		Workers: 1, Game: arenaDriven(),
	})
	if err != nil {
		t.Fatal(err)
	}
	cnt := run.Summary.Counters
	if cnt["arrived"] != 10 || cnt["dial_failures"] != 0 || cnt["ok"] == 0 {
		t.Fatalf("counters %v: want 10 arrived, none failing to dial, replies", cnt)
	}
	if got := scrape(t, c.gateOps, "gate_token_refusals_total", ""); got != 0 {
		t.Fatalf("gate_token_refusals_total = %v", got)
	}
}
