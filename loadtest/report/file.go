package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/threshold"
)

// The run file's line types.
const (
	typeMeta  = "meta"
	typeEvent = "event"
	typePoint = "point"
	typeEnd   = "end"
)

// Interrupted is the warning Read adds to a run file without an "end" line.
const Interrupted = "interrupted: the run file has no end line; summary and criteria recomputed from its points"

type metaLine struct {
	Type string `json:"type"`
	Meta
}

type eventLine struct {
	Type string `json:"type"`
	Event
}

type pointLine struct {
	Type string `json:"type"`
	record.Point
}

type endLine struct {
	Type     string      `json:"type"`
	Summary  Summary     `json:"summary"`
	Criteria []Criterion `json:"criteria"`
	Warnings []string    `json:"warnings,omitempty"`
	Workers  []Worker    `json:"workers,omitempty"`
	Fairness *Fairness   `json:"fairness,omitempty"`
}

// ErrEnded is returned by a Writer's methods after End.
var ErrEnded = errors.New("report: run file already ended")

// Writer streams a run file: a meta line, event and point lines as the run
// goes, an end line. It keeps nothing but the stream; safe for concurrent
// use. Every line is one Write to the underlying writer.
type Writer struct {
	mu    sync.Mutex
	w     io.Writer
	buf   bytes.Buffer
	ended bool
}

// NewWriter writes the meta line; Schema and Tool are filled in when zero.
func NewWriter(w io.Writer, m Meta) (*Writer, error) {
	if m.Schema == 0 {
		m.Schema = Schema
	}
	if m.Tool == "" {
		m.Tool = Tool
	}
	wr := &Writer{w: w}
	if err := wr.line(metaLine{typeMeta, m}); err != nil {
		return nil, err
	}
	return wr, nil
}

func (w *Writer) line(v any) error {
	w.buf.Reset()
	if err := json.NewEncoder(&w.buf).Encode(v); err != nil {
		return fmt.Errorf("report: encoding run file line: %w", err)
	}
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		return fmt.Errorf("report: writing run file: %w", err)
	}
	return nil
}

func (w *Writer) write(v any, end bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return ErrEnded
	}
	if end {
		w.ended = true
	}
	return w.line(v)
}

// Event writes an event line.
func (w *Writer) Event(e Event) error { return w.write(eventLine{typeEvent, e}, false) }

// Point writes a point line.
func (w *Writer) Point(p record.Point) error { return w.write(pointLine{typePoint, p}, false) }

// End writes the end line; the Writer takes nothing after it.
func (w *Writer) End(s Summary, cs []Criterion, warnings []string) error {
	return w.write(endLine{Type: typeEnd, Summary: s, Criteria: cs, Warnings: warnings}, true)
}

// EndRun writes the end line of r: its summary, criteria, warnings, load
// processes and fairness figures.
func (w *Writer) EndRun(r *Run) error {
	return w.write(endLine{Type: typeEnd, Summary: r.Summary, Criteria: r.Criteria, Warnings: r.Warnings,
		Workers: r.Workers, Fairness: r.Fairness}, true)
}

// ReadFile reads the run file at path; errors name it ("run.ndjson:17: ...").
func ReadFile(path string) (*Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	return Read(f)
}

// Read reads a run file. Errors name the line, prefixed by the file's name
// when r has one (an *os.File): "run.ndjson:17: ...". A file without an end
// line (the run was cut short) is read with the warning Interrupted; its
// summary is recomputed and Meta.Thresholds evaluated. A file of a newer
// schema, a line of an unknown type, or a first line that is not "meta" is
// an error.
func Read(r io.Reader) (*Run, error) {
	name := "line "
	if n, ok := r.(interface{ Name() string }); ok {
		name = n.Name() + ":"
	}
	br := bufio.NewReaderSize(r, 64<<10)
	run := &Run{}
	var haveMeta, haveEnd bool
	for lineNo := 1; ; lineNo++ {
		b, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s%d: reading: %w", name, lineNo, err)
		}
		eof := err != nil
		b = bytes.TrimSpace(b)
		if len(b) > 0 {
			if perr := run.parseLine(b, &haveMeta, &haveEnd); perr != nil {
				if eof && haveMeta && !haveEnd {
					// A last line cut off mid-write by a crash.
					run.Warnings = append(run.Warnings, fmt.Sprintf("%s%d: dropped a truncated last line: %v", name, lineNo, perr))
					break
				}
				return nil, fmt.Errorf("%s%d: %w", name, lineNo, perr)
			}
		}
		if eof {
			break
		}
	}
	if !haveMeta {
		return nil, fmt.Errorf("%s1: missing meta line: not a run file (empty)", name)
	}
	if !haveEnd {
		run.Warnings = append(run.Warnings, Interrupted)
		run.Summary = Summarize(run.Points)
		var ts []threshold.Threshold
		for _, s := range run.Meta.Thresholds {
			t, err := threshold.Parse(s)
			if err != nil {
				run.Warnings = append(run.Warnings, fmt.Sprintf("threshold %q: %v", s, err))
				continue
			}
			ts = append(ts, t)
		}
		run.Criteria, _ = Evaluate(run, ts)
	}
	return run, nil
}

func (run *Run) parseLine(b []byte, haveMeta, haveEnd *bool) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return fmt.Errorf("bad JSON: %w", err)
	}
	if !*haveMeta && head.Type != typeMeta {
		return fmt.Errorf("missing meta line: the run file must start with one, got type %q", head.Type)
	}
	if *haveEnd {
		return fmt.Errorf("a %q line after the end line", head.Type)
	}
	switch head.Type {
	case typeMeta:
		if *haveMeta {
			return errors.New("a second meta line")
		}
		var m metaLine
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("bad meta line: %w", err)
		}
		if m.Schema > Schema {
			return fmt.Errorf("run file schema %d was written by a newer loadtest (this one reads schema %d)", m.Schema, Schema)
		}
		if m.Schema < 1 {
			return fmt.Errorf("bad meta line: schema %d (want 1..%d)", m.Schema, Schema)
		}
		run.Meta = m.Meta
		*haveMeta = true
	case typeEvent:
		var e eventLine
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("bad event line: %w", err)
		}
		run.Events = append(run.Events, e.Event)
	case typePoint:
		var p pointLine
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("bad point line: %w", err)
		}
		if n := len(run.Points); n > 0 && p.T <= run.Points[n-1].T {
			return fmt.Errorf("point for second %d after second %d: points must be in order", p.T, run.Points[n-1].T)
		}
		if p.T < 0 {
			return fmt.Errorf("point for second %d: seconds start at 0", p.T)
		}
		run.Points = append(run.Points, p.Point)
	case typeEnd:
		var e endLine
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("bad end line: %w", err)
		}
		run.Summary, run.Criteria = e.Summary, e.Criteria
		run.Workers, run.Fairness = e.Workers, e.Fairness
		run.Warnings = append(run.Warnings, e.Warnings...)
		*haveEnd = true
	default:
		return fmt.Errorf("unknown line type %q (want meta, event, point or end)", head.Type)
	}
	return nil
}
