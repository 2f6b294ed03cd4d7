package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/leveehq/levee/loadtest/scenarios"
)

// MaxFileSize bounds a scenario file.
const MaxFileSize = 1 << 20

// Load reads a scenario file, or a preset when name has no '/' and does
// not end in ".yaml" and is a preset's name (Presets). overrides are
// "path=value" (YAML paths like "players.think=2s",
// "arrivals.phases[1].players=500", "scale=0.1"), applied to the YAML tree
// before strict decoding, so errors name them too.
func Load(name string, overrides []string) (*Scenario, error) {
	if !strings.Contains(name, "/") && !strings.HasSuffix(name, ".yaml") {
		if data, err := fs.ReadFile(scenarios.FS, name+".yaml"); err == nil {
			readFile := func(p string) ([]byte, error) { return fs.ReadFile(scenarios.FS, path.Clean(p)) }
			s, err := Parse(name+".yaml", data, overrides, readFile)
			if err != nil {
				return nil, err
			}
			s.File = "preset:" + name
			return s, nil
		}
	}
	data, err := readLimited(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(name, `/\.`) {
			return nil, &Error{File: name, Msg: fmt.Sprintf("neither a preset (%s) nor a file", strings.Join(presetNames(), ", "))}
		}
		return nil, &Error{File: name, Msg: err.Error()}
	}
	return Parse(name, data, overrides, nil)
}

func readLimited(name string) ([]byte, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%d bytes, at most %d", st.Size(), MaxFileSize)
	}
	return os.ReadFile(name)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// Parse reads a scenario from data; file names it in errors and is where
// relative csv/prometheus paths start. readFile reads those (nil:
// os.ReadFile). overrides are as for Load. Every error is an *Error.
func Parse(file string, data []byte, overrides []string, readFile func(path string) ([]byte, error)) (*Scenario, error) {
	if readFile == nil {
		readFile = func(p string) ([]byte, error) { return readLimitedData(p) }
	}
	if len(data) > MaxFileSize {
		return nil, &Error{File: file, Msg: fmt.Sprintf("%d bytes, at most %d", len(data), MaxFileSize)}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err.Error() != "EOF" {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		e := &Error{File: file, Msg: msg}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = strings.TrimPrefix(err.Error(), m[0])
		}
		return nil, e
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: file, Line: extra.Line, Msg: "more than one YAML document; a scenario is one"}
	}
	d := newDecoder(file)
	var root *yaml.Node
	switch {
	case doc.Kind == 0: // empty file
		root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	case doc.Kind == yaml.DocumentNode && len(doc.Content) == 1:
		root = doc.Content[0]
		if isNull(root) {
			root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line}
		}
	default:
		return nil, &Error{File: file, Msg: "not a YAML document"}
	}
	if root.Kind != yaml.MappingNode {
		return nil, d.errAt(root, "", "want a scenario (a mapping of fields), got %s", kindName(root))
	}
	for _, o := range overrides {
		if err := d.override(root, o); err != nil {
			return nil, err
		}
	}
	s := &Scenario{File: file}
	if err := d.decode(root, reflect.ValueOf(s).Elem(), ""); err != nil {
		return nil, err
	}
	if err := d.validate(s, readFile); err != nil {
		return nil, err
	}
	return s, nil
}

func readLimitedData(p string) ([]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxCurveFile {
		return nil, fmt.Errorf("%s: %d bytes, at most %d", p, st.Size(), maxCurveFile)
	}
	return os.ReadFile(p)
}

// maxCurveFile bounds a csv or prometheus file.
const maxCurveFile = 256 << 20

// relative is p taken relative to the scenario file's directory.
func relative(file, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(file), p)
}

// Preset is one embedded scenario.
type Preset struct {
	Name, Description string
}

// Presets are the embedded scenarios, sorted by name; DefaultPreset
// ("launch") is the default.
func Presets() []Preset {
	var out []Preset
	for _, n := range presetNames() {
		data, err := fs.ReadFile(scenarios.FS, n+".yaml")
		if err != nil {
			continue
		}
		var head struct {
			Description string `yaml:"description"`
		}
		_ = yaml.Unmarshal(data, &head) // a broken preset fails its test; here it has no description
		out = append(out, Preset{Name: n, Description: strings.TrimSpace(head.Description)})
	}
	return out
}

func presetNames() []string {
	ents, _ := fs.ReadDir(scenarios.FS, ".")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
