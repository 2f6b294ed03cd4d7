package logic

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// record is a player as a shard holds it. The outcomes of the player's
// mutations are not part of it: they live in the store's bucket of their
// own (see outcome), so that a commit re-encodes only the player.
type record struct {
	player *leveev2.Player
}

// clone is a copy whose player the batch may change.
func (r *record) clone() *record { return &record{player: clonePlayer(r.player)} }

func clonePlayer(p *leveev2.Player) *leveev2.Player { return proto.Clone(p).(*leveev2.Player) }

// marshal encodes r as a leveev2.PlayerRecord.
func (r *record) marshal() ([]byte, error) {
	return proto.Marshal(&leveev2.PlayerRecord{Player: r.player})
}

// unmarshalRecord decodes a leveev2.PlayerRecord. legacy is what a release
// before the idempotency window kept inside the record (openStore moves it
// to the outcomes bucket).
func unmarshalRecord(b []byte) (r *record, legacy []*leveev2.AppliedOp, err error) {
	var pr leveev2.PlayerRecord
	if err := proto.Unmarshal(b, &pr); err != nil {
		return nil, nil, err
	}
	if pr.GetPlayer() == nil {
		return nil, nil, errors.New("record has no player")
	}
	return &record{player: pr.GetPlayer()}, pr.GetApplied(), nil
}

// Outcome keys: "<player id>/req/<request id>" for every mutation with a
// request id, and "<player id>/battle/<battle id>" for a battle. A player id
// never contains '/', so the keys of two players never collide.
func requestKey(playerID string, requestID uint64) string {
	return playerID + "/req/" + strconv.FormatUint(requestID, 10)
}

func battleKey(playerID, battleID string) string { return playerID + "/battle/" + battleID }

// outcome is one mutation's first outcome, encoded as the store keeps it.
type outcome struct {
	key string
	at  time.Time // when it was applied, on the shard's clock
	enc []byte    // a marshalled leveev2.StoredOutcome
}

// newOutcome encodes reply as the outcome of req's action under key.
func newOutcome(key string, at time.Time, req *leveev2.LogicRequest, reply *leveev2.LogicReply) (outcome, error) {
	enc, err := encodeOutcome(at, req, reply)
	if err != nil {
		return outcome{}, fmt.Errorf("encode outcome %q: %w", key, err)
	}
	return outcome{key: key, at: at, enc: enc}, nil
}

// encodeOutcome marshals reply as the outcome of req's action, applied at
// at; the key is not part of it, so one encoding serves every key.
func encodeOutcome(at time.Time, req *leveev2.LogicRequest, reply *leveev2.LogicReply) ([]byte, error) {
	so := &leveev2.StoredOutcome{AppliedAtMs: at.UnixMilli(), Reply: reply}
	switch a := req.GetAction().(type) {
	case *leveev2.LogicRequest_BuyItem:
		so.Request = &leveev2.StoredOutcome_BuyItem{BuyItem: a.BuyItem}
	case *leveev2.LogicRequest_StartBattle:
		so.Request = &leveev2.StoredOutcome_StartBattle{StartBattle: a.StartBattle}
	}
	return proto.Marshal(so)
}

// decodeOutcome decodes a stored outcome; each call returns a fresh copy,
// which the caller may change.
func decodeOutcome(key string, enc []byte) (*leveev2.StoredOutcome, error) {
	var so leveev2.StoredOutcome
	if err := proto.Unmarshal(enc, &so); err != nil {
		return nil, fmt.Errorf("decode stored outcome %q: %w", key, err)
	}
	if so.GetReply() == nil {
		return nil, fmt.Errorf("stored outcome %q has no reply", key)
	}
	return &so, nil
}

// sameRequest says whether req is the request that so answered. Outcomes
// moved from an old PlayerRecord do not say, and match any request.
func sameRequest(so *leveev2.StoredOutcome, req *leveev2.LogicRequest) bool {
	switch a := req.GetAction().(type) {
	case *leveev2.LogicRequest_BuyItem:
		if so.GetRequest() == nil {
			return so.GetReply().GetBattle() == nil
		}
		return proto.Equal(so.GetBuyItem(), a.BuyItem)
	case *leveev2.LogicRequest_StartBattle:
		if so.GetRequest() == nil {
			return so.GetReply().GetBuyItem() == nil
		}
		return proto.Equal(so.GetStartBattle(), a.StartBattle)
	}
	return false
}

// replayOf is the answer to a resend from its stored outcome: the stored
// reply marked replayed.
func replayOf(so *leveev2.StoredOutcome) result {
	reply := so.GetReply()
	reply.Backpressure = nil
	if bi := reply.GetBuyItem(); bi != nil {
		bi.Replayed = true
	}
	if br := reply.GetBattle(); br != nil {
		br.Replayed = true
	}
	return result{reply: reply}
}
