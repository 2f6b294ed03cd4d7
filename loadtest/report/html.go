package report

import (
	"bytes"
	"fmt"
	"html"
	"image/color"
	"io"
	"math"
	"regexp"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/leveehq/levee/loadtest/record"
)

// curve is one line of a chart.
type curve struct {
	name   string
	ys     []float64 // per point; NaN = no sample
	points []record.Point
}

// chart is one plot of the HTML report.
type chart struct {
	id, title, ylabel string
	curves            func(r *Run) []curve
}

func levelCurve(r *Run, name, level string, scale float64) curve {
	ys, _ := series(r.Points, level)
	for i := range ys {
		ys[i] *= scale
	}
	return curve{name: name, ys: ys}
}

func counterCurve(r *Run, name, counter string, cumulative bool) curve {
	ys := make([]float64, len(r.Points))
	var sum float64
	for i, p := range r.Points {
		v := float64(p.Counters[counter])
		if cumulative {
			sum += v
			v = sum
		}
		ys[i] = v
	}
	return curve{name: name, ys: ys}
}

func quantileCurve(r *Run, name, hist string, q float64) curve {
	ys := make([]float64, len(r.Points))
	for i, p := range r.Points {
		ys[i] = math.NaN()
		if h := p.Hists[hist]; h.Count() > 0 {
			ys[i] = h.Quantile(q).Seconds() * 1000
		}
	}
	return curve{name: name, ys: ys}
}

// charts are the report's plots, in order.
var charts = []chart{
	{"players", "Players", "players", func(r *Run) []curve {
		return []curve{
			counterCurve(r, "arrived", "arrived", true), levelCurve(r, "connected", "connected", 1),
			levelCurve(r, "waiting", "waiting", 1), counterCurve(r, "admitted", "admitted", true),
		}
	}},
	{"requests", "Requests per second by outcome", "requests/s", func(r *Run) []curve {
		cs := make([]curve, len(classOrder))
		for i, c := range classOrder {
			cs[i] = counterCurve(r, c, c, false)
		}
		return cs
	}},
	{"latency", "Latency", "ms", func(r *Run) []curve {
		return []curve{
			quantileCurve(r, "p50 from send", record.HistLat, 0.5), quantileCurve(r, "p99 from send", record.HistLat, 0.99),
			quantileCurve(r, "p50 from due", record.HistLatDue, 0.5), quantileCurve(r, "p99 from due", record.HistLatDue, 0.99),
		}
	}},
	{"cpu", "CPU per tier", "cores", func(r *Run) []curve {
		return []curve{levelCurve(r, "gate", "cpu_gate", 1), levelCurve(r, "logic", "cpu_logic", 1), levelCurve(r, "battle", "cpu_battle", 1),
			levelCurve(r, "load tool", "cpu_loadtest", 1)}
	}},
	{"queue", "Logic queue depth", "requests", func(r *Run) []curve {
		return []curve{levelCurve(r, "logic queue depth", "logic_queue_depth", 1)}
	}},
	{"battle", "Battle p99", "ms", func(r *Run) []curve {
		return []curve{levelCurve(r, "battle p99", "battle_p99", 1000)}
	}},
}

// minutes is the x of wall second t: scenario minutes, relative to T+0
// when the run has one.
func (r *Run) xMinutes(t float64) float64 {
	return (t - r.Meta.T0) * r.speed() / 60
}

const plotW, plotH = 8 * vg.Inch, 3.2 * vg.Inch

// The events' colours: line actions grey, faults red, a fault's duration
// a faint red band.
var (
	eventGrey = color.Gray{Y: 110}
	faultRed  = color.NRGBA{R: 200, G: 30, B: 30, A: 255}
	faultBand = color.NRGBA{R: 200, G: 30, B: 30, A: 40}
)

// renderChart draws one chart over every run and returns its SVG element.
func renderChart(c chart, runs []*Run) ([]byte, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.Y.Label.Text = c.ylabel
	p.X.Label.Text = "scenario minutes"
	if len(runs) > 0 && runs[0].Meta.T0 > 0 {
		p.X.Label.Text = "scenario minutes from T+0"
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	ymin, ymax, xmin, xmax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	any := false
	for i, r := range runs {
		for j, cv := range c.curves(r) {
			var xys plotter.XYs
			for k, y := range cv.ys {
				if math.IsNaN(y) || math.IsInf(y, 0) {
					continue
				}
				x := r.xMinutes(float64(r.Points[k].T))
				xys = append(xys, plotter.XY{X: x, Y: y})
				ymin, ymax = min(ymin, y), max(ymax, y)
				xmin, xmax = min(xmin, x), max(xmax, x)
			}
			if len(xys) == 0 {
				continue
			}
			any = true
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("report: plot %s: %w", c.id, err)
			}
			l.LineStyle.Color = plotutil.Color(j)
			l.LineStyle.Width = vg.Points(1.2)
			l.LineStyle.Dashes = plotutil.Dashes(i)
			p.Add(l)
			name := cv.name
			if len(runs) > 1 {
				name = r.label(i) + ": " + name
			}
			p.Legend.Add(name, l)
		}
	}
	if !any {
		ymin, ymax = 0, 1
		xmin, xmax = 0, 1
		if len(runs) > 0 && len(runs[0].Points) > 0 {
			r := runs[0]
			xmin, xmax = r.xMinutes(float64(r.Points[0].T)), r.xMinutes(float64(r.Points[len(r.Points)-1].T))
		}
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: (xmin + xmax) / 2, Y: 0.5}}, Labels: []string{"no data"}})
		if err == nil {
			p.Add(lbl)
		}
	}
	ymin = min(ymin, 0)
	if ymax <= ymin {
		ymax = ymin + 1
	}
	ymax *= 1.08
	p.Y.Min, p.Y.Max = ymin, ymax

	// Events: a dashed vertical line each, labelled at the top; faults in
	// their own colour, and a fault that lasted (its end event) as a
	// shaded band from its start to its end.
	for i, r := range runs {
		var at plotter.XYs
		var names []string
		var colours []color.Color
		for _, e := range r.Events {
			x := r.xMinutes(e.T)
			if e.Kind == EventFault && e.End > e.T {
				x1 := r.xMinutes(e.End)
				band, err := plotter.NewPolygon(plotter.XYs{{X: x, Y: ymin}, {X: x1, Y: ymin}, {X: x1, Y: ymax}, {X: x, Y: ymax}})
				if err != nil {
					return nil, fmt.Errorf("report: plot %s: event %q: %w", c.id, e.What, err)
				}
				band.Color = faultBand
				band.LineStyle.Width = 0
				p.Add(band)
				continue
			}
			var col color.Color = eventGrey
			if e.Kind == EventFault {
				col = faultRed
			}
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: ymin}, {X: x, Y: ymax}})
			if err != nil {
				return nil, fmt.Errorf("report: plot %s: event %q: %w", c.id, e.What, err)
			}
			l.LineStyle.Color = col
			l.LineStyle.Width = vg.Points(0.8)
			l.LineStyle.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(l)
			what := e.What
			if len(runs) > 1 {
				what = r.label(i) + ": " + what
			}
			at = append(at, plotter.XY{X: x, Y: ymax * (0.97 - 0.06*float64(len(at)%4))})
			names = append(names, what)
			colours = append(colours, col)
		}
		if len(at) > 0 {
			lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: names})
			if err != nil {
				return nil, fmt.Errorf("report: plot %s: %w", c.id, err)
			}
			for k := range lbl.TextStyle {
				lbl.TextStyle[k].Font.Size = vg.Points(7)
				lbl.TextStyle[k].Color = colours[k]
			}
			lbl.Offset = vg.Point{X: vg.Points(2)}
			p.Add(lbl)
		}
	}

	cv := vgsvg.New(plotW, plotH)
	p.Draw(draw.New(cv))
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("report: plot %s: %w", c.id, err)
	}
	return inlineSVG(buf.Bytes(), c.id), nil
}

var (
	svgPrologue = regexp.MustCompile(`(?s)^.*?<svg`)
	svgXMLNS    = regexp.MustCompile(`\s+xmlns(:xlink)?="[^"]*"`)
)

// inlineSVG makes a standalone SVG document an element for an HTML page:
// no XML prologue, no namespace attributes (HTML puts inline <svg> in the
// SVG namespace itself), an id and a class.
func inlineSVG(b []byte, id string) []byte {
	b = svgPrologue.ReplaceAll(b, []byte(`<svg id="plot-`+id+`" class="plot" role="img"`))
	return svgXMLNS.ReplaceAll(b, nil)
}

const htmlStyle = `body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:64em}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
pre{background:#f6f6f6;padding:.8em;overflow-x:auto;font-size:.85em}
svg.plot{display:block;max-width:100%;height:auto;margin:.5em 0 1.5em}
.pass{color:#176d2b}.fail{color:#b00020}`

// WriteHTML writes a self-contained HTML report of one run, or of several
// to compare: nothing is fetched from elsewhere (no scripts, fonts or
// style sheets; the plots are inline SVG drawn by gonum/plot). Each plot
// shows every run's curves, labelled by Meta.Label, with the runs' events
// as labelled vertical lines; x is scenario minutes.
func WriteHTML(w io.Writer, runs ...*Run) error {
	if len(runs) == 0 {
		return fmt.Errorf("report: HTML report needs at least one run")
	}
	var b bytes.Buffer
	title := "Load test: " + runs[0].label(0)
	for i, r := range runs[1:] {
		title += " vs " + r.label(i+1)
	}
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n<h1>%s</h1>\n",
		html.EscapeString(title), htmlStyle, html.EscapeString(title))
	for i, r := range runs {
		m := r.Meta
		fmt.Fprintf(&b, "<p><b>%s</b>: scenario %s, scale %g, speed %g, %.0f s wall",
			html.EscapeString(r.label(i)), html.EscapeString(m.Scenario), m.Scale, r.speed(), r.Summary.Elapsed)
		if s := m.sizing(); s != "" {
			fmt.Fprintf(&b, "; %s", html.EscapeString(s))
		}
		if !m.Started.IsZero() {
			fmt.Fprintf(&b, ", started %s", html.EscapeString(m.Started.UTC().Format("2006-01-02 15:04:05Z")))
		}
		b.WriteString(". ")
		for _, c := range r.Criteria {
			class, mark := "pass", "✓"
			if !c.Passed {
				class, mark = "fail", "✗"
			}
			fmt.Fprintf(&b, "<span class=\"%s\">%s %s</span> ", class, mark, html.EscapeString(c.Threshold))
		}
		b.WriteString("</p>\n")
	}
	b.WriteString("<h2>Plots</h2>\n")
	for _, c := range charts {
		svg, err := renderChart(c, runs)
		if err != nil {
			return err
		}
		b.Write(svg)
		b.WriteString("\n")
	}
	b.WriteString("<h2>Tables</h2>\n<pre>")
	var t bytes.Buffer
	var err error
	if len(runs) == 1 {
		err = WriteTable(&t, runs[0])
	} else {
		err = WriteCompare(&t, runs...)
	}
	if err != nil {
		return err
	}
	b.WriteString(html.EscapeString(t.String()))
	b.WriteString("</pre>\n</body>\n</html>\n")
	_, err = w.Write(b.Bytes())
	return err
}
