package docs

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// goToolFlags are flags of tools other than Levee's binaries that the
// manual may name on their own in a code span.
var goToolFlags = map[string]bool{"h": true, "help": true, "race": true, "short": true, "run": true, "bench": true,
	"benchmem": true, "fuzz": true, "list": true, "count": true}

// TestManualCommandsExist is the check `make test` runs on the real
// README.md and docs/*.md.
func TestManualCommandsExist(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 5 {
		t.Fatalf("docs/ has %d pages, want at least 5", len(pages))
	}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
	}
	c, err := newChecker(root)
	if err != nil {
		t.Fatal(err)
	}
	refs := 0
	kinds := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		rs := extract(f, string(b))
		refs += len(rs)
		for _, r := range rs {
			kinds[r.kind]++
			err := c.check(r)
			if errors.Is(err, errNotInTree) {
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", r.where(), err)
			}
		}
	}
	// The extractor must have found something of each kind, or it has
	// quietly stopped reading the manual.
	for _, k := range []string{"make", "path", "sub", "flag", "link"} {
		if kinds[k] == 0 {
			t.Errorf("found no %s reference in the manual: the extractor is broken", k)
		}
	}
	t.Logf("%d references checked: %v", refs, kinds)
}

// TestCheckerCatchesBadCommands shows the check can fail: a small repo
// with a Makefile, a script, a flag and a subcommand, and a page naming
// each rightly and wrongly.
func TestCheckerCatchesBadCommands(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Makefile", ".PHONY: demo test\ndemo test: build\n\t./scripts/demo.sh\nbuild:\n\tgo build\nX := 1\n")
	write("examples/g/Makefile", "play:\n\t./run.sh\n")
	write("scripts/demo.sh", "#!/bin/sh\n")
	write("cmd/loadtest/main.go", `package main

import "flag"

func main() {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var n int
	fs.IntVar(&n, "per-worker", 1, "")
	_ = fs.String("gate-urls", "", "")
	switch "x" {
	case "run", "capacity":
	}
}
`)
	write("docs/a.md", "# Page A\n\n## The part\n\ntext\n")
	page := "# Page\n\n" +
		"```sh\n" +
		"make demo            # good\n" +
		"make demo-typo       # bad target\n" +
		"FUZZTIME=1m make fuzz test\n" +
		"make -C examples/g nope\n" +
		"bin/loadtest run launch -per-worker 3 \\\n  --gate-urls=ws://x -per-wroker 2\n" +
		"bin/loadtest runn launch\n" +
		"./craft loadtest run -per-worker 1 -per-workr 1\n" +
		"./scripts/demo.sh && scripts/nope.sh\n" +
		"cd examples/g && make play\n" +
		"make play\n" +
		"```\n\n" +
		"Prose with `loadtest capacity`, `loadtest figur`, `-gate-urls`, `-no-such-flag`, `-race`, " +
		"`levee/gate`, `bin/gate`, [a](docs/a.md#the-part), [b](docs/a.md#no-part), [c](docs/missing.md) and `cmd/loadtest/main.go`, `cmd/nothing.go`.\n\n" +
		"```\n  -per-worker int\n    \thelp\n  -gone-flag string\n    \thelp\n```\n"
	c, err := newChecker(root)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, r := range extract("page.md", page) {
		if err := c.check(r); err != nil && !errors.Is(err, errNotInTree) {
			bad = append(bad, r.kind+" "+r.name)
		}
	}
	sort.Strings(bad)
	want := []string{
		"flag gone-flag", "flag no-such-flag", "flag per-workr", "flag per-wroker",
		"link docs/a.md#no-part", "link docs/missing.md",
		"make demo-typo", "make fuzz", "make nope",
		"path cmd/nothing.go", "path scripts/nope.sh",
		"sub figur", "sub runn",
	}
	if strings.Join(bad, "\n") != strings.Join(want, "\n") {
		t.Errorf("failing references:\n%s\nwant:\n%s", strings.Join(bad, "\n"), strings.Join(want, "\n"))
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Rehearsing the surge: `make hold-line`":                      "rehearsing-the-surge-make-hold-line",
		"6. Testing the handlers: package gametest":                   "6-testing-the-handlers-package-gametest",
		"Overload protection: three levels and a client that listens": "overload-protection-three-levels-and-a-client-that-listens",
		"9. Running it: `make demo` of your game":                     "9-running-it-make-demo-of-your-game",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// ref is one thing the manual names.
type ref struct {
	file string
	line int
	kind string // make, path, sub (a loadtest subcommand), flag, link
	name string // the target, path, subcommand, flag (without dashes) or link
	dir  string // make: the directory whose Makefile it runs (repo-relative)
}

func (r ref) where() string { return fmt.Sprintf("%s:%d: %s %q", r.file, r.line, r.kind, r.name) }

var (
	fenceRE    = regexp.MustCompile("^\\s*```\\s*([A-Za-z0-9_-]*)")
	spanRE     = regexp.MustCompile("`([^`\n]+)`")
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	scriptRE   = regexp.MustCompile(`(?:^|[\s(\x60"'=])((?:\./)?scripts/[A-Za-z0-9_./-]*[A-Za-z0-9_])`)
	flagDefRE  = regexp.MustCompile(`^  -([a-z][a-z0-9-]*)( [a-z]+)?$`)
	loneFlagRE = regexp.MustCompile(`^--?([a-z][a-z0-9-]*)(=\S*)?( \S+)?$`)
	pathRE     = regexp.MustCompile(`^[a-z0-9_.-]+(/[A-Za-z0-9_.-]+)+/?$`)
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*$`)
	binaries   = map[string]bool{"gate": true, "logic": true, "battle": true, "loadtest": true}
	// gameBinary is the example game's binary, whose subcommands are the
	// tiers (docs/writing-a-game.md).
	gameBinary = "craft"
	// commandFences are the fences whose lines are shell commands; a fence
	// without a language may be -h output (its flag lines are checked).
	commandFences = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}
)

// extract finds every reference in a markdown page.
func extract(file, text string) []ref {
	var refs []ref
	add := func(line int, kind, name, dir string) {
		refs = append(refs, ref{file: file, line: line, kind: kind, name: name, dir: dir})
	}
	lines := strings.Split(text, "\n")
	inFence, lang, cwd := false, "", "."
	for i := 0; i < len(lines); i++ {
		n, l := i+1, lines[i]
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			if inFence {
				inFence = false
			} else {
				inFence, lang, cwd = true, m[1], "."
			}
			continue
		}
		for _, m := range scriptRE.FindAllStringSubmatch(l, -1) {
			p := strings.TrimPrefix(m[1], "./")
			if !inFence || cwd == "." {
				add(n, "path", p, "")
			}
		}
		if inFence {
			switch {
			case commandFences[lang]:
				for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
					i++
					l = strings.TrimSuffix(l, "\\") + " " + lines[i]
				}
				cwd = command(l, cwd, func(kind, name, dir string) { add(n, kind, name, dir) })
			case lang == "":
				if m := flagDefRE.FindStringSubmatch(l); m != nil {
					add(n, "flag", m[1], "")
				}
			}
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(spanRE.ReplaceAllString(l, ""), -1) {
			t := m[1]
			if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			if strings.HasPrefix(t, "#") {
				t = path.Base(file) + t
			}
			add(n, "link", path.Join(path.Dir(file), t), "")
		}
		for _, m := range spanRE.FindAllStringSubmatch(l, -1) {
			s := strings.TrimSpace(m[1])
			switch {
			case loneFlagRE.MatchString(s):
				if f := loneFlagRE.FindStringSubmatch(s)[1]; !goToolFlags[f] {
					add(n, "flag", f, "")
				}
			case pathRE.MatchString(s) && !strings.HasPrefix(s, "scripts/"):
				add(n, "path", goIdentRE.ReplaceAllString(s, ""), "")
			default:
				command(s, ".", func(kind, name, dir string) { add(n, kind, name, dir) })
			}
		}
	}
	return refs
}

// goIdentRE is a path's last element that names a Go identifier of a
// package (internal/gamedef.Def).
var goIdentRE = regexp.MustCompile(`\.[A-Z][A-Za-z0-9]*$`)

// errNotInTree says a reference is not one the check can judge: a code
// span that looks like a path but does not start with one of the tree's
// top-level directories (an image such as levee/gate, a module path, bin/
// which make build fills).
var errNotInTree = errors.New("not a path of the tree")

// command reads one shell line run in cwd and reports its make targets,
// loadtest subcommands and binary flags; it returns the directory a cd in
// it leaves the shell in.
func command(line, cwd string, add func(kind, name, dir string)) string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	for _, seg := range regexp.MustCompile(`&&|\|\||;|\|`).Split(line, -1) {
		toks := shellWords(seg)
		for len(toks) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(toks[0]) {
			toks = toks[1:]
		}
		if len(toks) > 1 && path.Base(toks[0]) == gameBinary && binaries[toks[1]] {
			toks = toks[1:] // a game's one binary: craft gate -h
		}
		if len(toks) == 0 {
			continue
		}
		switch bin := path.Base(toks[0]); {
		case toks[0] == "cd" && len(toks) > 1:
			cwd = path.Clean(path.Join(cwd, toks[1]))
		case toks[0] == "make":
			dir := cwd
			for j := 1; j < len(toks); j++ {
				t := toks[j]
				switch {
				case t == "-C" && j+1 < len(toks):
					dir = path.Clean(path.Join(cwd, toks[j+1]))
					j++
				case strings.HasPrefix(t, "-") || strings.Contains(t, "="):
				default:
					add("make", t, dir)
				}
			}
		case binaries[bin] && (strings.HasPrefix(toks[0], "bin/") || toks[0] == bin):
			args := toks[1:]
			if bin == "loadtest" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				add("sub", args[0], "")
			}
			for _, a := range args {
				if strings.HasPrefix(a, "-") && len(a) > 1 && a != "--" {
					f := strings.TrimLeft(a, "-")
					f, _, _ = strings.Cut(f, "=")
					if !goToolFlags[f] {
						add("flag", f, "")
					}
				}
			}
		}
	}
	return cwd
}

// shellWords splits a command into words, honouring quotes (no expansion).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// checker knows the repository's Makefiles, flags and subcommands.
type checker struct {
	root    string
	targets map[string]map[string]bool // dir -> targets
	flags   map[string]bool
	subs    map[string]bool
	anchors map[string]map[string]bool // md file -> heading slugs
}

func newChecker(root string) (*checker, error) {
	c := &checker{root: root, targets: map[string]map[string]bool{}, flags: map[string]bool{},
		subs: map[string]bool{}, anchors: map[string]map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		loadtestMain := strings.HasPrefix(rel, "cmd/loadtest/") || strings.HasPrefix(rel, "loadtest/loadtestcmd/")
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if name, ok := flagName(n); ok {
					c.flags[name] = true
				}
			case *ast.CaseClause:
				if loadtestMain {
					for _, e := range n.List {
						if s, ok := stringLit(e); ok {
							c.subs[s] = true
						}
					}
				}
			}
			return true
		})
		return nil
	})
	return c, err
}

// flagName is the name a flag-defining call (fs.String("name", ...),
// fs.DurationVar(&v, "name", ...), fs.Var(v, "name", ...)) defines.
func flagName(call *ast.CallExpr) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	idx := -1
	switch sel.Sel.Name {
	case "String", "Bool", "Int", "Int64", "Uint", "Uint64", "Float64", "Duration", "Func", "BoolFunc":
		idx = 0
	case "StringVar", "BoolVar", "IntVar", "Int64Var", "UintVar", "Uint64Var", "Float64Var", "DurationVar", "Var", "TextVar":
		idx = 1
	default:
		return "", false
	}
	if len(call.Args) <= idx+1 { // a flag call has a usage argument after the name
		return "", false
	}
	s, ok := stringLit(call.Args[idx])
	if !ok || !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(s) {
		return "", false
	}
	return s, true
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func (c *checker) check(r ref) error {
	switch r.kind {
	case "make":
		ts, err := c.makeTargets(r.dir)
		if err != nil {
			return err
		}
		if !ts[r.name] {
			return fmt.Errorf("no target %q in %s", r.name, path.Join(r.dir, "Makefile"))
		}
	case "path":
		first, _, _ := strings.Cut(r.name, "/")
		if st, err := os.Stat(filepath.Join(c.root, first)); first == "bin" || err != nil || !st.IsDir() {
			if !strings.HasPrefix(r.name, "scripts/") {
				return errNotInTree
			}
		}
		if _, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(r.name))); err != nil {
			return fmt.Errorf("no such file or directory")
		}
	case "sub":
		if !c.subs[r.name] {
			return fmt.Errorf("loadtest has no subcommand %q", r.name)
		}
	case "flag":
		if !c.flags[r.name] {
			return fmt.Errorf("no Levee binary defines -%s", r.name)
		}
	case "link":
		file, anchor, _ := strings.Cut(r.name, "#")
		if _, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(file))); err != nil {
			return fmt.Errorf("the link's target does not exist")
		}
		if anchor != "" && strings.HasSuffix(file, ".md") {
			as, err := c.headings(file)
			if err != nil {
				return err
			}
			if !as[anchor] {
				return fmt.Errorf("%s has no heading #%s", file, anchor)
			}
		}
	default:
		return fmt.Errorf("unknown reference kind %q", r.kind)
	}
	return nil
}

var targetRE = regexp.MustCompile(`^([A-Za-z0-9_.%/ -]+?)\s*::?(?:[^=]|$)`)

func (c *checker) makeTargets(dir string) (map[string]bool, error) {
	if ts, ok := c.targets[dir]; ok {
		return ts, nil
	}
	b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(dir), "Makefile"))
	if err != nil {
		return nil, fmt.Errorf("no Makefile in %s", dir)
	}
	ts := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := targetRE.FindStringSubmatch(l); m != nil {
			for _, t := range strings.Fields(m[1]) {
				ts[t] = true
			}
		}
	}
	c.targets[dir] = ts
	return ts, nil
}

func (c *checker) headings(file string) (map[string]bool, error) {
	if as, ok := c.anchors[file]; ok {
		return as, nil
	}
	b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	as := map[string]bool{}
	fence := false
	for _, l := range strings.Split(string(b), "\n") {
		if fenceRE.MatchString(l) {
			fence = !fence
			continue
		}
		if m := headingRE.FindStringSubmatch(l); m != nil && !fence {
			as[slug(m[1])] = true
		}
	}
	c.anchors[file] = as
	return as, nil
}

// slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces as hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
