package gate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// maxLogicCooling caps the cooling one refusal starts, whatever pushback
// logic asks for.
const maxLogicCooling = 2 * time.Second

// Request kinds of the cooling table. An action that runs a job can be
// refused by logic for reasons of the job tier (every instance of the tier
// cooling, too many jobs in flight) that say nothing about the shard's
// other work, so a refused job action cools job actions only; any other
// refusal cools both kinds.
const (
	kindOther = iota
	kindJob
	numKinds
)

// errLogicCooling answers a request the gate refuses itself because logic
// refused one like it a moment ago.
var errLogicCooling = fmt.Errorf("%w: the server is busy; please try again shortly", apperr.ErrBusy)

// coolingTable honours logic's pushback per shard (-logic-pushback), the
// way logic honours battle's (logic/battleclient.go): after logic refuses a
// request of class c for shard s under load (BUSY, SERVER_FULL or
// RATE_LIMITED: apperr.Overload) with a retry delay P in the status details,
// requests of class c or lower for shard s are refused by the gate itself
// until P has passed, without a gRPC call. Critical requests always go to
// logic, which decides.
//
// One fixed slot per shard, all atomics: the check is a load or two and
// never allocates.
type coolingTable struct {
	shards []coolShard
}

// coolShard is one shard's state: 64 bytes.
type coolShard struct {
	// until[kind][Class.Index] (Unix ns on the gate's clock) is when the
	// cooling of that kind and class ends; it is cooling while now < until.
	// A refusal of class c raises the slots of c and every lower class, so
	// the check reads one slot. The critical slots are kept but never
	// consulted.
	until [numKinds][priority.NumClasses]atomic.Int64
	// The backpressure hints last seen from logic for the shard.
	depth atomic.Uint32
	ratio atomic.Uint64 // math.Float64bits
}

func newCoolingTable(shards int) *coolingTable {
	return &coolingTable{shards: make([]coolShard, shards)}
}

// cool marks shard s as cooling for pushback from now (at most
// maxLogicCooling) for crit and every lower class, for kind and, when kind
// is not a job action, for job actions too. It never shortens a cooling in force.
func (t *coolingTable) cool(s, kind int, crit priority.Class, now time.Time, pushback time.Duration) {
	if pushback <= 0 {
		return
	}
	until := now.Add(min(pushback, maxLogicCooling)).UnixNano()
	sh := &t.shards[s]
	for k := kind; k < numKinds; k++ {
		for c := 0; c <= crit.Index(); c++ {
			raise(&sh.until[k][c], until)
		}
	}
}

// raise sets v to until unless it is later already.
func raise(v *atomic.Int64, until int64) {
	for {
		old := v.Load()
		if old >= until || v.CompareAndSwap(old, until) {
			return
		}
	}
}

// hints records the backpressure logic reported for shard s, on a reply or
// in a refusal's status details.
func (t *coolingTable) hints(s int, bp *leveev2.Backpressure) {
	sh := &t.shards[s]
	sh.depth.Store(bp.GetQueueDepth())
	sh.ratio.Store(math.Float64bits(bp.GetRatio()))
}

// cooling says whether a request of kind and class crit for shard s is to
// be refused now, and if so how long the cooling has left. Critical is
// never refused. The clock is read only when the slot was ever set.
func (t *coolingTable) cooling(s, kind int, crit priority.Class, clk clock.Clock) (time.Duration, bool) {
	if crit == priority.Critical {
		return 0, false
	}
	u := t.shards[s].until[kind][crit.Index()].Load()
	if u == 0 {
		return 0, false
	}
	if left := u - clk.Now().UnixNano(); left > 0 {
		return time.Duration(left), true
	}
	return 0, false
}

// refusal is the reply to a request refused while cooling: BUSY with
// retry_after = the cooling left plus up to a quarter more at random (so
// the refused players do not all come back at the same instant; never
// less, so they do not come back into the cooling), and the shard's last
// hints as backpressure.
func (t *coolingTable) refusal(id uint64, s int, left time.Duration) *leveev2.ServerFrame {
	retry := ceilMillis(left + rand.N(left/4+1))
	sh := &t.shards[s]
	return &leveev2.ServerFrame{
		RequestId:    id,
		Backpressure: apperr.NewBackpressure(int(sh.depth.Load()), math.Float64frombits(sh.ratio.Load()), retry),
		Payload:      &leveev2.ServerFrame_Error{Error: apperr.Reply(errLogicCooling, retry)},
	}
}
