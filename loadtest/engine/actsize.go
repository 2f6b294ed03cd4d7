package engine

import (
	"fmt"
	mrand "math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/loadtest/reqtmpl"
)

// build is one request of a: its template expanded with v (drawing from
// rnd only when the template has a $range or a $choice, so that a
// scenario without them plays the same players' choices as before they
// existed), as the action's request message and its encoding.
func (a *act) build(v reqtmpl.Vars, rnd *mrand.Rand) (proto.Message, []byte, error) {
	if a.fixed != nil {
		return a.fixedMsg, a.fixed, nil
	}
	m, err := a.tmpl.Build(a.action.Request, v, rnd)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: action %s: %w", a.do, err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: action %s: encode: %w", a.do, err)
	}
	return m, b, nil
}
