package memory

import (
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/tune"
)

// sweepBudget is how many expired tickets one operation on a tree may forget
// (tune.Sweep). Every new ticket arrives with an operation, so sweeping more
// than one per operation keeps the table from growing while keeping each
// call short.
const sweepBudget = tune.Sweep

// shrinkAt is the size past which a table that empties is rebuilt, so a burst
// of tickets does not pin its memory forever (Go maps never shrink).
const shrinkAt = 4096

type ticketState uint8

const (
	queued ticketState = iota + 1
	granted
)

// ticket is what a tree remembers of one caller.
type ticket struct {
	id string
	// tenant is the Key.Tenant the ticket was reserved under.
	tenant string
	// own is the tenant's budget the ticket is charged to besides the
	// tree's root, nil when it is charged to the root alone.
	own     *keyState
	charged quota.Cost
	// chargedAt is when charged was taken: it names the day of every daily
	// window charged, which Settle and Cancel correct only while it lasts.
	chargedAt time.Time
	state     ticketState
	// axis is the axis that bound when the ticket was queued.
	axis quota.Axis
	// maturity is when a queued ticket may be granted, as it was first
	// told: one in line may have to wait longer (see line.go).
	maturity time.Time
	// start is when a granted ticket's call may start (see
	// quota.Decision.Start).
	start time.Time
	// inLine: the ticket waits in the tree's line, at (tag, seq).
	inLine bool
	tag    float64
	seq    uint64
	// leased: a granted ticket holds a concurrency lease on each of its
	// budgets with a concurrency limit, expiring with the ticket itself (both live for the grant's TTL, renewed by Renew and by
	// Reserve under the ticket).
	leased bool
	// expiry is when the record lapses: maturity + LeaseTTL while queued
	// (a place's own TTL for a place), the grant's TTL from its last grant
	// or renewal once granted.
	expiry time.Time
	// heapAt is the ticket's index in tickets.heap.
	heapAt int
}

// tickets holds a tree's tickets in a slab indexed by id, with a min-heap on
// expiry so expired ones are found without scanning. Slots are reused, so a
// steady stream of tickets allocates nothing once the slab has grown.
type tickets struct {
	index map[string]int32
	slab  []ticket
	free  []int32
	heap  []int32 // slab slots ordered by expiry
	peak  int
}

func (ts *tickets) find(id string) (int32, bool) {
	slot, ok := ts.index[id]
	return slot, ok
}

// add records a new ticket and returns its slot. The slab may move: take
// pointers into it only after add.
func (ts *tickets) add(t ticket) int32 {
	if ts.index == nil {
		ts.index = make(map[string]int32)
	}
	var slot int32
	if n := len(ts.free); n > 0 {
		slot = ts.free[n-1]
		ts.free = ts.free[:n-1]
		ts.slab[slot] = t
	} else {
		slot = int32(len(ts.slab))
		ts.slab = append(ts.slab, t)
	}
	ts.index[t.id] = slot
	ts.slab[slot].heapAt = len(ts.heap)
	ts.heap = append(ts.heap, slot)
	ts.up(len(ts.heap) - 1)
	ts.peak = max(ts.peak, len(ts.index))
	return slot
}

// setExpiry changes a ticket's expiry and restores the heap order.
func (ts *tickets) setExpiry(slot int32, expiry time.Time) {
	t := &ts.slab[slot]
	later := expiry.After(t.expiry)
	t.expiry = expiry
	if later {
		ts.down(t.heapAt)
	} else {
		ts.up(t.heapAt)
	}
}

// remove forgets the ticket in slot.
func (ts *tickets) remove(slot int32) {
	t := &ts.slab[slot]
	delete(ts.index, t.id)
	i, last := t.heapAt, len(ts.heap)-1
	if i != last {
		ts.swap(i, last)
	}
	ts.heap = ts.heap[:last]
	if i != last {
		ts.down(i)
		ts.up(i)
	}
	*t = ticket{}
	ts.free = append(ts.free, slot)
	if len(ts.index) == 0 && ts.peak >= shrinkAt {
		*ts = tickets{}
	}
}

// oldest returns the slot of the ticket that expires first.
func (ts *tickets) oldest() (int32, bool) {
	if len(ts.heap) == 0 {
		return 0, false
	}
	return ts.heap[0], true
}

func (ts *tickets) less(i, j int) bool {
	return ts.slab[ts.heap[i]].expiry.Before(ts.slab[ts.heap[j]].expiry)
}

func (ts *tickets) swap(i, j int) {
	ts.heap[i], ts.heap[j] = ts.heap[j], ts.heap[i]
	ts.slab[ts.heap[i]].heapAt = i
	ts.slab[ts.heap[j]].heapAt = j
}

func (ts *tickets) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !ts.less(i, parent) {
			return
		}
		ts.swap(i, parent)
		i = parent
	}
}

func (ts *tickets) down(i int) {
	n := len(ts.heap)
	for {
		least := i
		if l := 2*i + 1; l < n && ts.less(l, least) {
			least = l
		}
		if r := 2*i + 2; r < n && ts.less(r, least) {
			least = r
		}
		if least == i {
			return
		}
		ts.swap(i, least)
		i = least
	}
}
