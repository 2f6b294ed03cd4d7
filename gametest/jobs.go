package gametest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/gamedef"
)

// jobs runs the game's jobs in-process, as the battle tier would: decode
// the request as the job's Request, Run it, encode the reply. It is the
// logic tier's Config.Jobs.
type jobs struct {
	def *gamedef.Def

	mu    sync.Mutex
	count map[string]int
	holds map[string]*Hold
}

func newJobs(def *gamedef.Def) *jobs {
	return &jobs{def: def, count: map[string]int{}, holds: map[string]*Hold{}}
}

func (j *jobs) runs(job string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.count[job]
}

// Run runs one job (logic.Config.Jobs).
func (j *jobs) Run(ctx context.Context, job, key string, request []byte) (_ []byte, err error) {
	jd, ok := j.def.Job(job)
	if !ok {
		return nil, fmt.Errorf("%w: no job %q", apperr.ErrUnknownMessage, job)
	}
	req := jd.Request.New().Interface()
	if err := proto.Unmarshal(request, req); err != nil {
		return nil, fmt.Errorf("%w: job %q: %v", apperr.ErrBadRequest, job, err)
	}
	j.mu.Lock()
	j.count[job]++
	h := j.holds[job]
	j.mu.Unlock()
	if h != nil {
		if err := h.hold(ctx, key); err != nil {
			return nil, err
		}
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: job %q panicked: %v", apperr.ErrInternal, job, v)
		}
	}()
	rep, err := jd.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(rep)
}

func (j *jobs) releaseAll() {
	j.mu.Lock()
	hs := make([]*Hold, 0, len(j.holds))
	for _, h := range j.holds {
		hs = append(hs, h)
	}
	j.mu.Unlock()
	for _, h := range hs {
		h.Release()
	}
}

// Hold keeps every run of a job waiting, from Hold until Release or Fail:
// a test starts job actions, checks what happens while the result is out
// (a resend, another request of the player), then lets the job finish.
type Hold struct {
	s   *Shard
	job string

	mu      sync.Mutex
	held    []string // the keys of the runs waiting
	changed chan struct{}
	done    chan struct{}
	err     error
}

// Hold starts holding job's runs. One hold per job at a time.
func (s *Shard) Hold(job string) *Hold {
	s.t.Helper()
	if _, ok := s.g.Def().Job(job); !ok {
		s.t.Fatalf("gametest: Hold: the game declares no job %q", job)
	}
	h := &Hold{s: s, job: job, changed: make(chan struct{}), done: make(chan struct{})}
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	if s.jobs.holds[job] != nil {
		s.t.Fatalf("gametest: job %q is already held", job)
	}
	s.jobs.holds[job] = h
	return h
}

func (h *Hold) hold(ctx context.Context, key string) error {
	h.mu.Lock()
	h.held = append(h.held, key)
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	select {
	case <-h.done:
		return h.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Held are the keys of the runs held so far, in the order they came.
func (h *Hold) Held() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.held...)
}

// Wait waits until n runs have been held; the test fails after ten
// seconds.
func (h *Hold) Wait(n int) {
	h.s.t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		got, ch := len(h.held), h.changed
		h.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			h.s.t.Fatalf("gametest: job %q: %d runs held, want %d", h.job, got, n)
		}
	}
}

// Release lets the held runs, and every later one, go on; the hold ends.
func (h *Hold) Release() { h.end(nil) }

// Fail ends the held runs with err instead of running them (as a job tier
// that failed); later runs go on normally.
func (h *Hold) Fail(err error) { h.end(err) }

func (h *Hold) end(err error) {
	h.s.jobs.mu.Lock()
	if h.s.jobs.holds[h.job] == h {
		delete(h.s.jobs.holds, h.job)
	}
	h.s.jobs.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.done:
	default:
		h.err = err
		close(h.done)
	}
}
