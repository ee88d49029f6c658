package quota

import "strings"

// PauseReason says why a key is paused (Store.Pause). A Store keeps it as
// its text, which every release writes alike.
type PauseReason string

// The reasons a key is paused for.
const (
	// PauseRateLimited is a provider's rate limit (429) on a call the Store
	// granted: besides pausing the key, it teaches the Margin of every
	// bucket axis of the key. When the provider named the limit it
	// enforced, RateLimitedOn teaches that axis alone.
	PauseRateLimited PauseReason = "provider rate_limited"
	// PauseOverloaded is a provider's overload answer (503, 529): a pause
	// for the provider's sake that teaches nothing.
	PauseOverloaded PauseReason = "provider overloaded"
	// PauseSpendCap and PauseDailyQuota close the key until the account's
	// spend cap or the provider's daily quota resets.
	PauseSpendCap   PauseReason = "spend_cap"
	PauseDailyQuota PauseReason = "daily_quota"
)

// rateLimitedOn prefixes the axis a RateLimitedOn reason names.
const rateLimitedOn = PauseRateLimited + " on "

// RateLimitedOn is PauseRateLimited for a 429 that named the limit the
// provider enforced (classify.Verdict.Axis): it teaches the Margin of axis
// alone, so that a lesson on the request axis leaves the token axes' pace
// as it was. For an axis that is not a bucket (zero, a daily window) it is
// PauseRateLimited, which teaches every bucket axis.
func RateLimitedOn(axis Axis) PauseReason {
	if axis.Kind() != Bucket {
		return PauseRateLimited
	}
	return rateLimitedOn + PauseReason(axis.String())
}

// Lesson reports whether the reason is a provider's rate limit, which
// teaches a key's Margin, and the bucket axis it teaches; zero for
// PauseRateLimited, which teaches every one.
func (r PauseReason) Lesson() (Axis, bool) {
	if r == PauseRateLimited {
		return 0, true
	}
	name, ok := strings.CutPrefix(string(r), string(rateLimitedOn))
	if !ok {
		return 0, false
	}
	a, err := ParseAxis(name)
	if err != nil || a.Kind() != Bucket {
		return 0, false
	}
	return a, true
}

// Closes reports whether the reason closes the key until a reset: waiting
// for the pause to end is the only remedy, so callers fail or fall back
// instead of queueing.
func (r PauseReason) Closes() bool { return r == PauseSpendCap || r == PauseDailyQuota }

// Validate reports an *InvalidError for a reason other than the ones above.
func (r PauseReason) Validate() error {
	switch r {
	case PauseRateLimited, PauseOverloaded, PauseSpendCap, PauseDailyQuota:
		return nil
	}
	if _, ok := r.Lesson(); ok {
		return nil
	}
	return invalid("reason", string(r), "is not a pause reason",
		"use quota.PauseRateLimited, RateLimitedOn(axis) for a bucket axis, PauseOverloaded, PauseSpendCap or PauseDailyQuota")
}
