package logic

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// record is a player as a shard holds it: the game's state message and its
// version. The outcomes of the player's mutations are not part of it: they
// live in the store's bucket of their own (see outcome), so that a commit
// re-encodes only the state. A record in the cache or a batch is never
// changed: a mutation works on a clone and puts a new record in the batch.
type record struct {
	state   proto.Message
	version uint64
}

// copyState is a copy of r's state that a handler may change.
func (r *record) copyState() proto.Message { return proto.Clone(r.state) }

// marshal encodes r as a leveev2.PlayerRecord.
func (r *record) marshal() ([]byte, error) {
	state, err := proto.Marshal(r.state)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(&leveev2.PlayerRecord{State: state, Version: r.version})
}

// unmarshalRecord decodes a leveev2.PlayerRecord whose state is a typ.
func unmarshalRecord(b []byte, typ protoreflect.MessageType) (*record, error) {
	var pr leveev2.PlayerRecord
	if err := proto.Unmarshal(b, &pr); err != nil {
		return nil, err
	}
	if pr.GetVersion() == 0 {
		return nil, errors.New("record has no version")
	}
	state := typ.New().Interface()
	if err := proto.Unmarshal(pr.GetState(), state); err != nil {
		return nil, fmt.Errorf("record's state is no %s: %w", typ.Descriptor().FullName(), err)
	}
	return &record{state: state, version: pr.GetVersion()}, nil
}

// Outcome keys: "<player id>/req/<request id>" for every mutation with a
// request id, and "<player id>/job/<job>/<key>" for an action that runs a
// job. A player id never contains '/', so the keys of two players never
// collide; a job's name never does either, so two jobs' keys never do.
func requestKey(playerID string, requestID uint64) string {
	return playerID + "/req/" + strconv.FormatUint(requestID, 10)
}

func jobKey(playerID, job, key string) string { return playerID + "/job/" + job + "/" + key }

// outcome is one mutation's first outcome, encoded as the store keeps it.
type outcome struct {
	key string
	at  time.Time // when it was applied, on the shard's clock
	enc []byte    // a marshalled leveev2.StoredOutcome
}

// encodeOutcome marshals reply as the outcome of call, applied at at; the
// key is not part of it, so one encoding serves every key.
func encodeOutcome(at time.Time, call *leveev2.Call, reply *leveev2.LogicReply) ([]byte, error) {
	return proto.Marshal(&leveev2.StoredOutcome{AppliedAtMs: at.UnixMilli(), Reply: reply, Request: call})
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

// sameRequest says whether the call o carries is the one so answered: the
// same action and an equal request message (compared decoded, since two
// encodings of one message may differ, e.g. in the order of a map).
func sameRequest(so *leveev2.StoredOutcome, o *op) bool {
	c := so.GetRequest()
	if c.GetAction() != o.action.Name {
		return false
	}
	prev := o.action.Request.New().Interface()
	if err := proto.Unmarshal(c.GetRequest(), prev); err != nil {
		return false
	}
	return proto.Equal(prev, o.msg)
}

// replayOf is the answer to a resend from its stored outcome: the stored
// reply marked replayed.
func replayOf(so *leveev2.StoredOutcome) result {
	reply := so.GetReply()
	reply.Backpressure = nil
	reply.Replayed = true
	return result{reply: reply}
}
