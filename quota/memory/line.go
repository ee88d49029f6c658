package memory

import (
	"sort"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// The line of a saturated tree, in weighted fair share.
//
// Charging in advance stays as it was: a queued ticket's cost is taken when
// it queues, so a bucket's level runs below zero while tickets wait, and the
// budget can never be over-granted. What fair share decides is which queued
// ticket may go when. Every ticket that queues gets a virtual finish tag,
//
//	tag = max(v, f[tenant]) + share/weight
//
// where share is its cost's dominant share of the root's buckets (the most,
// over bucket axes, of cost/capacity: tokens as the binding axis counts
// them), weight its tenant's (quota.Policies.Weight), f[tenant] the tag of
// the tenant's latest ticket and v the tag of the latest ticket served (one
// that left the line mature, or was granted at once past it). The line is
// ordered by tag, then by arrival. On each bucket axis of a budget, what is
// available to the line is the level plus the cost still in line; a
// ticket may go once the cost ahead of it in the line plus its own fits
// that, and its wait is the time the level takes to cover the difference.
// With one tenant, tags follow arrival and the waits are the ones a
// first-come line gives; with many, a tenant that bursts waits behind its
// own calls, its tags running ahead of v, not in front of everyone else's.
// When the line empties, v, f and the arrival counter start again from
// zero: a saturated spell owes nothing to the one before.
//
// A queued ticket's maturity is therefore an estimate, which moves later
// when other tenants' calls take earlier tags; it never moves before the
// maturity the ticket was first told. A tenant's own budget nested in its
// account's is a line of that tenant's tickets alone, in the same order.

// parts is a cost in the order its parts are charged (quota.Cost.On).
type parts [5]int64

func partsOf(c quota.Cost) parts {
	return parts{c.Requests, c.Tokens, c.InputTokens, c.OutputTokens, c.Spend}
}

// part is the index in parts of the cost axis charges (-1: none).
func part(axis quota.Axis) int {
	switch axis {
	case quota.Requests, quota.RequestsPerDay:
		return 0
	case quota.Tokens, quota.TokensPerDay:
		return 1
	case quota.InputTokens:
		return 2
	case quota.OutputTokens:
		return 3
	case quota.SpendPerDay, quota.SpendPerMonth:
		return 4
	}
	return -1
}

// lineSums are the costs in line of every tenant (all) and of the call's
// tenant (own): in total, and ahead of one place.
type lineSums struct {
	total, ahead, ownTotal, ownAhead parts
}

// line is a tree's queued tickets in fair-share order.
type line struct {
	slots []int32 // in tickets.slab, by (tag, seq)
	v     float64
	f     map[string]float64
	seq   uint64
}

// before reports whether (tag, seq) comes before (tag2, seq2).
func before(tag float64, seq uint64, tag2 float64, seq2 uint64) bool {
	return tag < tag2 || (tag == tag2 && seq < seq2)
}

// share is cost's dominant share of the root's buckets.
func (ks *keyState) share(cost quota.Cost) float64 {
	s := 0.0
	for i := range ks.buckets {
		b := &ks.buckets[i]
		s = max(s, float64(cost.On(b.axis))/float64(b.capacity))
	}
	return s
}

// tag returns the finish tag of a call of tenant costing cost, at weight.
// A tenant's latest tag behind the line's virtual time counts for nothing,
// and is dropped.
func (tr *tree) tag(tenant string, cost quota.Cost, weight float64) float64 {
	base := tr.line.v
	if f, ok := tr.line.f[tenant]; ok {
		if f > base {
			base = f
		} else {
			delete(tr.line.f, tenant)
		}
	}
	return base + tr.root.share(cost)/weight
}

// sums adds up the line: every ticket's cost, and the cost of those ahead
// of (tag, seq); the same for tenant's tickets alone.
func (tr *tree) sums(tag float64, seq uint64, tenant string) lineSums {
	var s lineSums
	for _, slot := range tr.line.slots {
		t := &tr.tickets.slab[slot]
		c := partsOf(t.charged)
		ahead := before(t.tag, t.seq, tag, seq)
		mine := t.tenant == tenant
		for i := range c {
			s.total[i] += c[i]
			if ahead {
				s.ahead[i] += c[i]
			}
			if mine {
				s.ownTotal[i] += c[i]
				if ahead {
					s.ownAhead[i] += c[i]
				}
			}
		}
	}
	return s
}

// wait returns how long until a call costing cost, placed at s in the
// line, fits every budget of sc, and the axis that takes longest (the
// tenant's own budget first among equals).
func (tr *tree) wait(now time.Time, sc scope, s lineSums, cost quota.Cost, priority quota.Priority) (time.Duration, quota.Axis) {
	var wait time.Duration
	var axis quota.Axis
	if sc.own != nil {
		wait, axis = sc.own.lineWait(now, cost, priority, s.ownAhead, s.ownTotal)
	}
	if w, a := sc.root.lineWait(now, cost, priority, s.ahead, s.total); w > wait {
		wait, axis = w, a
	}
	return wait, axis
}

// lineWait returns how long until every bucket covers cost (and, for Low,
// the reserve) after the cost ahead of it in line, the level counting the
// cost in line (total) as available to the line; and the axis that takes
// longest (the first of equals).
func (ks *keyState) lineWait(now time.Time, cost quota.Cost, priority quota.Priority, ahead, total parts) (time.Duration, quota.Axis) {
	var wait time.Duration
	var axis quota.Axis
	for i := range ks.buckets {
		b := &ks.buckets[i]
		p := part(b.axis)
		reserve := 0.0
		if priority == quota.Low {
			reserve = ks.policy.PriorityReserve * b.burst
		}
		need := float64(ahead[p]) + b.need(cost.On(b.axis), reserve) - float64(total[p])
		if w := b.waitFor(now, need); w > wait {
			wait, axis = w, b.axis
		}
	}
	return wait, axis
}

// enter puts the ticket in slot in line at tag, as its tenant's latest.
func (tr *tree) enter(slot int32, tag float64) {
	l := &tr.line
	l.seq++
	t := &tr.tickets.slab[slot]
	t.inLine, t.tag, t.seq = true, tag, l.seq
	if l.f == nil {
		l.f = make(map[string]float64)
	}
	l.f[t.tenant] = tag
	i := sort.Search(len(l.slots), func(i int) bool {
		u := &tr.tickets.slab[l.slots[i]]
		return before(tag, t.seq, u.tag, u.seq)
	})
	l.slots = append(l.slots, 0)
	copy(l.slots[i+1:], l.slots[i:])
	l.slots[i] = slot
}

// pass records a call of tenant served at tag without queueing, ahead of
// a line that is not empty.
func (tr *tree) pass(tenant string, tag float64) {
	l := &tr.line
	if len(l.slots) == 0 {
		return
	}
	l.v = max(l.v, tag)
	l.f[tenant] = tag
}

// serve takes the mature ticket in slot out of the line, if it is in it.
func (tr *tree) serve(slot int32) {
	if t := &tr.tickets.slab[slot]; t.inLine {
		tr.line.v = max(tr.line.v, t.tag)
		tr.unline(slot)
	}
}

// unline takes the ticket in slot out of the line, if it is in it; the
// line that empties starts afresh.
func (tr *tree) unline(slot int32) {
	t := &tr.tickets.slab[slot]
	if !t.inLine {
		return
	}
	t.inLine = false
	l := &tr.line
	for i, s := range l.slots {
		if s == slot {
			l.slots = append(l.slots[:i], l.slots[i+1:]...)
			break
		}
	}
	if len(l.slots) == 0 {
		l.v, l.f, l.seq = 0, nil, 0
	}
}

// tenants reports what waits in line per tenant, sorted by tenant; only
// tenant's tickets unless all.
func (tr *tree) tenants(tenant string, all bool) []quota.TenantLine {
	var out []quota.TenantLine
	for _, slot := range tr.line.slots {
		t := &tr.tickets.slab[slot]
		if !all && t.tenant != tenant {
			continue
		}
		i := sort.Search(len(out), func(i int) bool { return out[i].Tenant >= t.tenant })
		if i == len(out) || out[i].Tenant != t.tenant {
			out = append(out, quota.TenantLine{})
			copy(out[i+1:], out[i:])
			out[i] = quota.TenantLine{Tenant: t.tenant}
		}
		l := &out[i]
		l.Tickets++
		l.Cost.Requests += t.charged.Requests
		l.Cost.Tokens += t.charged.Tokens
		l.Cost.InputTokens += t.charged.InputTokens
		l.Cost.OutputTokens += t.charged.OutputTokens
		l.Cost.Spend += t.charged.Spend
	}
	return out
}
