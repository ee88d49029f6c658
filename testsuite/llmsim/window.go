package llmsim

import (
	"math"
	"time"
)

// Window shapes (Model.WindowShape): how a provider counts a limit over its
// enforcement window. None of them is Tollgate's model of a provider: a
// governor tested against all three cannot pass by mirroring one.
const (
	// ShapeBucket refills the window's share continuously and lets a call
	// overdraw it (see newWindowBucket). The default.
	ShapeBucket = "bucket"
	// ShapeFixed counts each window from a clock boundary (every second on
	// the second for a one-second window) and forgets it at the next: two
	// windows' worth may pass in a moment straddling a boundary, and a call
	// refused waits for the boundary, however little the window used.
	ShapeFixed = "fixed"
	// ShapeSliding keeps a log of the calls admitted in the last window and
	// admits a call only while the log's sum leaves room for it: no two
	// windows' worth ever pass within one window's length.
	ShapeSliding = "sliding"
)

// windowed is one limit enforced over a window shorter than its period. It
// is not safe for concurrent use (Sim holds its lock).
type windowed interface {
	// refill brings the window up to now; call it before wait or take.
	refill(now time.Time)
	// wait returns how long until n units fit (0 when they fit now); every
	// shape admits a call larger than the window's share once the window
	// holds nothing else, so it always can, in time.
	wait(n float64) time.Duration
	take(n float64)
	// give returns n units charged earlier (a refunded call).
	give(n float64)
}

// newWindow returns limit enforced over window (a fraction of period) in
// shape, or nil when limit is not positive or window is not shorter than
// period. The fixed and sliding shapes count whole calls: when the window's
// share of the limit is under one unit they stretch the window to the time
// one unit takes (period/limit), so a 30-per-minute limit enforced per
// second admits one call every two seconds, not none.
func newWindow(shape string, limit int64, window, period time.Duration, now time.Time) windowed {
	if limit <= 0 || window <= 0 || window >= period {
		return nil
	}
	switch shape {
	case ShapeFixed, ShapeSliding:
		l := float64(limit)
		length := max(window, time.Duration(math.Ceil(period.Seconds()/l*float64(time.Second))))
		share := l * length.Seconds() / period.Seconds()
		if shape == ShapeFixed {
			return &fixedWindow{length: length, capacity: share, now: now}
		}
		return &slidingLog{length: length, capacity: share, now: now}
	}
	return overdraft{newWindowBucket(limit, window, period, now)}
}

// overdraft is a window bucket (ShapeBucket) as a windowed limit.
type overdraft struct{ *bucket }

func (o overdraft) wait(n float64) time.Duration {
	w, _ := o.bucket.wait(n) // a window bucket always can, in time
	return w
}

// fixedWindow counts what calls used since the window's boundary.
type fixedWindow struct {
	length   time.Duration
	capacity float64
	start    time.Time // the current window's boundary
	used     float64
	now      time.Time
}

func (w *fixedWindow) refill(now time.Time) {
	w.now = now
	if start := now.Truncate(w.length); start.After(w.start) {
		w.start, w.used = start, 0
	}
}

func (w *fixedWindow) wait(n float64) time.Duration {
	if w.used <= epsilon || w.used+n <= w.capacity+epsilon {
		return 0
	}
	return w.start.Add(w.length).Sub(w.now)
}

func (w *fixedWindow) take(n float64) { w.used += n }

func (w *fixedWindow) give(n float64) { w.used = max(0, w.used-n) }

// slidingLog remembers each admitted call's time and units for one window.
type slidingLog struct {
	length   time.Duration
	capacity float64
	log      []logged // oldest first
	sum      float64
	now      time.Time
}

type logged struct {
	at time.Time
	n  float64
}

func (w *slidingLog) refill(now time.Time) {
	w.now = now
	drop := 0
	for drop < len(w.log) && !now.Before(w.log[drop].at.Add(w.length)) {
		w.sum -= w.log[drop].n
		drop++
	}
	if drop > 0 {
		w.log = append(w.log[:0], w.log[drop:]...)
	}
	if len(w.log) == 0 {
		w.sum = 0
	}
}

func (w *slidingLog) wait(n float64) time.Duration {
	fits := func(sum float64) bool { return sum <= epsilon || sum+n <= w.capacity+epsilon }
	sum := w.sum
	if fits(sum) {
		return 0
	}
	for _, e := range w.log {
		sum -= e.n
		if fits(sum) {
			return e.at.Add(w.length).Sub(w.now)
		}
	}
	return 0 // not reached: an empty log fits
}

func (w *slidingLog) take(n float64) {
	w.log = append(w.log, logged{at: w.now, n: n})
	w.sum += n
}

// give removes n units from the newest entries: a refund takes back the
// call just charged.
func (w *slidingLog) give(n float64) {
	for i := len(w.log) - 1; i >= 0 && n > epsilon; i-- {
		d := min(n, w.log[i].n)
		w.log[i].n -= d
		w.sum -= d
		n -= d
		if w.log[i].n <= epsilon {
			w.log = append(w.log[:i], w.log[i+1:]...)
		}
	}
}
