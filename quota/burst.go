package quota

import "time"

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
// The gate is a model of the provider's limiter, learned as the key
// goes. Its burst starts at Limit.Burst (a second's worth of a per-minute
// limit, which every provider's documented enforcement takes), and each
// call settled with its usage counted grows it, 10 % a call, toward the
// whole period: against a provider that enforces only the minute, calls of
// mixed sizes then use its limit on every axis, where a second's burst
// paces them apart. A 429 on a call the Store granted shows the model
// wrong (the provider's window is shorter than the burst, or its clock
// and ours drift). Pause with PauseRateLimited teaches the Margin of each
// of the key's bucket axes (RateLimitedOn teaches one axis its own):
// its burst is halved and its rate cut a little, at most once per pause,
// down to bounds (see package storekit), and the burst refused is
// remembered: the burst grows back quickly to 80 % of it and by probes
// above, 0.05 % a call, so one outlier costs a short dip, not the key, and
// a key at its provider's window meets the next 429 hundreds of calls
// later. A burst set by hand is the provider's shape as its user knows it:
// learning never grows past it. The margin lives in the Store with the
// levels, so every replica shares it and a restart keeps it. Spend caps,
// daily quotas and overloads teach it nothing.

// defaultBurstShare is the part of a bucket's period that Limit.Burst
// means when zero: 1/60, one second's worth of a per-minute limit, as the
// providers document a per-minute limit may be enforced. It is where a
// key's learning starts: its Margin's burst grows from there to the whole
// period while the provider takes what it is sent.
const defaultBurstShare = 60

// Margin is what a key has learned of its provider's limiter: Burst, the
// multiple of every bucket's Limit.BurstTime that may start at once (at
// most the whole period, or 1 when a burst is set by hand), and Rate, the
// fraction of every bucket's rate it may use, in (0, 1]; Refused is the
// Burst the provider last refused a call at, 0 before any. The zero Margin
// is none learned, and means 1 for Burst and Rate. The bounds and steps of
// its learning are package storekit's.
type Margin struct {
	Burst, Rate, Refused float64
}

// BurstTime returns how much of the limit's period may start at once:
// Burst, or Period/defaultBurstShare when Burst is zero. Zero for other
// kinds than Bucket.
func (l Limit) BurstTime() time.Duration {
	if l.Axis.Kind() != Bucket {
		return 0
	}
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Period / defaultBurstShare
}

// WithBurst returns l with its Burst set to d: at most d's worth of the
// limit starts at once (see Limit.Burst). WithBurst(l.Period) lets the
// whole limit start at once.
func (l Limit) WithBurst(d time.Duration) Limit {
	l.Burst = d
	return l
}
