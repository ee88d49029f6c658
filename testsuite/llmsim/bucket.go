package llmsim

import (
	"math"
	"time"
)

// epsilon absorbs float rounding when a level is compared with a cost, so that
// a bucket refilled for exactly the time one unit takes holds that unit.
const epsilon = 1e-9

// bucket is a continuously refilling token bucket: it holds at most capacity
// units and earns them back at rate. It starts full. Not safe for concurrent
// use (Sim holds its lock).
//
// A period bucket (newBucket) holds a whole limit and admits a call only if
// it holds the call's cost. A window bucket (newWindowBucket) holds the share
// of the limit that a shorter enforcement window allows and may overdraw: it
// admits a call once it holds min(cost, capacity), and its level then goes
// below zero, a debt repaid at rate before the next call fits.
type bucket struct {
	capacity float64
	rate     float64 // units per second
	level    float64
	last     time.Time
	overdraw bool // a window bucket: see wait
}

// newBucket returns a full bucket of capacity units refilled over period, or
// nil (unlimited) when capacity is not positive.
func newBucket(capacity int64, period time.Duration, now time.Time) *bucket {
	if capacity <= 0 {
		return nil
	}
	c := float64(capacity)
	return &bucket{capacity: c, rate: c / period.Seconds(), level: c, last: now}
}

// newWindowBucket returns the bucket that enforces limit over window, a
// fraction of period: it holds limit × window/period units (possibly less
// than one) and earns limit units per period, so the long-run rate is the
// period bucket's. It returns nil when limit is not positive or window is not
// shorter than period (the period bucket then enforces alone).
func newWindowBucket(limit int64, window, period time.Duration, now time.Time) *bucket {
	if limit <= 0 || window <= 0 || window >= period {
		return nil
	}
	l := float64(limit)
	c := l * window.Seconds() / period.Seconds()
	return &bucket{capacity: c, rate: l / period.Seconds(), level: c, last: now, overdraw: true}
}

func (b *bucket) refill(now time.Time) {
	if now.After(b.last) {
		b.level = math.Min(b.capacity, b.level+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
}

// wait returns how long until n units fit (0 if they fit now) and whether
// they ever can (n ≤ capacity). A window bucket takes any n once it holds
// min(n, capacity): a call larger than the window's share is served from a
// full window, not refused for ever. Call refill first.
func (b *bucket) wait(n float64) (time.Duration, bool) {
	need := n
	switch {
	case b.overdraw:
		need = math.Min(n, b.capacity)
	case n > b.capacity+epsilon:
		return 0, false
	}
	short := need - b.level
	if short <= epsilon {
		return 0, true
	}
	return time.Duration(math.Ceil(short / b.rate * float64(time.Second))), true
}

// take charges n units; a window bucket's level may go below zero.
func (b *bucket) take(n float64) { b.level -= n }

// give returns n units, never above capacity.
func (b *bucket) give(n float64) { b.level = math.Min(b.capacity, b.level+n) }

// remaining is the whole units left.
func (b *bucket) remaining() int64 {
	return int64(math.Max(0, math.Floor(b.level+epsilon)))
}

// untilFull is how long the bucket takes to refill completely: the provider's
// "reset" for a continuously refilling limit.
func (b *bucket) untilFull() time.Duration {
	short := b.capacity - b.level
	if short <= epsilon {
		return 0
	}
	return time.Duration(math.Ceil(short / b.rate * float64(time.Second)))
}

// dailyWindow allows capacity requests per calendar day in zone.
type dailyWindow struct {
	capacity int64
	used     int64
	zone     *time.Location
	day      time.Time // midnight in zone starting the current window
}

func newDailyWindow(capacity int64, zone *time.Location, now time.Time) *dailyWindow {
	if capacity <= 0 {
		return nil
	}
	return &dailyWindow{capacity: capacity, zone: zone, day: midnight(now, zone)}
}

// midnight returns the midnight in zone that starts t's day there.
func midnight(t time.Time, zone *time.Location) time.Time {
	y, m, d := t.In(zone).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, zone)
}

func (w *dailyWindow) roll(now time.Time) {
	if day := midnight(now, w.zone); day.After(w.day) {
		w.day, w.used = day, 0
	}
}

// next returns the midnight that ends the current window: the next day's
// midnight in zone, which is 23 or 25 hours away across a daylight-saving
// change.
func (w *dailyWindow) next() time.Time {
	y, m, d := w.day.Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, w.zone)
}

// wait returns how long until n more requests fit today (the time to the
// next midnight when they do not) and whether they ever can.
func (w *dailyWindow) wait(n int64, now time.Time) (time.Duration, bool) {
	if n > w.capacity {
		return 0, false
	}
	if w.used+n <= w.capacity {
		return 0, true
	}
	return w.next().Sub(now), true
}

func (w *dailyWindow) take(n int64) { w.used += n }
