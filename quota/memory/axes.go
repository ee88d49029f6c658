package memory

import (
	"math"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

// maxCapacity mirrors the largest capacity quota.Limit accepts (2^50), so an
// adopted provider limit stays exactly representable.
const maxCapacity = 1 << 50

// bucket is one continuously refilling axis: capacity units per period,
// earned continuously at rate, and a level that holds at most burst, the
// part of the capacity that may go at once (see quota.Limit.Burst). A call
// needs the level to hold its cost, or the whole burst for a call larger,
// and takes its cost from it: the level may fall below zero, which is
// capacity promised to queued tickets and to the calls after a large one.
// The zero level time means full.
type bucket struct {
	axis     quota.Axis
	limit    quota.Limit
	capacity int64   // effective capacity per period
	rate     float64 // units per second, after the margin
	burst    float64 // the most the level holds, after the margin
	lvl      float64 // the level at at
	at       time.Time
	// gate is the bucket's start gate (see gate.go).
	gate gate
	// margin is what the axis learned of its provider's limiter
	// (quota.Margin; zero: none), learned and applied at a tree's root
	// only, as are its start gates: a provider meters the account.
	margin quota.Margin
}

func newBucket(l quota.Limit, capacity int64) bucket {
	b := bucket{axis: l.Axis, limit: l, capacity: capacity}
	b.burst, b.rate = storekit.Gate(l, capacity, storekit.NoMargin)
	return b
}

// level is the bucket's level at now, refilled lazily and capped at burst.
func (b *bucket) level(now time.Time) float64 {
	if b.at.IsZero() {
		return b.burst
	}
	l := b.lvl
	if dt := now.Sub(b.at); dt > 0 {
		l += dt.Seconds() * b.rate
	}
	return math.Min(l, b.burst)
}

// set makes l the level at now.
func (b *bucket) set(now time.Time, l float64) { b.lvl, b.at = l, now }

// charge takes n units at now (n < 0 refunds, never above the burst).
func (b *bucket) charge(now time.Time, n int64) {
	b.set(now, math.Min(b.level(now)-float64(n), b.burst))
}

// need is what the level must hold for a call costing n to go, with
// reserve of the burst kept back: n, or the whole burst for a call larger.
func (b *bucket) need(n int64, reserve float64) float64 {
	return math.Min(float64(n), b.burst-reserve) + reserve
}

// lower sets the level to at most limit, never raising it.
func (b *bucket) lower(now time.Time, limit int64) {
	if l := b.level(now); float64(limit) < l {
		b.set(now, math.Max(float64(limit), 0))
	}
}

// resize makes capacity the bucket's effective capacity (and so its rate
// and burst) at its margin, capping the level at the new burst.
func (b *bucket) resize(now time.Time, capacity int64) {
	if capacity == b.capacity {
		return
	}
	l := b.level(now)
	b.capacity = capacity
	b.burst, b.rate = storekit.Gate(b.limit, capacity, b.margin)
	b.set(now, math.Min(l, b.burst))
}

// setMargin makes the bucket's burst and rate those of margin m from now.
// The level keeps what it owes: a level below the burst is a debt the
// calls after it wait for, so a smaller burst moves it down by as much (a
// smaller burst must not let a call larger than it go sooner), and a
// larger one leaves it where it is, to earn the rest at the rate (a
// larger burst must not hand out what nothing earned). A full bucket
// stays dated so.
func (b *bucket) setMargin(now time.Time, m quota.Margin) {
	if m == b.margin {
		return
	}
	b.margin = m
	burst, rate := storekit.Gate(b.limit, b.capacity, m)
	if !b.at.IsZero() {
		b.set(now, math.Min(b.level(now)+math.Min(0, burst-b.burst), burst))
	}
	b.gate.shift(now, b.burst, b.rate, burst)
	b.burst, b.rate = burst, rate
}

// waitFor returns how long until the level reaches need at the bucket's rate,
// rounded up to the nanosecond; 0 when it already has (within float error).
func (b *bucket) waitFor(now time.Time, need float64) time.Duration {
	deficit := need - b.level(now)
	if deficit <= 1e-9*math.Max(1, need) {
		return 0
	}
	ns := math.Ceil(deficit / b.rate * float64(time.Second))
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}

// window is one daily or monthly axis: used units in the calendar day (or
// month) [start, end) of its limit's zone, reset when it ends.
type window struct {
	axis       quota.Axis
	limit      quota.Limit
	capacity   int64 // effective capacity
	used       int64
	start, end time.Time
}

// roll moves the window to the day (or month) of now, forgetting what was
// used.
func (w *window) roll(now time.Time) {
	if !now.Before(w.start) && now.Before(w.end) {
		return
	}
	w.start, w.end = w.limit.Window(now)
	w.used = 0
}

// holds reports whether t falls in the window.
func (w *window) holds(t time.Time) bool { return !t.Before(w.start) && t.Before(w.end) }

// add changes used by n (n < 0 refunds), never below zero.
func (w *window) add(n int64) { w.used = max(w.used+n, 0) }

// adoptable returns p's budget for a limit a provider reported, capped at
// maxCapacity, and false when p does not adopt limits or headroom leaves less
// than one unit of it (such a limit is not adopted, as a policy giving it
// would not validate).
func adoptable(p quota.Policy, limit int64) (int64, bool) {
	if !p.AdoptObservedLimits || limit < 1 {
		return 0, false
	}
	eff := p.Effective(min(limit, maxCapacity))
	return eff, eff >= 1
}
