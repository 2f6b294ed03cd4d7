package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/token"
)

// A game client calls the game's actions by name with its own messages.
// Here the demo game runs on the fake gate of package clienttest.
func ExampleClient_Call() {
	g := clienttest.NewGameGate(secret, arena.Game(), nil, nil)
	defer g.Close()
	tok, _ := token.Sign(secret, "ada", time.Now().Add(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	c, err := client.Dial(ctx, g.URL(), tok, client.Options{Game: arena.Game()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	me, _ := client.StateOf[*arenapb.Player](c)
	fmt.Println(c.PlayerID(), "starts with", me.GetGold(), "gold")

	var rep arenapb.BuyItemReply
	if err := c.Call(ctx, "buy_item", &arenapb.BuyItemRequest{ItemId: "potion", Quantity: 3}, &rep); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("spent", rep.GetGoldSpent(), "left", rep.GetPlayer().GetGold())

	_, err = client.Call[*arenapb.BuyItemReply](ctx, c, "buy_item", &arenapb.BuyItemRequest{ItemId: "dragon_skin", Quantity: 2})
	fmt.Println(client.CodeName(client.Code(err)), client.Reason(err))
	// Output:
	// ada starts with 1000 gold
	// spent 30 left 970
	// REJECTED insufficient_gold
}
