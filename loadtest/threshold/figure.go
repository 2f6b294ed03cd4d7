package threshold

import (
	"errors"
	"fmt"
	"strings"
)

// Figure is one figure of a run as a threshold's side names it: p(N), a
// scalar, or AGG(series), each with an optional window ("median(
// mix_served)[10s:25s]"). `loadtest figure` prints one, so that scripts
// read a run file's figures in the thresholds' language.
type Figure struct{ r ref }

// ErrNoFigure is wrapped by Value when the run does not have the figure.
var ErrNoFigure = errors.New("threshold: no figure")

// ParseFigure reads a figure; its errors wrap ErrSyntax and name what is
// wrong as Parse's do.
func ParseFigure(s string) (Figure, error) {
	p := &parser{src: s}
	p.skip()
	r, err := p.ref()
	if err == nil {
		p.skip()
		if p.pos != len(p.src) {
			err = fmt.Errorf("unexpected %q after %s", p.rest(), r)
		}
	}
	if err != nil {
		return Figure{}, fmt.Errorf("%w: %q: %v", ErrSyntax, strings.TrimSpace(s), err)
	}
	return Figure{r: r}, nil
}

// String is the figure as Parse's canonical form writes it.
func (f Figure) String() string { return f.r.String() }

// InSeconds reports whether the figure is a time in seconds.
func (f Figure) InSeconds() bool { return operand{ref: f.r}.inSeconds() }

// Value reads the figure from facts; an error wrapping ErrNoFigure when
// it is missing (not finite, or its window cannot be read).
func (f Figure) Value(facts Facts) (float64, error) {
	v, ok, why := f.r.value(facts)
	if !ok {
		return 0, fmt.Errorf("%w for %s", ErrNoFigure, strings.TrimPrefix(missing(f.r, why), "no figure for "))
	}
	return v, nil
}
