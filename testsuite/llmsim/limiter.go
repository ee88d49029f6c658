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
type limiter struct {
	requests, tokens, input, output *bucket
	daily                           *dailyWindow
}

func newLimiter(m Model, now time.Time) *limiter {
	period := m.Period
	if period == 0 {
		period = time.Minute
	}
	return &limiter{
		requests: newBucket(m.RequestsPerMinute, period, now),
		tokens:   newBucket(m.TokensPerMinute, period, now),
		input:    newBucket(m.InputTokensPerMinute, period, now),
		output:   newBucket(m.OutputTokensPerMinute, period, now),
		daily:    newDailyWindow(m.RequestsPerDay, dayZone(m.Provider), now),
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
	for _, b := range [...]*bucket{l.requests, l.tokens, l.input, l.output} {
		if b != nil {
			b.refill(now)
		}
	}
	if l.daily != nil {
		l.daily.roll(now)
	}
}

// admit charges c on every axis if it fits on all of them, or charges nothing
// and says why not.
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
	for _, a := range [...]struct {
		name string
		b    *bucket
		n    int64
	}{
		{axisRequests, l.requests, c.requests}, {axisTokens, l.tokens, c.tokens},
		{axisInputTokens, l.input, c.input}, {axisOutputTokens, l.output, c.output},
	} {
		if a.b == nil {
			continue
		}
		if w, ok := a.b.wait(float64(a.n)); !ok || w > 0 {
			consider(refusal{axis: a.name, limit: int64(a.b.capacity), requested: a.n, wait: w, never: !ok})
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
	for _, a := range [...]struct {
		b *bucket
		n int64
	}{{l.requests, c.requests}, {l.tokens, c.tokens}, {l.input, c.input}, {l.output, c.output}} {
		if a.b != nil {
			a.b.take(float64(a.n))
		}
	}
	if l.daily != nil {
		l.daily.take(c.requests)
	}
	return nil
}

// refund gives c back to every bucket, never above its capacity.
func (l *limiter) refund(c cost) {
	for _, a := range [...]struct {
		b *bucket
		n int64
	}{{l.requests, c.requests}, {l.tokens, c.tokens}, {l.input, c.input}, {l.output, c.output}} {
		if a.b != nil && a.n > 0 {
			a.b.level = min(a.b.capacity, a.b.level+float64(a.n))
		}
	}
}
