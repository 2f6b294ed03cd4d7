// Package priority is the cluster's one criticality type, Class, and its
// carriage from tier to tier in gRPC metadata.
//
// A Class says how important a request is: Sheddable < Default < Critical.
// Every tier sheds sheddable work first and critical work last: the gate's
// cooling, logic's queues, battle's adaptive shedder and the client SDK's
// pacer all read this one type, and a Class's String is both its metadata
// value and the criticality label of every metric.
//
// The class is the cluster's decision, never the client's: the gate takes
// it from the game's declaration (each action's game.Critical, Default or
// Sheddable: gamedef.Class.Priority; logins are critical; a client may
// only lower it) and sends it with Outgoing;
// logic and battle, which only the gate and logic call, trust what
// FromIncoming reads. The proto's Criticality (FromProto, Class.Proto) is
// only what a client may ask for.
//
// The package depends on nothing of Levee's but the generated protobuf
// types, so that every tier, the shedder and the client can import it.
package priority

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Class is how important a request is to the player; a larger value is
// more important. A Class is its own index into per-class tables (arrays of
// NumClasses). A value other than the three below counts as Default
// everywhere (Index, String, Proto), so an unknown class never gets the
// critical lane; indexing a table with one directly panics, so code that
// may hold such a value indexes with Index.
//
// The zero value is Sheddable: a class nobody set is never favoured. What a
// caller did not say (no metadata, UNSPECIFIED) reads as Default.
type Class uint8

const (
	// Sheddable work (a game's emotes, cosmetics, chat) is shed first.
	Sheddable Class = iota
	// Default work (most of a game's actions and jobs) is shed when a
	// tier is full.
	Default
	// Critical work (a game's purchases and trades, logins, reconnects)
	// is shed last: no
	// adaptive rule sheds it, only hard caps stop it.
	Critical
	// NumClasses is the number of classes, the length of per-class tables.
	NumClasses = iota
)

// Classes are the classes in index order, least important first.
var Classes = [NumClasses]Class{Sheddable, Default, Critical}

// Valid says whether c is one of Sheddable, Default and Critical.
func (c Class) Valid() bool { return c < NumClasses }

// Index is c as an index into a per-class table: c itself, or Default when
// c is not Valid.
func (c Class) Index() int {
	if c >= NumClasses {
		return int(Default)
	}
	return int(c)
}

// labels are the String of each class, in Index order.
var labels = [NumClasses]string{"sheddable", "default", "critical"}

// String is "sheddable", "default" or "critical": the class's metadata
// value and its criticality label on metrics.
func (c Class) String() string { return labels[c.Index()] }

// GoString is for %#v in test failures: the name and, for a value that is
// not Valid, the number.
func (c Class) GoString() string {
	if !c.Valid() {
		return "priority.Class(" + strconv.Itoa(int(c)) + ")"
	}
	return "priority." + [NumClasses]string{"Sheddable", "Default", "Critical"}[c]
}

// Proto is c as the proto's Criticality (never UNSPECIFIED).
func (c Class) Proto() leveev2.Criticality {
	switch c {
	case Critical:
		return leveev2.Criticality_CRITICALITY_CRITICAL
	case Sheddable:
		return leveev2.Criticality_CRITICALITY_SHEDDABLE
	}
	return leveev2.Criticality_CRITICALITY_DEFAULT
}

// FromProto is the class the proto's p names. ok is false for UNSPECIFIED
// and for numbers the proto does not define, which yield Default: the
// caller decides what "not said" means (the gate: its table's class).
func FromProto(p leveev2.Criticality) (c Class, ok bool) {
	switch p {
	case leveev2.Criticality_CRITICALITY_CRITICAL:
		return Critical, true
	case leveev2.Criticality_CRITICALITY_DEFAULT:
		return Default, true
	case leveev2.Criticality_CRITICALITY_SHEDDABLE:
		return Sheddable, true
	}
	return Default, false
}

// Parse reads a String value. ok is false for anything else, which yields
// Default.
func Parse(s string) (c Class, ok bool) {
	for _, c := range Classes {
		if s == c.String() {
			return c, true
		}
	}
	return Default, false
}

// Key is the gRPC metadata key that carries a request's class.
const Key = "levee-criticality"

// Outgoing returns ctx with c in its outgoing gRPC metadata.
func Outgoing(ctx context.Context, c Class) context.Context {
	return metadata.AppendToOutgoingContext(ctx, Key, c.String())
}

// FromIncoming is the class a server-side call was sent with: Default when
// there is none or it is not a class's String.
func FromIncoming(ctx context.Context) Class {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(Key); len(v) > 0 {
		c, _ := Parse(v[0])
		return c
	}
	return Default
}
