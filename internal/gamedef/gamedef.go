// Package gamedef is a game's declaration in the form Levee's tiers run it:
// type-erased actions and jobs, looked up by name. Package game builds it
// with typed, generic functions; the gate, logic, battle, the SDK, the load
// tool and the test kit read it. Games never import this package.
package gamedef

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/leveehq/levee/internal/priority"
)

// Class is how important an action is to the player. The zero value is no
// class: a declaration without one is refused.
type Class uint8

const (
	classNone Class = iota
	// Sheddable work (chat, emotes, cosmetics) is shed first.
	Sheddable
	// Default work is shed when a tier is full, after sheddable work.
	Default
	// Critical work (purchases, trades) is shed last.
	Critical
)

// Valid says whether c is one of Sheddable, Default and Critical.
func (c Class) Valid() bool { return c >= Sheddable && c <= Critical }

// Priority is c as the cluster's criticality (Default for an invalid c).
func (c Class) Priority() priority.Class {
	switch c {
	case Sheddable:
		return priority.Sheddable
	case Critical:
		return priority.Critical
	}
	return priority.Default
}

func (c Class) String() string {
	if !c.Valid() {
		return fmt.Sprintf("Class(%d)", uint8(c))
	}
	return c.Priority().String()
}

// Ctx is what a handler knows of the request it serves. Handlers read the
// time from Now, the shard's clock, never from time.Now, so that a test
// with a fake clock decides it.
type Ctx struct {
	playerID  string
	requestID uint64
	now       time.Time
	version   uint64
	action    string
}

// NewCtx is the context of one handler call (for the tiers and the test kit).
func NewCtx(action, playerID string, requestID uint64, version uint64, now time.Time) *Ctx {
	return &Ctx{action: action, playerID: playerID, requestID: requestID, version: version, now: now}
}

// PlayerID is the authenticated player who sent the request.
func (c *Ctx) PlayerID() string { return c.playerID }

// RequestID is the request's id: the same on every resend of it.
func (c *Ctx) RequestID() uint64 { return c.requestID }

// Now is the shard's clock when the request is applied.
func (c *Ctx) Now() time.Time { return c.now }

// Version is the version of the state the handler was given: 1 for a new
// player, bumped by Levee on every committed mutation.
func (c *Ctx) Version() uint64 { return c.version }

// Action is the name of the action being served.
func (c *Ctx) Action() string { return c.action }

// Action is one declared action.
type Action struct {
	Name    string
	Class   Class
	Mutates bool
	// Request and Reply are the action's message types.
	Request, Reply protoreflect.MessageType
	// MaxRequestBytes caps the encoded request (0: the gate's default).
	MaxRequestBytes int

	// Handle serves a plain action (Job == ""): it gets a copy of the
	// player's state, which it may change in place, and returns the reply
	// and, for a mutation, the new state (nil: unchanged).
	Handle func(c *Ctx, state, req proto.Message) (reply, next proto.Message, err error)

	// Target, when set (read-only actions only), names the player whose
	// state the action reads; "" is the sender.
	Target func(req proto.Message) string

	// A job action runs job Job with Start's request, keyed by Key, and
	// applies its result with Apply exactly once per key.
	Job      string
	JobReq   protoreflect.MessageType // what Start returns
	JobReply protoreflect.MessageType // what Apply takes
	Key      func(req proto.Message) string
	Start    func(c *Ctx, state, req proto.Message) (jobReq proto.Message, err error)
	Apply    func(c *Ctx, state, req, jobReply proto.Message) (reply, next proto.Message, err error)
}

// Route is the player whose shard serves a's request req from sender:
// the player Target names, for an action declared to read another
// player's state, else the sender. The gate routes by it and logic serves
// by it; Target is the game's code, so a caller guards it against a panic.
func (a *Action) Route(sender string, req proto.Message) string {
	if a.Target == nil {
		return sender
	}
	if t := a.Target(req); t != "" {
		return t
	}
	return sender
}

// Job is one declared compute job.
type Job struct {
	Name           string
	Request, Reply protoreflect.MessageType
	Run            func(ctx context.Context, req proto.Message) (proto.Message, error)
}

// Def is a whole declaration.
type Def struct {
	Name    string
	State   protoreflect.MessageType
	Initial func(playerID string) proto.Message

	actions []*Action
	jobs    []*Job
	byName  map[string]*Action
	jobBy   map[string]*Job
	errs    []error
}

// New starts a declaration.
func New(name string, state protoreflect.MessageType, initial func(string) proto.Message) *Def {
	return &Def{Name: name, State: state, Initial: initial, byName: map[string]*Action{}, jobBy: map[string]*Job{}}
}

// Fail records a declaration error, reported by Validate.
func (d *Def) Fail(err error) { d.errs = append(d.errs, err) }

// AddAction declares a. A second action of the same name is an error
// (reported by Validate); the first stays.
func (d *Def) AddAction(a *Action) {
	if _, dup := d.byName[a.Name]; dup {
		d.Fail(fmt.Errorf("action %q is declared twice", a.Name))
		return
	}
	d.actions = append(d.actions, a)
	d.byName[a.Name] = a
}

// AddJob declares j.
func (d *Def) AddJob(j *Job) {
	if _, dup := d.jobBy[j.Name]; dup {
		d.Fail(fmt.Errorf("job %q is declared twice", j.Name))
		return
	}
	d.jobs = append(d.jobs, j)
	d.jobBy[j.Name] = j
}

// Action is the action called name.
func (d *Def) Action(name string) (*Action, bool) { a, ok := d.byName[name]; return a, ok }

// Job is the job called name.
func (d *Def) Job(name string) (*Job, bool) { j, ok := d.jobBy[name]; return j, ok }

// Actions are the declared actions in declaration order.
func (d *Def) Actions() []*Action { return d.actions }

// Jobs are the declared jobs in declaration order.
func (d *Def) Jobs() []*Job { return d.jobs }

// LoginAction is the name of Levee's own login, which no game may take.
const LoginAction = "login"

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Validate reports every reason the declaration cannot work, each naming
// its action or job; nil when it can.
func (d *Def) Validate() error {
	errs := append([]error(nil), d.errs...)
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !nameRE.MatchString(d.Name) {
		bad("game %q: a name is 1-63 characters of [a-z0-9_], starting with a letter", d.Name)
	}
	if d.State == nil || d.Initial == nil {
		bad("game %q: no player state (game.New needs the initial state's constructor)", d.Name)
	}
	if len(d.actions) == 0 {
		bad("game %q declares no action", d.Name)
	}
	for _, j := range d.jobs {
		if !nameRE.MatchString(j.Name) {
			bad("job %q: a name is 1-63 characters of [a-z0-9_], starting with a letter", j.Name)
		}
		if j.Run == nil {
			bad("job %q has no Run", j.Name)
		}
	}
	for _, a := range d.actions {
		switch {
		case !nameRE.MatchString(a.Name):
			bad("action %q: a name is 1-63 characters of [a-z0-9_], starting with a letter", a.Name)
		case a.Name == LoginAction:
			bad("action %q: the name is Levee's own login", a.Name)
		}
		if !a.Class.Valid() {
			bad("action %q has no class: give it game.Critical, game.Default or game.Sheddable", a.Name)
		}
		if a.MaxRequestBytes < 0 {
			bad("action %q: MaxRequestBytes %d is negative", a.Name, a.MaxRequestBytes)
		}
		if a.Target != nil && a.Mutates {
			bad("action %q: only a read-only action may read another player's state", a.Name)
		}
		if a.Job == "" {
			if a.Handle == nil {
				bad("action %q has no handler", a.Name)
			}
			continue
		}
		j, ok := d.jobBy[a.Job]
		if !ok {
			bad("action %q: continuation for unknown job %q", a.Name, a.Job)
			continue
		}
		if a.Key == nil {
			bad("action %q is a mutation without a request id for its job %q: give it a key function", a.Name, a.Job)
		}
		if a.Start == nil || a.Apply == nil {
			bad("action %q: a job action needs both its start and its continuation", a.Name)
		}
		if a.JobReq != nil && j.Request != nil && a.JobReq.Descriptor().FullName() != j.Request.Descriptor().FullName() {
			bad("action %q starts job %q with %s, but the job takes %s", a.Name, a.Job,
				a.JobReq.Descriptor().FullName(), j.Request.Descriptor().FullName())
		}
		if a.JobReply != nil && j.Reply != nil && a.JobReply.Descriptor().FullName() != j.Reply.Descriptor().FullName() {
			bad("action %q: its continuation takes %s, but job %q replies %s", a.Name,
				a.JobReply.Descriptor().FullName(), a.Job, j.Reply.Descriptor().FullName())
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("game %q cannot run: %w", d.Name, errors.Join(errs...))
}
