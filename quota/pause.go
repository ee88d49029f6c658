package quota

// PauseReason says why a key is paused (Store.Pause). A Store keeps it as
// its text, which every release writes alike.
type PauseReason string

// The reasons a key is paused for.
const (
	// PauseRateLimited is a provider's rate limit (429) on a call the Store
	// granted: besides pausing the key, it teaches the key's Margin.
	PauseRateLimited PauseReason = "provider rate_limited"
	// PauseOverloaded is a provider's overload answer (503, 529): a pause
	// for the provider's sake that teaches nothing.
	PauseOverloaded PauseReason = "provider overloaded"
	// PauseSpendCap and PauseDailyQuota close the key until the account's
	// spend cap or the provider's daily quota resets.
	PauseSpendCap   PauseReason = "spend_cap"
	PauseDailyQuota PauseReason = "daily_quota"
)

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
	return invalid("reason", string(r), "is not a pause reason",
		"use quota.PauseRateLimited, PauseOverloaded, PauseSpendCap or PauseDailyQuota")
}
