package llmsim

import (
	"math"
	"math/rand/v2"
	"time"
)

// LatencyDistribution names how Latency draws the random part of a delay.
type LatencyDistribution string

// The distributions. Each is scaled by Latency.Jitter.
const (
	// LatencyUniform draws uniformly from [0, Jitter): delays in
	// [Fixed, Fixed+Jitter), mean Fixed+Jitter/2. The empty
	// LatencyDistribution means this.
	LatencyUniform LatencyDistribution = "uniform"
	// LatencyNormal draws from a normal distribution with mean 0 and
	// standard deviation Jitter: delays centred on Fixed. A delay that
	// would be negative is 0.
	LatencyNormal LatencyDistribution = "normal"
	// LatencyExponential draws from an exponential distribution with mean
	// Jitter: delays of at least Fixed, mean Fixed+Jitter, with the long
	// tail of real provider latency.
	LatencyExponential LatencyDistribution = "exponential"
)

// latencyDistributions lists the distributions, as validation errors name
// them.
const latencyDistributions = `"uniform", "normal" or "exponential"`

// Latency delays each successful answer by Fixed plus a random part drawn
// from Distribution and scaled by Jitter, from the Sim's random source
// (Config.Seed), so a seed repeats the same delays. Delays use real time (not
// the Clock) and end early if the caller goes away. The zero Latency answers
// at once.
type Latency struct {
	// Fixed is the delay every answer gets (for LatencyNormal, the mean).
	// Not negative.
	Fixed time.Duration `json:"fixed" yaml:"fixed"`
	// Jitter scales the random part: the width of the uniform range, the
	// normal standard deviation or the exponential mean. Zero means no
	// random part, and then Distribution must be empty.
	Jitter time.Duration `json:"jitter" yaml:"jitter"`
	// Distribution is LatencyUniform, LatencyNormal or LatencyExponential;
	// empty means LatencyUniform.
	Distribution LatencyDistribution `json:"distribution" yaml:"distribution"`
}

func (l Latency) validate(field string) error {
	if l.Fixed < 0 {
		return configErr(field+".fixed", l.Fixed.String(), "is negative", "use 0 or a positive duration such as 20ms")
	}
	if l.Jitter < 0 {
		return configErr(field+".jitter", l.Jitter.String(), "is negative", "use 0 or a positive duration such as 10ms")
	}
	switch l.Distribution {
	case "", LatencyUniform, LatencyNormal, LatencyExponential:
	default:
		return configErr(field+".distribution", string(l.Distribution), "is not a known distribution",
			"use "+latencyDistributions+", or leave it empty for uniform")
	}
	if l.Distribution != "" && l.Jitter == 0 {
		return configErr(field+".jitter", "0s", "is zero with distribution "+string(l.Distribution),
			"set the spread the distribution is scaled by, e.g. 10ms, or remove the distribution for a fixed delay")
	}
	return nil
}

// delay draws one answer's delay from rng.
func (l Latency) delay(rng *rand.Rand) time.Duration {
	if l.Jitter <= 0 {
		return l.Fixed
	}
	j := float64(l.Jitter)
	var extra float64
	switch l.Distribution {
	case LatencyNormal:
		extra = rng.NormFloat64() * j
	case LatencyExponential:
		extra = rng.ExpFloat64() * j
	default:
		return l.Fixed + time.Duration(rng.Int64N(int64(l.Jitter)))
	}
	d := float64(l.Fixed) + extra
	switch {
	case d <= 0:
		return 0
	case d >= math.MaxInt64:
		return math.MaxInt64
	}
	return time.Duration(d)
}
