package client

import (
	"crypto/rand"
	"encoding/binary"
)

// idBits keeps request ids exact in JSON numbers (2^53).
const idBits = 53

// firstRequestID is a random non-zero 53-bit value, so that ids stay unique
// across reconnects of the same player (the gate uses them to recognise a
// replayed mutation).
func firstRequestID() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("client: crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	id := binary.LittleEndian.Uint64(b[:]) & (1<<idBits - 1)
	// Leave room below 2^53 for a long session's increments.
	id &= 1<<(idBits-1) - 1
	if id == 0 {
		id = 1
	}
	return id
}
