package queue

import (
	"container/heap"
	"time"
)

// graceItem is the end of one ticket's grace. Items are never removed early:
// a Resume bumps nothing here, so an item whose gen no longer matches the
// ticket's (or whose ticket is gone or back) is stale and skipped.
type graceItem struct {
	deadline time.Time
	id       TicketID
	gen      uint32
}

// graceHeap is a min-heap of grace deadlines.
type graceHeap []graceItem

func (h graceHeap) Len() int           { return len(h) }
func (h graceHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h graceHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *graceHeap) Push(x any)        { *h = append(*h, x.(graceItem)) }
func (h *graceHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// due pops the next item whose deadline is at or before now.
func (h *graceHeap) due(now time.Time) (graceItem, bool) {
	if len(*h) == 0 || now.Before((*h)[0].deadline) {
		return graceItem{}, false
	}
	return heap.Pop(h).(graceItem), true
}

func (h *graceHeap) add(it graceItem) { heap.Push(h, it) }
