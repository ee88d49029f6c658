package llmsim

import (
	"time"
	_ "time/tzdata" // Gemini's days end at midnight America/Los_Angeles, wherever Sim runs
)

// cost is what one call charges, per bucket.
type cost struct {
	requests, tokens, input, output int64
}

// Axis names used in rate-limit errors (OpenAI's error "type" for 429s is
// "requests" or "tokens").
const (
	axisRequests       = "requests"
	axisTokens         = "tokens"
	axisInputTokens    = "input_tokens"
	axisOutputTokens   = "output_tokens"
	axisRequestsPerDay = "requests_per_day"
)

// limiter holds one account's limits on one model. A nil field is unlimited.
// requests, tokens, input and output are the period buckets, each holding a
// whole per-minute limit: the rate-limit headers report them. When the model
// has a Window shorter than its Period, windows holds the same four limits
// enforced over the window (nil entries otherwise), and a call must fit both.
type limiter struct {
	requests, tokens, input, output *bucket
	windows                         [4]windowed // requests, tokens, input, output; nil entries unlimited
	daily                           *dailyWindow
}

func newLimiter(m Model, now time.Time) *limiter {
	period := m.period()
	return &limiter{
		requests: newBucket(m.RequestsPerMinute, period, now),
		tokens:   newBucket(m.TokensPerMinute, period, now),
		input:    newBucket(m.InputTokensPerMinute, period, now),
		output:   newBucket(m.OutputTokensPerMinute, period, now),
		windows: [4]windowed{
			newWindow(m.WindowShape, m.RequestsPerMinute, m.Window, period, now),
			newWindow(m.WindowShape, m.TokensPerMinute, m.Window, period, now),
			newWindow(m.WindowShape, m.InputTokensPerMinute, m.Window, period, now),
			newWindow(m.WindowShape, m.OutputTokensPerMinute, m.Window, period, now),
		},
		daily: newDailyWindow(m.RequestsPerDay, dayZone(m.Provider), now),
	}
}

// rated is one rate axis of a limiter and what a call charges it.
type rated struct {
	name   string
	period *bucket
	window windowed // nil when the period enforces alone
	n      int64
}

// axes pairs each rate axis's buckets with c's charge on it, in the order
// requests, tokens, input tokens, output tokens.
func (l *limiter) axes(c cost) [4]rated {
	return [...]rated{
		{axisRequests, l.requests, l.windows[0], c.requests},
		{axisTokens, l.tokens, l.windows[1], c.tokens},
		{axisInputTokens, l.input, l.windows[2], c.input},
		{axisOutputTokens, l.output, l.windows[3], c.output},
	}
}

// pacific is the zone whose midnight resets Gemini's per-day quotas. It is
// read from the IANA database (embedded, so any host has it), not computed
// from rules: Sim is the reference a client's own reckoning is tested
// against.
var pacific = mustZone("America/Los_Angeles")

func mustZone(name string) *time.Location {
	z, err := time.LoadLocation(name)
	if err != nil {
		panic("llmsim: time zone " + name + ": " + err.Error()) // the embedded database has it
	}
	return z
}

// dayZone is the zone whose midnight ends a provider's day: Pacific time for
// Gemini, UTC for the others.
func dayZone(provider string) *time.Location {
	if provider == Gemini {
		return pacific
	}
	return time.UTC
}

// refusal says why a call did not fit: the axis that kept it out longest.
type refusal struct {
	axis      string
	limit     int64
	requested int64
	wait      time.Duration // until the call fits; 0 when never
	never     bool          // the call is larger than the axis's capacity
}

// refill brings every bucket up to now.
func (l *limiter) refill(now time.Time) {
	for _, a := range l.axes(cost{}) {
		if a.period != nil {
			a.period.refill(now)
		}
		if a.window != nil {
			a.window.refill(now)
		}
	}
	if l.daily != nil {
		l.daily.roll(now)
	}
}

// admit charges c on every axis if it fits on all of them, or charges nothing
// and says why not. On each axis both the period bucket and the window bucket
// must admit the call; the wait reported is the longer of theirs, and the
// limit the period's (the per-minute limit providers name in their errors).
func (l *limiter) admit(c cost, now time.Time) *refusal {
	l.refill(now)
	var worst *refusal
	consider := func(r refusal) {
		switch {
		case worst == nil:
			worst = &r
		case worst.never:
		case r.never || r.wait > worst.wait:
			worst = &r
		}
	}
	axes := l.axes(c)
	for _, a := range axes {
		if a.period == nil {
			continue
		}
		w, ok := a.period.wait(float64(a.n))
		if ok && a.window != nil {
			w = max(w, a.window.wait(float64(a.n)))
		}
		if !ok || w > 0 {
			consider(refusal{axis: a.name, limit: int64(a.period.capacity), requested: a.n, wait: w, never: !ok})
		}
	}
	if l.daily != nil {
		if w, ok := l.daily.wait(c.requests, now); !ok || w > 0 {
			consider(refusal{axis: axisRequestsPerDay, limit: l.daily.capacity, requested: c.requests, wait: w, never: !ok})
		}
	}
	if worst != nil {
		return worst
	}
	for _, a := range axes {
		if a.period != nil {
			a.period.take(float64(a.n))
		}
		if a.window != nil {
			a.window.take(float64(a.n))
		}
	}
	if l.daily != nil {
		l.daily.take(c.requests)
	}
	return nil
}

// refund gives c back to every bucket, period and window alike, never above
// its capacity.
func (l *limiter) refund(c cost) {
	for _, a := range l.axes(c) {
		if a.n <= 0 {
			continue
		}
		if a.period != nil {
			a.period.give(float64(a.n))
		}
		if a.window != nil {
			a.window.give(float64(a.n))
		}
	}
}
