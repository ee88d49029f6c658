package quota

import (
	"math"
	"strconv"
	"time"
)

// Defaults for Calibration's zero fields.
const (
	// DefaultMinRatio is the lowest estimate ratio learned: a provider that
	// counts half of what was estimated.
	DefaultMinRatio = 0.5
	// DefaultMaxRatio is the highest estimate ratio learned: code, JSON and
	// non-Latin text run up to about four times characters/4.
	DefaultMaxRatio = 4.0
	// DefaultRatioHalfLife is how long a learned ratio takes to come halfway
	// back to 1 when no answer refreshes it.
	DefaultRatioHalfLife = time.Hour
)

// Calibration is how a Store learns, per key, the ratio between the prompt
// tokens a provider counts and the ones estimated before the call
// (Reservation.Prompt), and applies it to later estimates of that key. A
// provider's tokenizer is not characters/4: prose runs 10–30 % over it, code
// and other scripts up to four times. The zero value learns, with the
// defaults above; the ratio lives in the store, so every replica sharing it
// estimates alike and a restarted worker starts calibrated.
type Calibration struct {
	// Off charges estimates as given and learns nothing.
	Off bool
	// MinRatio and MaxRatio bound the ratio learned; zero means
	// DefaultMinRatio and DefaultMaxRatio. 0 < MinRatio ≤ 1 ≤ MaxRatio.
	MinRatio, MaxRatio float64
	// HalfLife is how long a ratio no answer refreshes takes to come halfway
	// back to 1; zero means DefaultRatioHalfLife.
	HalfLife time.Duration
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Calibration) WithDefaults() Calibration {
	if c.MinRatio == 0 {
		c.MinRatio = DefaultMinRatio
	}
	if c.MaxRatio == 0 {
		c.MaxRatio = DefaultMaxRatio
	}
	if c.HalfLife == 0 {
		c.HalfLife = DefaultRatioHalfLife
	}
	return c
}

// Validate reports an *InvalidError naming the first bad field of c, or nil.
func (c Calibration) Validate() error {
	d := c.WithDefaults()
	ratio := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	switch {
	case math.IsNaN(d.MinRatio) || d.MinRatio <= 0 || d.MinRatio > 1:
		return invalid("calibration.min_ratio", ratio(c.MinRatio), "is not in (0, 1]", "use e.g. 0.5, or 0 for the default")
	case math.IsNaN(d.MaxRatio) || math.IsInf(d.MaxRatio, 0) || d.MaxRatio < 1:
		return invalid("calibration.max_ratio", ratio(c.MaxRatio), "is below 1 or not finite", "use e.g. 4, or 0 for the default")
	case d.HalfLife < time.Second:
		return invalid("calibration.half_life", c.HalfLife.String(), "is below 1s", "use e.g. 1h, or 0 for the default")
	}
	return nil
}

// Calibrated reports whether a key's estimate ratio applies to axis: the
// axes that count a prompt's tokens (Tokens, InputTokens, TokensPerDay).
func (a Axis) Calibrated() bool {
	return a == Tokens || a == InputTokens || a == TokensPerDay
}

// Calibrate returns cost with its prompt part scaled by ratio: on each axis
// that counts the prompt (Tokens and InputTokens, charged at least prompt),
// prompt estimated tokens become ceil(ratio × prompt). Tokens never falls
// below OutputTokens (what a provider that counts max(max_tokens, prompt)
// charges at least). With ratio 1 or no prompt, cost is returned as is.
func Calibrate(cost Cost, prompt int64, ratio float64) Cost {
	if prompt <= 0 || ratio == 1 {
		return cost
	}
	scaled := int64(math.Ceil(ratio * float64(prompt)))
	if cost.InputTokens >= prompt {
		cost.InputTokens += scaled - prompt
	}
	if cost.Tokens >= prompt {
		cost.Tokens = max(cost.Tokens+scaled-prompt, cost.OutputTokens)
	}
	return cost
}
