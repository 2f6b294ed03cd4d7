// Package reqtmpl is the load tool's request templates: a game action's
// request written in a scenario's YAML, with per-player values, turned
// into the request's protojson and from it into the request message.
//
// A template is YAML that reads as the request's protojson (field names
// as in the .proto or their lowerCamel JSON names), where
//
//   - a string may hold placeholders: {{player_id}} (the player's id),
//     {{seq}} (the player's request number, 1, 2, ...), {{job_id}} (a fresh
//     id, unique in the run: a job key such as a battle id) and
//     {{run_id}}; a string that is one {{seq}} alone is a number;
//   - {$range: [LO, HI]} is a whole number drawn uniformly in LO..HI;
//   - {$choice: [A, B, ...]} is one of the values, uniformly, or as
//     weighted by {$choice: [A, B], $weights: [9, 1]}; the values may be
//     templates themselves.
//
// Keys starting with $ are never field names (protobuf names cannot start
// with one), so a template cannot be misread. Compile checks the syntax;
// Check checks a template against the request's message descriptor, so
// that an unknown field or a value that does not fit is an error before
// anything is sent, naming the field; Build expands it.
package reqtmpl

import (
	"encoding/json"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Vars are the per-request values of the placeholders.
type Vars struct {
	Player string // {{player_id}}
	Seq    int64  // {{seq}}
	Job    string // {{job_id}}: unique in the run
	Run    string // {{run_id}}
}

// Placeholders are the names a string may hold as {{name}}.
var Placeholders = []string{"player_id", "seq", "job_id", "run_id"}

// Generators are the mapping keys that make a value: $range, $choice (with
// $weights).
var Generators = []string{"$range", "$choice", "$weights"}

// MaxRangeWidth bounds HI - LO of a $range.
const MaxRangeWidth = 1 << 53

// Error is a template error: Path is the YAML path of the bad value
// (below the template's own path), Line its line (0: unknown).
type Error struct {
	Path string
	Line int
	Msg  string
}

func (e *Error) Error() string { return e.Path + ": " + e.Msg }

type kind uint8

const (
	kNull kind = iota
	kMap
	kList
	kString // a literal or with placeholders
	kNumber
	kBool
	kRange
	kChoice
)

// node is one value of a template.
type node struct {
	kind  kind
	line  int
	path  string
	keys  []string // kMap
	vals  []*node  // kMap values, kList items, kChoice options
	s     string   // kString: the text; kNumber: the literal
	parts []part   // kString with placeholders
	b     bool
	lo    int64 // kRange
	hi    int64
	cum   []float64 // kChoice: cumulative weights, last 1
}

// part is a piece of a string: literal text or a placeholder.
type part struct {
	lit string
	ph  string // "" for literal
}

// Template is a compiled request template.
type Template struct {
	root  *node
	fixed bool   // no placeholder nor generator: Build's result is constant
	fixJS []byte // the constant's protojson (fixed)
}

// Compile reads the template at n (nil or an empty value: the empty
// request {}); path names n in errors ("players.actions[1].request").
func Compile(n *yaml.Node, path string) (*Template, error) {
	if n == nil {
		return &Template{root: &node{kind: kMap, path: path}, fixed: true, fixJS: []byte("{}")}, nil
	}
	root, err := compile(n, path, 0)
	if err != nil {
		return nil, err
	}
	if root.kind == kNull {
		root = &node{kind: kMap, path: path, line: root.line}
	}
	if root.kind != kMap {
		return nil, &Error{Path: path, Line: n.Line, Msg: "want a mapping of the request's fields (e.g. {} or {name: value})"}
	}
	t := &Template{root: root, fixed: isFixed(root)}
	if t.fixed {
		js, err := json.Marshal(root.value(Vars{}, nil))
		if err != nil {
			return nil, &Error{Path: path, Line: n.Line, Msg: err.Error()}
		}
		t.fixJS = js
	}
	return t, nil
}

// Fixed says whether every Build gives the same request.
func (t *Template) Fixed() bool { return t.fixed }

// Draws says whether Build draws from its random source (a $range or a
// $choice): a template without one leaves the source as it was.
func (t *Template) Draws() bool { return draws(t.root) }

func draws(n *node) bool {
	if n.kind == kRange || n.kind == kChoice {
		return true
	}
	for _, v := range n.vals {
		if draws(v) {
			return true
		}
	}
	return false
}

func isFixed(n *node) bool {
	switch n.kind {
	case kRange, kChoice:
		return false
	case kString:
		return len(n.parts) == 0
	}
	for _, v := range n.vals {
		if !isFixed(v) {
			return false
		}
	}
	return true
}

const maxDepth = 32

func compile(n *yaml.Node, path string, depth int) (*node, error) {
	for i := 0; n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > 100 {
			return nil, &Error{Path: path, Line: n.Line, Msg: "bad alias"}
		}
		n = n.Alias
	}
	if depth > maxDepth {
		return nil, &Error{Path: path, Line: n.Line, Msg: fmt.Sprintf("nested deeper than %d", maxDepth)}
	}
	bad := func(format string, args ...any) error {
		return &Error{Path: path, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
	}
	out := &node{line: n.Line, path: path}
	switch n.Kind {
	case yaml.MappingNode:
		if hasDollar(n) {
			return compileGen(n, path, depth)
		}
		out.kind = kMap
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Value == "" {
				return nil, &Error{Path: path, Line: k.Line, Msg: "want a field name as key"}
			}
			p := path + "." + k.Value
			if seen[k.Value] {
				return nil, &Error{Path: p, Line: k.Line, Msg: "given twice"}
			}
			seen[k.Value] = true
			c, err := compile(v, p, depth+1)
			if err != nil {
				return nil, err
			}
			c.line = k.Line
			out.keys = append(out.keys, k.Value)
			out.vals = append(out.vals, c)
		}
		return out, nil
	case yaml.SequenceNode:
		out.kind = kList
		for i, it := range n.Content {
			c, err := compile(it, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			out.vals = append(out.vals, c)
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			out.kind = kNull
		case "!!bool":
			out.kind = kBool
			out.b = n.Value == "true" || n.Value == "True" || n.Value == "TRUE"
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				if i, err2 := strconv.ParseInt(n.Value, 0, 64); err2 == nil {
					out.kind, out.s = kNumber, strconv.FormatInt(i, 10)
					return out, nil
				}
				return nil, bad("%q is not a number JSON can carry", n.Value)
			}
			out.kind = kNumber
			if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
				out.s = strconv.FormatInt(i, 10)
			} else if u, err := strconv.ParseUint(n.Value, 0, 64); err == nil {
				out.s = strconv.FormatUint(u, 10)
			} else {
				out.s = strconv.FormatFloat(f, 'g', -1, 64)
			}
		default:
			out.kind = kString
			out.s = n.Value
			parts, err := parseParts(n.Value)
			if err != nil {
				return nil, bad("%v", err)
			}
			out.parts = parts
		}
		return out, nil
	}
	return nil, bad("not a YAML value")
}

func hasDollar(n *yaml.Node) bool {
	for i := 0; i < len(n.Content); i += 2 {
		if strings.HasPrefix(n.Content[i].Value, "$") {
			return true
		}
	}
	return false
}

// compileGen reads a generator mapping: {$range: [LO, HI]} or {$choice:
// [...], $weights: [...]}.
func compileGen(n *yaml.Node, path string, depth int) (*node, error) {
	bad := func(line int, format string, args ...any) error {
		return &Error{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	var rng, choice, weights *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var at **yaml.Node
		switch k.Value {
		case "$range":
			at = &rng
		case "$choice":
			at = &choice
		case "$weights":
			at = &weights
		default:
			if strings.HasPrefix(k.Value, "$") {
				return nil, bad(k.Line, "unknown generator %s; want $range or $choice (with $weights)", k.Value)
			}
			return nil, bad(k.Line, "field %s next to a generator: a generator mapping holds only $range, or $choice and $weights", k.Value)
		}
		if *at != nil {
			return nil, bad(k.Line, "%s given twice", k.Value)
		}
		*at = v
	}
	switch {
	case rng != nil && (choice != nil || weights != nil):
		return nil, bad(n.Line, "$range and $choice in one value; give one")
	case rng != nil:
		if rng.Kind != yaml.SequenceNode || len(rng.Content) != 2 {
			return nil, bad(rng.Line, "$range wants [LO, HI], two whole numbers")
		}
		var b [2]int64
		for i, x := range rng.Content {
			v, err := strconv.ParseInt(x.Value, 0, 64)
			if x.Kind != yaml.ScalarNode || x.ShortTag() != "!!int" || err != nil {
				return nil, bad(x.Line, "$range: %q is not a whole number", x.Value)
			}
			b[i] = v
		}
		if b[0] > b[1] {
			return nil, bad(rng.Line, "$range [%d, %d]: LO must be <= HI", b[0], b[1])
		}
		if w := float64(b[1]) - float64(b[0]); w >= MaxRangeWidth {
			return nil, bad(rng.Line, "$range [%d, %d] is wider than 2^53", b[0], b[1])
		}
		return &node{kind: kRange, line: n.Line, path: path, lo: b[0], hi: b[1]}, nil
	case choice == nil:
		return nil, bad(n.Line, "$weights without $choice")
	}
	if choice.Kind != yaml.SequenceNode || len(choice.Content) == 0 {
		return nil, bad(choice.Line, "$choice wants a list of at least one value")
	}
	out := &node{kind: kChoice, line: n.Line, path: path}
	for i, it := range choice.Content {
		c, err := compile(it, fmt.Sprintf("%s.$choice[%d]", path, i), depth+1)
		if err != nil {
			return nil, err
		}
		out.vals = append(out.vals, c)
	}
	ws := make([]float64, len(out.vals))
	for i := range ws {
		ws[i] = 1
	}
	if weights != nil {
		if weights.Kind != yaml.SequenceNode || len(weights.Content) != len(out.vals) {
			return nil, bad(weights.Line, "$weights wants one number per $choice value (%d)", len(out.vals))
		}
		for i, x := range weights.Content {
			w, err := strconv.ParseFloat(x.Value, 64)
			if x.Kind != yaml.ScalarNode || err != nil || !(w >= 0) || math.IsInf(w, 0) {
				return nil, bad(x.Line, "$weights: %q is not a number >= 0", x.Value)
			}
			ws[i] = w
		}
	}
	total := 0.0
	for _, w := range ws {
		total += w
	}
	if !(total > 0) {
		return nil, bad(n.Line, "$weights: at least one must be > 0")
	}
	cum := 0.0
	for _, w := range ws {
		cum += w / total
		out.cum = append(out.cum, cum)
	}
	out.cum[len(out.cum)-1] = 1
	return out, nil
}

// parseParts splits s at its {{name}} placeholders.
func parseParts(s string) ([]part, error) {
	if !strings.Contains(s, "{{") {
		if strings.Contains(s, "}}") {
			return nil, fmt.Errorf("%q: }} without {{", s)
		}
		return nil, nil
	}
	var out []part
	rest := s
	for rest != "" {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if strings.Contains(rest, "}}") {
				return nil, fmt.Errorf("%q: }} without {{", s)
			}
			out = append(out, part{lit: rest})
			break
		}
		if i > 0 {
			if strings.Contains(rest[:i], "}}") {
				return nil, fmt.Errorf("%q: }} without {{", s)
			}
			out = append(out, part{lit: rest[:i]})
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("%q: {{ without }}", s)
		}
		name := strings.TrimSpace(rest[i+2 : i+j])
		if !isPlaceholder(name) {
			return nil, fmt.Errorf("unknown placeholder {{%s}}; want %s", name, strings.Join(wrap(Placeholders), ", "))
		}
		out = append(out, part{ph: name})
		rest = rest[i+j+2:]
	}
	return out, nil
}

func wrap(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "{{" + x + "}}"
	}
	return out
}

func isPlaceholder(name string) bool {
	for _, p := range Placeholders {
		if p == name {
			return true
		}
	}
	return false
}

// seqOnly says whether a string is one {{seq}} alone (a number).
func (n *node) seqOnly() bool { return len(n.parts) == 1 && n.parts[0].ph == "seq" }

// value is n expanded as a JSON value.
func (n *node) value(v Vars, rnd *mrand.Rand) any {
	switch n.kind {
	case kMap:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k] = n.vals[i].value(v, rnd)
		}
		return m
	case kList:
		l := make([]any, len(n.vals))
		for i, x := range n.vals {
			l[i] = x.value(v, rnd)
		}
		return l
	case kString:
		if len(n.parts) == 0 {
			return n.s
		}
		if n.seqOnly() {
			return json.Number(strconv.FormatInt(v.Seq, 10))
		}
		var b strings.Builder
		for _, p := range n.parts {
			switch p.ph {
			case "":
				b.WriteString(p.lit)
			case "player_id":
				b.WriteString(v.Player)
			case "seq":
				b.WriteString(strconv.FormatInt(v.Seq, 10))
			case "job_id":
				b.WriteString(v.Job)
			case "run_id":
				b.WriteString(v.Run)
			}
		}
		return b.String()
	case kNumber:
		return json.Number(n.s)
	case kBool:
		return n.b
	case kRange:
		x := n.lo
		if n.hi > n.lo {
			x += int64(rnd.Uint64N(uint64(n.hi-n.lo) + 1))
		}
		return json.Number(strconv.FormatInt(x, 10))
	case kChoice:
		i := 0
		if len(n.vals) > 1 {
			u := rnd.Float64()
			for i < len(n.cum)-1 && u >= n.cum[i] {
				i++
			}
		}
		return n.vals[i].value(v, rnd)
	}
	return nil
}

// JSON expands t for v (rnd draws the $range and $choice values; it may be
// nil when t does not Draw) into the request's protojson.
func (t *Template) JSON(v Vars, rnd *mrand.Rand) ([]byte, error) {
	if t.fixed {
		return t.fixJS, nil
	}
	return json.Marshal(t.root.value(v, rnd))
}

// Build expands t for v into a new message of type mt.
func (t *Template) Build(mt protoreflect.MessageType, v Vars, rnd *mrand.Rand) (proto.Message, error) {
	js, err := t.JSON(v, rnd)
	if err != nil {
		return nil, err
	}
	m := mt.New().Interface()
	if err := protojson.Unmarshal(js, m); err != nil {
		return nil, fmt.Errorf("%s: %v", mt.Descriptor().FullName(), cleanErr(err))
	}
	return m, nil
}

func cleanErr(err error) string {
	s := err.Error()
	for _, p := range []string{"proto: ", "proto:\u00a0"} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}
