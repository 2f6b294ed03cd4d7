package reqtmpl

import (
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Check checks t against the request type mt: every key a field of its
// message (by its .proto name or its JSON name), every value of the
// field's kind (a $range's bounds and every $choice value too), and then
// builds it once with sample values, as protojson would decode it. The
// error is an *Error naming the field.
func (t *Template) Check(mt protoreflect.MessageType) error {
	if err := checkMessage(t.root, mt.Descriptor()); err != nil {
		return err
	}
	v := Vars{Player: "p-check-1", Seq: 1, Job: "p-check-1-1", Run: "check"}
	if _, err := t.Build(mt, v, mrand.New(mrand.NewPCG(1, 2))); err != nil {
		return &Error{Path: t.root.path, Line: t.root.line, Msg: err.Error()}
	}
	return nil
}

func fieldNames(md protoreflect.MessageDescriptor) string {
	fs := md.Fields()
	var out []string
	for i := range fs.Len() {
		out = append(out, string(fs.Get(i).Name()))
	}
	if len(out) == 0 {
		return "none: the request is {}"
	}
	return strings.Join(out, ", ")
}

func checkMessage(n *node, md protoreflect.MessageDescriptor) error {
	if n.kind == kChoice {
		for _, o := range n.vals {
			if err := checkMessage(o, md); err != nil {
				return err
			}
		}
		return nil
	}
	if wellKnown(md) {
		return nil // its own JSON form (Timestamp, Duration, ...): the sample build checks it
	}
	if n.kind != kMap {
		return n.errf("want a mapping of %s's fields, got %s", md.Name(), n.what())
	}
	seen := map[protoreflect.FieldNumber]string{}
	oneofs := map[protoreflect.FullName]string{}
	for i, k := range n.keys {
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			fd = md.Fields().ByJSONName(k)
		}
		v := n.vals[i]
		if fd == nil {
			return &Error{Path: v.path, Line: v.line, Msg: fmt.Sprintf("%s has no field %s; its fields are %s", md.FullName(), k, fieldNames(md))}
		}
		if other, ok := seen[fd.Number()]; ok {
			return v.errf("the same field as %s", other)
		}
		seen[fd.Number()] = k
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if other, ok := oneofs[od.FullName()]; ok {
				return v.errf("%s and %s are of one oneof (%s); give one", other, k, od.Name())
			}
			oneofs[od.FullName()] = k
		}
		if err := checkField(v, fd); err != nil {
			return err
		}
	}
	return nil
}

func wellKnown(md protoreflect.MessageDescriptor) bool {
	return strings.HasPrefix(string(md.FullName()), "google.protobuf.")
}

func checkField(n *node, fd protoreflect.FieldDescriptor) error {
	if n.kind == kNull {
		return nil
	}
	if n.kind == kChoice {
		for _, o := range n.vals {
			if err := checkField(o, fd); err != nil {
				return err
			}
		}
		return nil
	}
	switch {
	case fd.IsMap():
		if n.kind != kMap {
			return n.errf("want a mapping (a map field), got %s", n.what())
		}
		for i, k := range n.keys {
			if err := checkKey(n.vals[i], k, fd.MapKey()); err != nil {
				return err
			}
			if err := checkValue(n.vals[i], fd.MapValue()); err != nil {
				return err
			}
		}
		return nil
	case fd.IsList():
		if n.kind != kList {
			return n.errf("want a list (a repeated field), got %s", n.what())
		}
		for _, it := range n.vals {
			if err := checkValue(it, fd); err != nil {
				return err
			}
		}
		return nil
	}
	return checkValue(n, fd)
}

func checkKey(n *node, k string, fd protoreflect.FieldDescriptor) error {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return nil
	case protoreflect.BoolKind:
		if k != "true" && k != "false" {
			return n.errf("map key %q is not true or false", k)
		}
		return nil
	}
	if _, err := strconv.ParseInt(k, 10, 64); err != nil {
		if _, err := strconv.ParseUint(k, 10, 64); err != nil {
			return n.errf("map key %q is not a whole number", k)
		}
	}
	return nil
}

// checkValue checks one value (not a list nor a map) against fd's kind.
func checkValue(n *node, fd protoreflect.FieldDescriptor) error {
	if n.kind == kNull {
		return nil
	}
	if n.kind == kChoice {
		for _, o := range n.vals {
			if err := checkValue(o, fd); err != nil {
				return err
			}
		}
		return nil
	}
	switch k := fd.Kind(); k {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(n, fd.Message())
	case protoreflect.StringKind:
		if n.kind != kString {
			return n.errf("want a string (%s is a string), got %s", fd.Name(), n.what())
		}
		return nil
	case protoreflect.BytesKind:
		if n.kind != kString {
			return n.errf("want a base64 string (%s is bytes), got %s", fd.Name(), n.what())
		}
		return nil
	case protoreflect.BoolKind:
		if n.kind != kBool {
			return n.errf("want true or false (%s is a bool), got %s", fd.Name(), n.what())
		}
		return nil
	case protoreflect.EnumKind:
		ed := fd.Enum()
		switch n.kind {
		case kString:
			if len(n.parts) == 0 && ed.Values().ByName(protoreflect.Name(n.s)) == nil {
				return n.errf("%q is not a value of %s (%s)", n.s, ed.FullName(), enumNames(ed))
			}
			return nil
		case kNumber:
			if _, err := strconv.ParseInt(n.s, 10, 32); err != nil {
				return n.errf("%s is not an enum number", n.s)
			}
			return nil
		}
		return n.errf("want a value of %s (%s), got %s", ed.FullName(), enumNames(ed), n.what())
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		switch {
		case n.kind == kNumber, n.kind == kRange, n.kind == kString && n.seqOnly():
			return nil
		}
		return n.errf("want a number (%s is a %s), got %s", fd.Name(), k, n.what())
	}
	lo, hi := intBounds(fd.Kind())
	switch n.kind {
	case kNumber:
		if !fitsInt(n.s, lo, hi) {
			return n.errf("%s does not fit %s (a %s, %s..%s)", n.s, fd.Name(), fd.Kind(), fmtBound(lo), fmtBound(hi))
		}
		return nil
	case kRange:
		if float64(n.lo) < lo || float64(n.hi) > hi {
			return n.errf("$range [%d, %d] does not fit %s (a %s, %s..%s)", n.lo, n.hi, fd.Name(), fd.Kind(), fmtBound(lo), fmtBound(hi))
		}
		return nil
	case kString:
		if n.seqOnly() {
			return nil
		}
	}
	return n.errf("want a whole number (%s is a %s), got %s", fd.Name(), fd.Kind(), n.what())
}

func fmtBound(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func intBounds(k protoreflect.Kind) (lo, hi float64) {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return math.MinInt32, math.MaxInt32
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return 0, math.MaxUint32
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return 0, math.MaxUint64
	}
	return math.MinInt64, math.MaxInt64
}

func fitsInt(s string, lo, hi float64) bool {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return float64(i) >= lo && float64(i) <= hi
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return float64(u) <= hi
	}
	return false // a fraction, or out of 64 bits
}

func enumNames(ed protoreflect.EnumDescriptor) string {
	vs := ed.Values()
	var out []string
	for i := range vs.Len() {
		out = append(out, string(vs.Get(i).Name()))
	}
	return strings.Join(out, ", ")
}

func (n *node) errf(format string, args ...any) error {
	return &Error{Path: n.path, Line: n.line, Msg: fmt.Sprintf(format, args...)}
}

// what says what a value is, for "want X, got Y".
func (n *node) what() string {
	switch n.kind {
	case kMap:
		return "a mapping"
	case kList:
		return "a list"
	case kString:
		return strconv.Quote(n.s)
	case kNumber:
		return n.s
	case kBool:
		return strconv.FormatBool(n.b)
	case kRange:
		return fmt.Sprintf("$range [%d, %d]", n.lo, n.hi)
	}
	return "null"
}
