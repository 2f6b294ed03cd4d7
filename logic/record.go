package logic

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	leveev1 "levee/proto/leveev1"
)

// maxApplied bounds a player's stored outcomes: the last maxApplied
// purchases and battles are answered from the record when repeated.
const maxApplied = 256

// record is a player as a shard holds it: the state, and the outcomes of its
// most recent mutations, oldest first. An outcome never changes once stored,
// so it is kept encoded: a commit copies its bytes instead of encoding
// hundreds of stored replies again, and only a replay decodes one.
type record struct {
	player  *leveev1.Player
	applied []appliedOp
}

// appliedOp is a marshalled leveev1.AppliedOp and its key.
type appliedOp struct {
	key string
	enc []byte
}

// clone is a copy whose player the batch may change; the encoded outcomes
// are shared, being immutable.
func (r *record) clone() *record {
	return &record{player: clonePlayer(r.player), applied: slices.Clone(r.applied)}
}

func clonePlayer(p *leveev1.Player) *leveev1.Player { return proto.Clone(p).(*leveev1.Player) }

// find returns the stored reply for key, newest first; nil if none.
func (r *record) find(key string) (*leveev1.LogicReply, error) {
	for i := len(r.applied) - 1; i >= 0; i-- {
		if r.applied[i].key != key {
			continue
		}
		var op leveev1.AppliedOp
		if err := proto.Unmarshal(r.applied[i].enc, &op); err != nil {
			return nil, fmt.Errorf("decode stored outcome %q: %w", key, err)
		}
		if op.GetReply() == nil {
			return nil, fmt.Errorf("stored outcome %q has no reply", key)
		}
		return op.GetReply(), nil
	}
	return nil, nil
}

// add stores key's outcome, dropping the oldest beyond maxApplied.
func (r *record) add(key string, reply *leveev1.LogicReply) error {
	enc, err := proto.Marshal(&leveev1.AppliedOp{Key: key, Reply: reply})
	if err != nil {
		return fmt.Errorf("encode outcome %q: %w", key, err)
	}
	r.applied = append(r.applied, appliedOp{key: key, enc: enc})
	if n := len(r.applied) - maxApplied; n > 0 {
		r.applied = append(r.applied[:0:0], r.applied[n:]...)
	}
	return nil
}

// Field numbers of leveev1.PlayerRecord, which marshal writes by hand.
const (
	fieldPlayer  protowire.Number = 1
	fieldApplied protowire.Number = 2
)

// marshal encodes r as a leveev1.PlayerRecord.
func (r *record) marshal() ([]byte, error) {
	pb, err := proto.Marshal(r.player)
	if err != nil {
		return nil, err
	}
	n := protowire.SizeTag(fieldPlayer) + protowire.SizeBytes(len(pb))
	for _, a := range r.applied {
		n += protowire.SizeTag(fieldApplied) + protowire.SizeBytes(len(a.enc))
	}
	b := make([]byte, 0, n)
	b = protowire.AppendTag(b, fieldPlayer, protowire.BytesType)
	b = protowire.AppendBytes(b, pb)
	for _, a := range r.applied {
		b = protowire.AppendTag(b, fieldApplied, protowire.BytesType)
		b = protowire.AppendBytes(b, a.enc)
	}
	return b, nil
}

// unmarshalRecord decodes a leveev1.PlayerRecord.
func unmarshalRecord(b []byte) (*record, error) {
	var pr leveev1.PlayerRecord
	if err := proto.Unmarshal(b, &pr); err != nil {
		return nil, err
	}
	if pr.GetPlayer() == nil {
		return nil, fmt.Errorf("record has no player")
	}
	r := &record{player: pr.GetPlayer(), applied: make([]appliedOp, 0, len(pr.GetApplied()))}
	for _, op := range pr.GetApplied() {
		enc, err := proto.Marshal(op)
		if err != nil {
			return nil, err
		}
		r.applied = append(r.applied, appliedOp{key: op.GetKey(), enc: enc})
	}
	return r, nil
}
