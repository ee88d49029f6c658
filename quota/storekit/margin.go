package storekit

import (
	"math"

	"github.com/tollgate/tollgate/quota"
)

// The learned margin's bounds and steps (see quota.Margin).
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

// NoMargin is a key's margin before any lesson.
var NoMargin = quota.Margin{Burst: 1, Rate: 1}

// OrNone returns m, or NoMargin for the zero Margin.
func OrNone(m quota.Margin) quota.Margin {
	if m == (quota.Margin{}) {
		return NoMargin
	}
	return m
}

// Cut returns m after a lesson (a provider's 429 on a granted call): both
// parts multiplied by their cut, never below their bounds.
func Cut(m quota.Margin) quota.Margin {
	m = OrNone(m)
	return quota.Margin{Burst: math.Max(MinBurstMargin, m.Burst*BurstCut), Rate: math.Max(MinRateMargin, m.Rate*RateCut)}
}

// Gain returns m after a call that went well: both parts raised by their
// gain, never above 1.
func Gain(m quota.Margin) quota.Margin {
	m = OrNone(m)
	return quota.Margin{Burst: math.Min(1, m.Burst+BurstGain), Rate: math.Min(1, m.Rate+RateGain)}
}

// Gate is the start gate of bucket limit l whose effective capacity is
// capacity per period, at margin m: the units that may start at once
// (burst) and their refill rate in units per second.
func Gate(l quota.Limit, capacity int64, m quota.Margin) (burst, rate float64) {
	m = OrNone(m)
	rate = float64(capacity) / l.Period.Seconds() * m.Rate
	burst = float64(capacity) * (float64(l.BurstTime()) / float64(l.Period)) * m.Burst
	return burst, rate
}
