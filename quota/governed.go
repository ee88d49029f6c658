package quota

// Charge is what a governed call asks of a Store: the key it is metered
// under, its estimated cost and its priority.
type Charge struct {
	Key      Key
	Cost     Cost
	Priority Priority
	// Prompt is how many of Cost's tokens are the prompt's, estimated before
	// tokenizing (e.g. characters/4); the store calibrates them (see
	// Reservation.Prompt). Zero charges Cost as it is.
	Prompt int64
}

// Governed is implemented by the input of an activity whose calls are
// metered (for example activities.Request). The interceptor calls QuotaCharge
// before each attempt; an error fails the attempt non-retryably, since the
// same input will always give the same error.
type Governed interface {
	QuotaCharge() (Charge, error)
}

// Metered is implemented by the result of a governed activity that knows what
// the call actually cost (for example activities.Response, from the
// provider's usage block). The interceptor settles the grant with it; a
// result that does not implement it is settled at the estimate.
type Metered interface {
	QuotaUsage() Cost
}

// CountedPrompt is implemented by a Metered result that knows which part
// of its prompt the provider counted in QuotaUsage().InputTokens, where
// that is not what its reservation's Prompt estimated: a call whose prompt
// cache read more of the prompt, or less, than its estimate expected.
// QuotaPrompt returns the estimate, in Charge.Prompt's units (before
// calibration), of the part counted; the interceptor settles with it as
// Settlement.Prompt, so calibration compares like with like. Zero keeps the
// reservation's Prompt.
type CountedPrompt interface {
	Metered
	QuotaPrompt() int64
}
