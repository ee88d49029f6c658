package quota

import (
	"math"
	"time"
)

// How calls start: the burst and the learned margin.
//
// A provider's "60 requests per minute" does not promise 60 at once: OpenAI
// and Anthropic document that a per-minute limit may be enforced over
// shorter periods (60 RPM as one request per second), Azure OpenAI
// evaluates its per-minute limits over 1 s or 10 s windows. So a bucket's
// level holds only its Limit.Burst (by default a second's worth of a
// per-minute limit): a call needs its cost, or the whole burst for a call
// larger, and the level runs into debt for it, so the rest follow at the
// limit's rate. And a Store spaces the starts of calls, not only their
// charges: every bucket axis of an account has a start gate of the same
// burst and rate, charged when a call is granted, as of the time it
// starts. A grant's Decision.Start says how long its call should wait
// before it reaches the provider, whatever time its place matured at:
// calls that waited for a concurrency slot, for a place in line or for a
// pause to end leave at the pace of the gate, not together. A grant the
// gate starts later owes its buckets that wait, so the line never runs
// ahead of the starts (a bucket earns every axis back at once while a call
// waits on one, which a provider's short window does not).
//
// The gate is a model of the provider's limiter, and a 429 on a call the
// Store granted shows that model wrong (the provider's window is shorter,
// or its clock and ours drift). Pause with RateLimitedPause teaches the
// key's Margin: its burst and rate shrink multiplicatively, at most once
// per pause, down to MinBurstMargin and MinRateMargin; each call settled
// with its usage counted earns a little of both back. The margin lives in
// the Store with the levels, so every replica shares it and a restart
// keeps it. Spend caps, daily quotas and overloads teach it nothing.

// DefaultBurstShare is the share of a bucket's period that Limit.Burst
// means when zero: 1/60, one second's worth of a per-minute limit, as the
// providers document a per-minute limit may be enforced.
const DefaultBurstShare = 60

// RateLimitedPause is the reason to give Pause for a provider's rate limit
// (429) on a call the Store granted: besides pausing the key, it teaches
// the key's Margin.
const RateLimitedPause = "provider rate_limited"

// The learned margin's bounds and steps (see Margin).
const (
	// MinBurstMargin and MinRateMargin are the least fractions of a
	// bucket's burst and rate a key's margin can shrink to.
	MinBurstMargin = 1.0 / 16
	MinRateMargin  = 0.8
	// BurstCut and RateCut multiply a key's margin on a lesson.
	BurstCut = 0.5
	RateCut  = 0.98
	// BurstGain and RateGain are what each call settled with its usage
	// counted adds back, up to 1.
	BurstGain = 1.0 / 200
	RateGain  = 1.0 / 20000
)

// Margin is what a key has learned of its provider's limiter: the fractions
// of every bucket's burst and rate it may use, each in [MinBurstMargin, 1]
// and [MinRateMargin, 1]. The zero Margin is none learned, and means 1 for
// both (see OrNone).
type Margin struct {
	Burst, Rate float64
}

// NoMargin is a key's margin before any lesson.
var NoMargin = Margin{Burst: 1, Rate: 1}

// OrNone returns m, or NoMargin for the zero Margin.
func (m Margin) OrNone() Margin {
	if m == (Margin{}) {
		return NoMargin
	}
	return m
}

// Cut returns m after a lesson: both parts multiplied by their cut,
// never below their bounds.
func (m Margin) Cut() Margin {
	m = m.OrNone()
	return Margin{Burst: math.Max(MinBurstMargin, m.Burst*BurstCut), Rate: math.Max(MinRateMargin, m.Rate*RateCut)}
}

// Gain returns m after a call that went well: both parts raised by their
// gain, never above 1.
func (m Margin) Gain() Margin {
	m = m.OrNone()
	return Margin{Burst: math.Min(1, m.Burst+BurstGain), Rate: math.Min(1, m.Rate+RateGain)}
}

// BurstTime returns how much of the limit's period may start at once:
// Burst, or Period/DefaultBurstShare when Burst is zero. Zero for other
// kinds than Bucket.
func (l Limit) BurstTime() time.Duration {
	if l.Axis.Kind() != Bucket {
		return 0
	}
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Period / DefaultBurstShare
}

// WithBurst returns l with its Burst set to d: at most d's worth of the
// limit starts at once (see Limit.Burst). WithBurst(l.Period) lets the
// whole limit start at once.
func (l Limit) WithBurst(d time.Duration) Limit {
	l.Burst = d
	return l
}

// Gate is the start gate of a bucket whose effective capacity is capacity
// per period, at margin m: the units that may start at once (burst) and
// their refill rate in units per second.
func (l Limit) Gate(capacity int64, m Margin) (burst, rate float64) {
	m = m.OrNone()
	rate = float64(capacity) / l.Period.Seconds() * m.Rate
	burst = float64(capacity) * (float64(l.BurstTime()) / float64(l.Period)) * m.Burst
	return burst, rate
}
