package storekit

import (
	"math"

	"github.com/tollgate/tollgate/quota"
)

// The learned margin's bounds and steps (see quota.Margin).
const (
	// MinBurstMargin and MinRateMargin are the least multiple of a
	// bucket's burst and fraction of its rate a key's margin can shrink
	// to.
	MinBurstMargin = 1.0 / 16
	MinRateMargin  = 0.8
	// BurstCut and RateCut multiply a key's margin on a lesson.
	BurstCut = 0.5
	RateCut  = 0.98
	// BurstGrowth multiplies the burst margin on each call settled with
	// its usage counted while the provider has refused no burst (slow
	// start: from a second's worth to the whole minute in 43 calls), or
	// while the burst is under BurstRecover of the one it last refused;
	// BurstProbe multiplies it above that, so that a key back from a
	// lesson probes the burst refused after about 450 calls.
	BurstGrowth  = 1.1
	BurstProbe   = 1.0005
	BurstRecover = 0.8
	// RateGain is what each call settled with its usage counted adds back
	// to the rate margin, up to 1.
	RateGain = 1.0 / 20000
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

// MaxBurst is the most p's burst margin grows to: its buckets' whole
// periods (every Limit.Burst left to its default, a 60th of the period),
// or 1 when any bucket's burst is set by hand, which is then the most that
// may start at once.
func MaxBurst(p quota.Policy) float64 {
	top := 1.0
	for _, l := range p.Limits {
		if l.Axis.Kind() != quota.Bucket {
			continue
		}
		if l.Burst > 0 {
			return 1
		}
		top = math.Max(top, float64(l.Period)/float64(l.BurstTime()))
	}
	return top
}

// Cut returns m after a lesson (a provider's 429 on a granted call): both
// parts multiplied by their cut, never below their bounds, and the burst
// the provider refused remembered.
func Cut(m quota.Margin) quota.Margin {
	m = OrNone(m)
	return quota.Margin{Burst: math.Max(MinBurstMargin, m.Burst*BurstCut), Rate: math.Max(MinRateMargin, m.Rate*RateCut), Refused: m.Burst}
}

// Gain returns m after a call that went well: the burst grown by
// BurstGrowth, or by BurstProbe from BurstRecover of the burst last refused, never
// above top (MaxBurst); the rate raised by RateGain, never above 1.
func Gain(m quota.Margin, top float64) quota.Margin {
	m = OrNone(m)
	grow := BurstGrowth
	if m.Refused > 0 && m.Burst >= BurstRecover*m.Refused {
		grow = BurstProbe
	}
	m.Burst = math.Max(m.Burst, math.Min(top, m.Burst*grow))
	m.Rate = math.Min(1, m.Rate+RateGain)
	return m
}

// Cautious returns the most cautious of ms (none learned counting as
// NoMargin): the least burst and the least rate, with the burst refused of
// the margin whose burst is least. It is what a Snapshot reports as its
// key's Margin, and NoMargin for none.
func Cautious(ms ...quota.Margin) quota.Margin {
	out := NoMargin
	for i, m := range ms {
		m = OrNone(m)
		if i == 0 || m.Burst < out.Burst {
			out.Burst, out.Refused = m.Burst, m.Refused
		}
		out.Rate = math.Min(out.Rate, m.Rate)
	}
	return out
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
