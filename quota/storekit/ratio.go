package storekit

import (
	"math"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/tune"
)

// How a learned ratio follows its samples: at once up to a sample confirmed
// by another (the median of the last three), slowly down to the highest of
// the last three, tune.RatioFall of the way per sample. Erring high costs a
// little goodput; erring low costs the provider's 429s.
const ratioFall = tune.RatioFall

// Ratio is a key's learned estimate ratio: what its provider counts per
// estimated prompt token (see quota.Calibration). The zero value is
// uncalibrated (a ratio of 1).
type Ratio struct {
	// Value is the ratio as of At.
	Value float64
	// Recent are the last two samples, newest first (0: none yet).
	Recent [2]float64
	// At is when Value was last learned.
	At time.Time
}

// ValueAt returns r's value at now: Value, come back toward 1 by one half for
// every HalfLife since r was learned, within c's bounds. An unlearned Ratio
// is 1. c has its defaults filled in (quota.Calibration.WithDefaults).
func (r Ratio) ValueAt(c quota.Calibration, now time.Time) float64 {
	if r.Value == 0 {
		return 1
	}
	v := r.Value
	if age := now.Sub(r.At); age > 0 {
		v = 1 + (v-1)*math.Exp2(-float64(age)/float64(c.HalfLife))
	}
	return min(max(v, c.MinRatio), c.MaxRatio)
}

// Learn returns r after one sample, the provider's count over the prompt's
// estimate, observed at now. With the last two samples (missing ones stand
// at the current value), the ratio rises at once to their median, when that
// is higher, and otherwise falls by ratioFall of the way to their highest,
// when that is lower: a single wild answer, high or low, moves nothing, and
// the ratio tracks the top of what the provider counts, not its middle.
func (r Ratio) Learn(c quota.Calibration, sample float64, now time.Time) Ratio {
	cur := r.ValueAt(c, now)
	s := min(max(sample, c.MinRatio), c.MaxRatio)
	p1, p2 := r.Recent[0], r.Recent[1]
	if p1 == 0 {
		p1 = cur
	}
	if p2 == 0 {
		p2 = cur
	}
	v := cur
	if m := median3(s, p1, p2); m > cur {
		v = m
	} else if hi := max(s, p1, p2); hi < cur {
		v = cur + ratioFall*(hi-cur)
	}
	if now.Before(r.At) {
		now = r.At
	}
	return Ratio{Value: min(max(v, c.MinRatio), c.MaxRatio), Recent: [2]float64{s, r.Recent[0]}, At: now}
}

func median3(a, b, c float64) float64 {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}
