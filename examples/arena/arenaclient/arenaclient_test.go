package arenaclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenaclient"
	"github.com/leveehq/levee/internal/token"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestArenaHelpers(t *testing.T) {
	secret := []byte("s")
	g := clienttest.NewGameGate(secret, arena.Game(), nil, nil)
	t.Cleanup(g.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, json := range []bool{false, true} {
		tok, _ := token.Sign(secret, "ada", time.Now().Add(time.Hour))
		c, err := client.Dial(ctx, g.URL(), tok, arenaclient.Options(client.Options{JSON: json}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if p, err := arenaclient.Profile(c); err != nil || p.GetGold() != arena.StartGold {
			t.Fatalf("json=%v: Profile = %v, %v", json, p, err)
		}
		if p, err := arenaclient.GetProfile(ctx, c, ""); err != nil || p.GetId() != "ada" {
			t.Fatalf("json=%v: GetProfile = %v, %v", json, p, err)
		}
		if _, err := arenaclient.GetProfile(ctx, c, "bob"); client.Code(err) != leveev2.ErrorCode_ERROR_CODE_FORBIDDEN {
			t.Fatalf("json=%v: another's profile: %v", json, err)
		}
		buy, replayed, err := arenaclient.BuyItem(ctx, c, "sword", 2)
		if err != nil || replayed || buy.GetGoldSpent() != 200 || buy.GetPlayer().GetInventory()["sword"] != 2 {
			t.Fatalf("json=%v: BuyItem = %v, %v, %v", json, buy, replayed, err)
		}
		if _, _, err := arenaclient.BuyItem(ctx, c, "dragon_skin", 2); client.Reason(err) != arena.ReasonInsufficientGold {
			t.Fatalf("json=%v: unaffordable: %v", json, err)
		}
		first, replayed, err := arenaclient.StartBattle(ctx, c, "b1", 4, 50)
		if err != nil || replayed || first.GetBattleId() != "b1" || first.GetResult() == nil {
			t.Fatalf("json=%v: StartBattle = %v, %v, %v", json, first, replayed, err)
		}
		again, replayed, err := arenaclient.StartBattle(ctx, c, "b1", 4, 50)
		if err != nil || !replayed || again.GetResult().GetResultHash() != first.GetResult().GetResultHash() {
			t.Fatalf("json=%v: the same battle again = %v, %v, %v", json, again, replayed, err)
		}
		if c.ClassOf(arena.ActionBuyItem) != leveev2.Criticality_CRITICALITY_CRITICAL {
			t.Fatalf("buy_item class %v", c.ClassOf(arena.ActionBuyItem))
		}
	}
}
