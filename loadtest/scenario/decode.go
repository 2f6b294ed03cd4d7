package scenario

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/leveehq/levee/loadtest/reqtmpl"
)

// decoder fills a Scenario from a yaml.Node tree strictly: every mapping
// key must be a field (like yaml.v3's Decoder.KnownFields(true), but the
// error names the path), duplicate keys and wrong kinds are errors, and
// it records where each path is so validation errors can name the line.
type decoder struct {
	file string
	// sets are the nodes an override wrote (their key and value), -> the
	// override.
	sets map[*yaml.Node]string
	// pos is the node each decoded path came from (the key node of a
	// mapping entry, the item of a sequence).
	pos map[string]*yaml.Node
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, sets: map[*yaml.Node]string{}, pos: map[string]*yaml.Node{}}
}

// errAt is an Error about path at node n.
func (d *decoder) errAt(n *yaml.Node, path, format string, args ...any) *Error {
	e := &Error{File: d.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		if set, ok := d.sets[n]; ok {
			e.Set = set
		} else if set, ok := d.sets[d.pos[path]]; ok {
			e.Set = set
		} else {
			e.Line = n.Line
		}
	}
	return e
}

// fail is an Error about path, at the node of path or of its nearest
// ancestor that was in the file.
func (d *decoder) fail(path, format string, args ...any) *Error {
	return d.errAt(d.node(path), path, format, args...)
}

// node is the node of path or of its nearest ancestor; nil for none.
func (d *decoder) node(path string) *yaml.Node {
	for p := path; p != ""; p = parent(p) {
		if n, ok := d.pos[p]; ok {
			return n
		}
	}
	return nil
}

// has says whether path was in the file (or set by an override).
func (d *decoder) has(path string) bool { _, ok := d.pos[path]; return ok }

// parent is the path without its last element: "a.b[2]" -> "a.b" -> "a" -> "".
func parent(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var (
	durationType = reflect.TypeFor[Duration]()
	templateType = reflect.TypeFor[*reqtmpl.Template]()
)

// kindName says what a node is, for "want X, got Y".
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// isNull says whether n is an empty value ("key:" or "key: ~").
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// decode fills v from n; path names n.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	for depth := 0; n.Kind == yaml.AliasNode; depth++ {
		if n.Alias == nil || depth > 100 {
			return d.errAt(n, path, "bad alias")
		}
		n = n.Alias
	}
	if isNull(n) {
		v.SetZero()
		return nil
	}
	t := v.Type()
	if t == templateType {
		tp, err := reqtmpl.Compile(n, path)
		if err != nil {
			var te *reqtmpl.Error
			if errors.As(err, &te) {
				line := n
				if te.Line > 0 {
					line = &yaml.Node{Line: te.Line}
				}
				return d.errAt(line, te.Path, "%s", te.Msg)
			}
			return d.errAt(n, path, "%v", err)
		}
		v.Set(reflect.ValueOf(tp))
		return nil
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode {
			return d.errAt(n, path, "want a duration (e.g. 10s), got %s", kindName(n))
		}
		dur, err := parseDuration(n.Value)
		if err != nil {
			return d.errAt(n, path, "%v", err)
		}
		v.SetInt(int64(dur))
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return d.errAt(n, path, "want a list, got %s", kindName(n))
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.pos[p] = item
			if err := d.decode(item, s.Index(i), p); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Map: // map[string]string
		if n.Kind != yaml.MappingNode {
			return d.errAt(n, path, "want a mapping of names to values, got %s", kindName(n))
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return d.errAt(k, path, "want a name as key, got %s", kindName(k))
			}
			p := join(path, k.Value)
			if d.has(p) {
				return d.errAt(k, p, "given twice (also on line %d)", d.pos[p].Line)
			}
			d.pos[p] = k
			if _, ok := d.sets[val]; ok {
				d.pos[p] = val
			}
			ev := reflect.New(t.Elem()).Elem()
			if err := d.decode(val, ev, p); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k.Value), ev)
		}
		v.Set(m)
		return nil
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := d.decode(n, p.Elem(), path); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return d.errAt(n, path, "want %s, got %s", want(t), kindName(n))
	}
	s := n.Value
	switch t.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		switch s {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			return d.errAt(n, path, "%q is not true or false", s)
		}
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return d.errAt(n, path, "%q is not a number", s)
		}
		v.SetFloat(f)
	case reflect.Int:
		i, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return d.errAt(n, path, "%q is not a whole number", s)
		}
		if v.OverflowInt(i) {
			return d.errAt(n, path, "%s is out of range", s)
		}
		v.SetInt(i)
	case reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return d.errAt(n, path, "%q is not a whole number >= 0", s)
		}
		if v.OverflowUint(u) {
			return d.errAt(n, path, "%s is out of range", s)
		}
		v.SetUint(u)
	default:
		return d.errAt(n, path, "cannot decode into %s", t)
	}
	return nil
}

// want names what a scalar field takes.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	}
	return "a whole number"
}

// fields maps a struct's yaml names to field indexes.
func fields(t reflect.Type) (map[string]int, []string) {
	m := map[string]int{}
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		m[name] = i
		names = append(names, name)
	}
	return m, names
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		what := "a mapping of fields"
		if path == "" {
			what = "a scenario (a mapping of fields)"
		}
		return d.errAt(n, path, "want %s, got %s", what, kindName(n))
	}
	idx, names := fields(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return d.errAt(k, path, "want a field name as key, got %s", kindName(k))
		}
		p := join(path, k.Value)
		f, ok := idx[k.Value]
		if !ok {
			return d.errAt(k, p, "unknown field; the fields here are %s", strings.Join(names, ", "))
		}
		if d.has(p) {
			return d.errAt(k, p, "given twice (also on line %d)", d.pos[p].Line)
		}
		d.pos[p] = k
		if _, ok := d.sets[val]; ok {
			d.pos[p] = val
		}
		if err := d.decode(val, v.Field(f), p); err != nil {
			return err
		}
	}
	return nil
}

// setPath is an override's path: names and [index] parts.
var setPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\[[0-9]+\])*(\.[A-Za-z_][A-Za-z0-9_-]*(\[[0-9]+\])*)*$`)

var setPart = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_-]*|\[[0-9]+\]`)

// override applies one "path=value" to the tree under root (a mapping):
// missing mapping keys are created, an index must exist, and the target
// becomes a scalar with value (typed as YAML would type it).
func (d *decoder) override(root *yaml.Node, set string) error {
	path, value, ok := strings.Cut(set, "=")
	path, value = strings.TrimSpace(path), strings.TrimSpace(value)
	bad := func(format string, args ...any) error {
		return &Error{File: d.file, Path: path, Set: set, Msg: fmt.Sprintf(format, args...)}
	}
	if !ok {
		return bad("want path=value, e.g. players.think=2s")
	}
	if !setPath.MatchString(path) {
		return bad("bad path; want names and [index]es like arrivals.phases[1].players")
	}
	parts := setPart.FindAllString(path, -1)
	cur := root
	done := ""
	var holder *[]*yaml.Node // where cur is, to replace it
	var at int
	for _, part := range parts {
		for cur.Kind == yaml.AliasNode && cur.Alias != nil {
			cur = cur.Alias
		}
		if isNull(cur) && !strings.HasPrefix(part, "[") {
			*cur = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: cur.Line, Column: cur.Column}
		}
		if strings.HasPrefix(part, "[") {
			i, _ := strconv.Atoi(part[1 : len(part)-1])
			n := 0
			switch {
			case cur.Kind == yaml.SequenceNode:
				n = len(cur.Content)
			case isNull(cur):
			default:
				return bad("%s is not a list", done)
			}
			if i >= n {
				return bad("index %d is past the end of %s (%d entries)", i, done, n)
			}
			holder, at = &cur.Content, i
			cur = cur.Content[i]
			done += part
			continue
		}
		if cur.Kind != yaml.MappingNode {
			if done == "" {
				return bad("the file is not a mapping")
			}
			return bad("%s is not a mapping", done)
		}
		done = join(done, part)
		found := -1
		for i := 0; i+1 < len(cur.Content); i += 2 {
			if cur.Content[i].Value == part {
				found = i + 1
			}
		}
		if found < 0 {
			k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: part}
			v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
			d.sets[k] = set
			cur.Content = append(cur.Content, k, v)
			found = len(cur.Content) - 1
		}
		d.sets[cur.Content[found-1]] = set
		holder, at = &cur.Content, found
		cur = cur.Content[found]
	}
	if cur.Kind == yaml.MappingNode || cur.Kind == yaml.SequenceNode {
		return bad("%s is %s; set a value inside it", path, kindName(cur))
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: value}
	n.Tag = n.ShortTag() // as YAML types a plain scalar: 5 -> !!int, 2s -> !!str, ~ -> !!null
	d.sets[n] = set
	(*holder)[at] = n
	return nil
}
