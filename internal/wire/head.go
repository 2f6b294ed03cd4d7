package wire

import (
	"math"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The JSON encoding of a reply frame's head (every ServerFrame member but
// the payload), written by hand: protojson's fixed cost for the small
// frame was a third of a JSON reply's encoding. What appendHead writes
// decodes (protojson) to the very fields protojson would have written;
// TestJSONHeadMatchesProtojson checks it over random frames.

var (
	frameFields      = (&leveev2.ServerFrame{}).ProtoReflect().Descriptor().Fields()
	bpFields         = (&leveev2.Backpressure{}).ProtoReflect().Descriptor().Fields()
	jsonRequestIDKey = memberName(frameFields.ByName("request_id"))
	jsonBP           = memberName(frameFields.ByName("backpressure"))
	jsonReplayed     = memberName(frameFields.ByName("replayed"))
	jsonVersion      = memberName(frameFields.ByName("version"))
	jsonQueueDepth   = memberName(bpFields.ByName("queue_depth"))
	jsonRatio        = memberName(bpFields.ByName("ratio"))
	jsonRetryAfter   = memberName(bpFields.ByName("retry_after_ms"))
)

// memberName is `"jsonName":`.
func memberName(fd protoreflect.FieldDescriptor) []byte { return []byte(`"` + fd.JSONName() + `":`) }

// appendHead appends to dst the members of f's head, comma-separated,
// without braces, as protojson writes them (zero values left out, 64-bit
// integers as strings); n is how many it wrote. ok is false for a ratio
// JSON has no number for (NaN, ±Inf), which the caller encodes with
// protojson instead.
func appendHead(dst []byte, f *leveev2.ServerFrame) (out []byte, n int, ok bool) {
	member := func(name []byte) {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, name...)
	}
	if id := f.GetRequestId(); id != 0 {
		member(jsonRequestIDKey)
		dst = append(dst, '"')
		dst = strconv.AppendUint(dst, id, 10)
		dst = append(dst, '"')
	}
	if bp := f.GetBackpressure(); bp != nil {
		r := bp.GetRatio()
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return dst, n, false
		}
		member(jsonBP)
		dst = append(dst, '{')
		m := 0
		field := func(name []byte) {
			if m > 0 {
				dst = append(dst, ',')
			}
			m++
			dst = append(dst, name...)
		}
		if d := bp.GetQueueDepth(); d != 0 {
			field(jsonQueueDepth)
			dst = strconv.AppendUint(dst, uint64(d), 10)
		}
		if r != 0 {
			field(jsonRatio)
			dst = strconv.AppendFloat(dst, r, 'g', -1, 64)
		}
		if ra := bp.GetRetryAfterMs(); ra != 0 {
			field(jsonRetryAfter)
			dst = strconv.AppendUint(dst, uint64(ra), 10)
		}
		dst = append(dst, '}')
	}
	if f.GetReplayed() {
		member(jsonReplayed)
		dst = append(dst, "true"...)
	}
	if v := f.GetVersion(); v != 0 {
		member(jsonVersion)
		dst = append(dst, '"')
		dst = strconv.AppendUint(dst, v, 10)
		dst = append(dst, '"')
	}
	return dst, n, true
}

// init checks what appendHead takes for granted of the frame's fields:
// their kinds, and that the head is all of ServerFrame but its payload.
func init() {
	kinds := map[protoreflect.Name]protoreflect.Kind{
		"request_id": protoreflect.Uint64Kind, "backpressure": protoreflect.MessageKind,
		"replayed": protoreflect.BoolKind, "version": protoreflect.Uint64Kind,
	}
	for i := range frameFields.Len() {
		fd := frameFields.Get(i)
		if fd.ContainingOneof() != nil {
			continue
		}
		if k, ok := kinds[fd.Name()]; !ok || fd.Kind() != k || fd.Cardinality() == protoreflect.Repeated {
			panic("wire: ServerFrame." + string(fd.Name()) + " is not what the JSON head encoder writes")
		}
	}
	bpKinds := map[protoreflect.Name]protoreflect.Kind{
		"queue_depth": protoreflect.Uint32Kind, "ratio": protoreflect.DoubleKind, "retry_after_ms": protoreflect.Uint32Kind,
	}
	for i := range bpFields.Len() {
		fd := bpFields.Get(i)
		if k, ok := bpKinds[fd.Name()]; !ok || fd.Kind() != k || fd.Cardinality() == protoreflect.Repeated {
			panic("wire: Backpressure." + string(fd.Name()) + " is not what the JSON head encoder writes")
		}
	}
}
