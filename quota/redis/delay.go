package redis

import (
	"math"
	"sync"
	"time"
)

// replyDelay measures how late each script's reply reaches this store, so
// that the durations a reply gives on Redis's clock (a grant's Start, a
// place's Wait) are counted from the moment they were decided rather than
// the moment they arrived. A call paced by the start gate then reaches the
// provider when the gate meant, whatever the reply's own trip cost: two
// calls the gate spaces 100 ms apart arrive 100 ms apart even when the
// first one's reply was held up by 4 ms and the second one's was not.
//
// The gap between a script's now (Redis TIME) and the local clock at its
// reply is the clocks' offset plus the reply's trip. The least gap seen
// lately is the offset plus the fastest trip; what a reply's gap has beyond
// it is how late that reply is. The least is kept over two spans of
// delaySpan, so that a step of either clock is forgotten within 2×delaySpan,
// and a reply is never taken as later than maxReplyDelay: a clock that
// steps forward makes replies look late, and should start no call more
// than that early.
type replyDelay struct {
	mu        sync.Mutex
	least     float64   // least gap (µs) in the current span
	prevLeast float64   // and in the one before
	spanStart time.Time // the current span's start (monotonic)
}

const (
	delaySpan     = 10 * time.Second
	maxReplyDelay = 20 * time.Millisecond
)

// late records the reply of a script whose now was nowUS (unix µs on
// Redis's clock) received at local time at, and returns how late it
// arrived: between 0 and maxReplyDelay.
func (r *replyDelay) late(nowUS float64, at time.Time) time.Duration {
	gap := float64(at.UnixMicro()) - nowUS
	r.mu.Lock()
	if r.spanStart.IsZero() || at.Sub(r.spanStart) >= delaySpan {
		r.prevLeast = r.least
		if r.spanStart.IsZero() || at.Sub(r.spanStart) >= 2*delaySpan {
			r.prevLeast = math.Inf(1) // no reply in the previous span
		}
		r.least, r.spanStart = math.Inf(1), at
	}
	r.least = math.Min(r.least, gap)
	least := math.Min(r.least, r.prevLeast)
	r.mu.Unlock()
	return min(durationOf(gap-least), maxReplyDelay)
}

// since returns d less the lateness of the reply that gave it, never below
// zero: what is left of a duration decided on Redis's clock.
func since(d, late time.Duration) time.Duration { return max(0, d-late) }
