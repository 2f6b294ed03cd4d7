package queue

import "time"

// slot is one ticket in a lane.
type slot struct {
	id       TicketID
	player   string
	seq      uint64
	joined   time.Time
	key      int64     // release order: the join time in ns, never decreasing along the normal lane
	deadline time.Time // end of grace while away
	gen      uint32    // bumped by every Leave, to spot stale deadlines
	away     bool
	live     bool
}

// lane is a first-in, first-out line with O(log n) ranks: a slice of slots
// indexed by arrival (slot index i holds lane index base+i) and a Fenwick
// tree counting the live ones. Removed slots are holes; the released prefix
// is cut off when it is half the slice.
type lane struct {
	base  uint64 // lane index of slots[0]
	slots []slot
	head  int // first live slot, or len(slots)
	live  int
	fen   fenwick
}

// compactMin is the smallest dead prefix worth compacting.
const compactMin = 1024

// push appends s and returns its lane index.
func (l *lane) push(s slot) uint64 {
	s.live = true
	l.slots = append(l.slots, s)
	l.fen.push(1)
	l.live++
	return l.base + uint64(len(l.slots)-1)
}

// at returns the slot of lane index idx, or nil if it is not in the lane.
func (l *lane) at(idx uint64) *slot {
	if idx < l.base || idx-l.base >= uint64(len(l.slots)) {
		return nil
	}
	s := &l.slots[idx-l.base]
	if !s.live {
		return nil
	}
	return s
}

// rank is the 1-based place of the live slot idx among the live slots.
func (l *lane) rank(idx uint64) int {
	return int(l.fen.prefix(int(idx - l.base)))
}

// front returns the first live slot and its lane index.
func (l *lane) front() (*slot, uint64, bool) {
	if l.head >= len(l.slots) {
		return nil, 0, false
	}
	return &l.slots[l.head], l.base + uint64(l.head), true
}

// remove takes the live slot idx out of the lane.
func (l *lane) remove(idx uint64) {
	i := int(idx - l.base)
	l.slots[i] = slot{key: l.slots[i].key} // drop the player string; keep the order
	l.fen.add(i, -1)
	l.live--
	if i != l.head {
		return
	}
	for l.head < len(l.slots) && !l.slots[l.head].live {
		l.head++
	}
	if l.head >= compactMin && 2*l.head >= len(l.slots) {
		l.compact()
	}
}

// compact drops the dead prefix, reusing the backing array.
func (l *lane) compact() {
	n := copy(l.slots, l.slots[l.head:])
	clear(l.slots[n:])
	l.slots = l.slots[:n]
	l.base += uint64(l.head)
	l.head = 0
	l.fen.rebuild(l.slots)
}

// fenwick is a binary indexed tree over 0-based positions; t[i-1] holds the
// sum of the range (i-lowbit(i), i] in 1-based terms.
type fenwick struct{ t []int32 }

// push appends one position holding v, in O(log n).
func (f *fenwick) push(v int32) {
	i := len(f.t) + 1 // 1-based index of the new position
	low := i & -i
	// The new node covers (i-low, i]: v plus the range (i-low, i-1].
	f.t = append(f.t, v+f.sum1(i-1)-f.sum1(i-low))
}

// add adds v at 0-based position i.
func (f *fenwick) add(i int, v int32) {
	for j := i + 1; j <= len(f.t); j += j & -j {
		f.t[j-1] += v
	}
}

// prefix is the sum of positions 0..i inclusive.
func (f *fenwick) prefix(i int) int32 { return f.sum1(i + 1) }

// sum1 is the sum of 1-based positions 1..i.
func (f *fenwick) sum1(i int) int32 {
	var s int32
	for ; i > 0; i -= i & -i {
		s += f.t[i-1]
	}
	return s
}

// rebuild sets the tree to the live flags of slots in O(n).
func (f *fenwick) rebuild(slots []slot) {
	f.t = f.t[:len(slots)]
	for i := range slots {
		if slots[i].live {
			f.t[i] = 1
		} else {
			f.t[i] = 0
		}
	}
	for i := 1; i <= len(f.t); i++ {
		if j := i + i&-i; j <= len(f.t) {
			f.t[j-1] += f.t[i-1]
		}
	}
}
