package pacer

import "time"

// waiter is one blocked Wait call. Its fields other than kick are guarded
// by Pacer.mu.
type waiter struct {
	level      int
	kick       chan struct{} // capacity 1: "look again"
	err        error         // set when evicted
	since      time.Time     // when it joined the queue
	queued     bool
	armed      bool // head with a timer set and no kick since (tests read it)
	prev, next *waiter
}

// wake asks w's goroutine to look at the queue again. It never blocks; a
// kick sent while one is pending is merged with it.
func (w *waiter) wake() {
	w.armed = false
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// fifo is an intrusive doubly linked list: O(1) push, pop and removal.
type fifo struct{ head, tail *waiter }

func (q *fifo) push(w *waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
}

func (q *fifo) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
}

// queue is the local bounded queue: one FIFO per priority level.
type queue struct {
	q [levels]fifo
	n int
}

func (q *queue) push(w *waiter) {
	q.q[w.level].push(w)
	w.queued = true
	q.n++
}

func (q *queue) remove(w *waiter) {
	q.q[w.level].remove(w)
	w.queued = false
	q.n--
}

// head is the next waiter to release: the oldest of the highest level.
func (q *queue) head() *waiter {
	for l := levels - 1; l >= 0; l-- {
		if w := q.q[l].head; w != nil {
			return w
		}
	}
	return nil
}

// victim is the oldest waiter of the lowest level below level, or nil.
func (q *queue) victim(level int) *waiter {
	for l := 0; l < level; l++ {
		if w := q.q[l].head; w != nil {
			return w
		}
	}
	return nil
}
