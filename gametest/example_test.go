package gametest_test

import (
	"fmt"
	"os"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/gametest"
)

// A game's test logs a player in on a shard, calls actions by name with
// its messages, and checks that a resend replays the first outcome and
// that a business error stays final. In a test, pass the test's own t.
func Example() {
	t := &exampleT{}
	defer t.done()
	s := gametest.New(t, arena.Game())
	alice := s.Login("alice")

	buy := alice.Do(arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: "sword", Quantity: 2})
	rep := gametest.Decode[*arenapb.BuyItemReply](buy)
	again := buy.Resend().MustReplay(buy)
	fmt.Println("spent", rep.GetGoldSpent(), "at version", buy.Version, "- resend replayed:", again.Replayed)

	broke := alice.Do(arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: "dragon_skin", Quantity: 2}).MustReject(arena.ReasonInsufficientGold)
	fmt.Println(broke.Err.Reason, "- resend replayed:", broke.Resend().MustReplay(broke).Replayed)

	p := gametest.State[*arenapb.Player](alice)
	fmt.Println("gold", p.GetGold(), "swords", p.GetInventory()["sword"])
	// Output:
	// spent 200 at version 2 - resend replayed: true
	// insufficient_gold - resend replayed: true
	// gold 800 swords 2
}

// exampleT is what a *testing.T gives the kit, for this example.
type exampleT struct{ cleanups []func() }

func (t *exampleT) Helper()                   {}
func (t *exampleT) Errorf(f string, a ...any) { fmt.Printf("error: "+f+"\n", a...) }
func (t *exampleT) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (t *exampleT) Cleanup(f func())          { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) TempDir() string {
	dir, err := os.MkdirTemp("", "gametest-example-")
	if err != nil {
		panic(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
func (t *exampleT) done() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
