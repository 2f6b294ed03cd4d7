package gate

// connSet is the set of tracked connections, kept in a fixed number of
// slots so the keepalive can visit one slot at a time and see every
// connection once per ping interval, at the same point of the interval
// each time (a map's iteration order would move it around). A connection
// goes to the slots in turn and remembers where it is, so removal is a swap
// with the slot's last entry. Not safe for concurrent use: Server.mu guards it.
type connSet struct {
	slots [][]*conn
	next  int // the slot the next connection goes to
	n     int
}

func newConnSet(slots int) *connSet {
	return &connSet{slots: make([][]*conn, max(slots, 1))}
}

func (s *connSet) add(c *conn) {
	i := s.next
	s.next = (s.next + 1) % len(s.slots)
	c.slot, c.slotIdx = int32(i), int32(len(s.slots[i]))
	s.slots[i] = append(s.slots[i], c)
	s.n++
}

// remove takes c out; a connection not in the set is left alone.
func (s *connSet) remove(c *conn) {
	if c.slotIdx < 0 || int(c.slot) >= len(s.slots) {
		return
	}
	sl := s.slots[c.slot]
	i := int(c.slotIdx)
	if i >= len(sl) || sl[i] != c {
		return
	}
	last := len(sl) - 1
	sl[i] = sl[last]
	sl[i].slotIdx = int32(i)
	sl[last] = nil // no closed connection stays reachable
	s.slots[c.slot] = sl[:last]
	c.slotIdx = -1
	s.n--
}

func (s *connSet) len() int { return s.n }

// appendSlot appends slot i's connections to buf.
func (s *connSet) appendSlot(buf []*conn, i int) []*conn {
	return append(buf, s.slots[i%len(s.slots)]...)
}

// appendAll appends every connection to buf.
func (s *connSet) appendAll(buf []*conn) []*conn {
	for _, sl := range s.slots {
		buf = append(buf, sl...)
	}
	return buf
}
