package memory

import (
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/tollgate/tollgate/quota"
)

// maxCapacity mirrors the largest capacity quota.Limit accepts (2^50), so an
// adopted provider limit stays exactly representable.
const maxCapacity = 1 << 50

// bucket is one continuously refilling axis: a rate.Limiter whose burst is
// the effective capacity and whose rate refills it once per period. Its level
// may fall below zero: that debt is capacity promised to queued tickets.
type bucket struct {
	axis     quota.Axis
	limit    quota.Limit
	period   time.Duration
	capacity int64   // effective capacity, the limiter's burst
	rate     float64 // units per second, the limiter's limit (after the margin)
	lim      *rate.Limiter
	// gate is the bucket's start gate (see quota's burst.go).
	gate gate
}

func newBucket(l quota.Limit, capacity int64) bucket {
	r := float64(capacity) / l.Period.Seconds()
	return bucket{axis: l.Axis, limit: l, period: l.Period, capacity: capacity, rate: r,
		lim: rate.NewLimiter(rate.Limit(r), int(capacity))}
}

// setRate makes the bucket refill at its capacity per period times the
// margin's rate, from now.
func (b *bucket) setRate(now time.Time, m quota.Margin) {
	r := float64(b.capacity) / b.period.Seconds() * m.OrNone().Rate
	if r == b.rate {
		return
	}
	b.rate = r
	b.lim.SetLimitAt(now, rate.Limit(r))
}

// level is the bucket's level at now, refilled lazily and capped at capacity.
func (b *bucket) level(now time.Time) float64 { return b.lim.TokensAt(now) }

// charge takes n units at now (n < 0 refunds), in one step whatever n is.
// ReserveN refuses more than the burst, so a charge above the capacity (a
// settled overrun) raises the burst to n for the call: SetBurstAt first
// stores the level read under the old burst, capped at the capacity, and
// the second SetBurstAt, at the same instant, leaves the level as charged.
// A refund is a negative reservation, which rate.Limiter caps at the burst
// the next time it reads the level (Reservation.Cancel would refund nothing
// once the reservation's time has passed).
func (b *bucket) charge(now time.Time, n int64) {
	if n > b.capacity {
		b.lim.SetBurstAt(now, int(n))
		defer b.lim.SetBurstAt(now, int(b.capacity))
	}
	if !b.lim.ReserveN(now, int(n)).OK() {
		panic("memory: rate.Limiter refused a charge within its burst")
	}
}

// lower sets the level to at most limit, never raising it. SetBurstAt stores
// the level read under the old burst; reading it once under a burst of limit
// caps it there, and the second SetBurstAt restores the capacity.
func (b *bucket) lower(now time.Time, limit int64) {
	if float64(limit) >= b.level(now) {
		return
	}
	b.lim.SetBurstAt(now, int(max(limit, 0)))
	b.lim.SetBurstAt(now, int(b.capacity))
}

// resize makes capacity the bucket's effective capacity (and so its refill
// rate capacity per period), capping the level at it.
func (b *bucket) resize(now time.Time, capacity int64, m quota.Margin) {
	if capacity == b.capacity {
		return
	}
	b.capacity = capacity
	b.rate = float64(capacity) / b.period.Seconds() * m.OrNone().Rate
	b.lim.SetLimitAt(now, rate.Limit(b.rate))
	b.lim.SetBurstAt(now, int(capacity)) // every later read caps the level at it
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

// window is one daily axis: used units in the calendar day [start, end) of
// zone, reset when the day changes.
type window struct {
	axis       quota.Axis
	zone       *time.Location
	capacity   int64 // effective capacity
	used       int64
	start, end time.Time
}

// roll moves the window to the day of now, forgetting what was used.
func (w *window) roll(now time.Time) {
	if !now.Before(w.start) && now.Before(w.end) {
		return
	}
	y, m, d := now.In(w.zone).Date()
	w.start = time.Date(y, m, d, 0, 0, 0, 0, w.zone)
	w.end = time.Date(y, m, d+1, 0, 0, 0, 0, w.zone)
	w.used = 0
}

// holds reports whether t falls in the window's day.
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
