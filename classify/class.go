package classify

import "strconv"

// Class is what a provider's answer means for the call that got it. The zero
// Class is Unknown.
type Class uint8

// The classes.
const (
	// Unknown: the answer says nothing classify recognizes (an error that is
	// neither an HTTP answer nor a transport failure, or a 1xx/3xx status).
	// Classify has no opinion; leave the error to the activity's own retry
	// policy.
	Unknown Class = iota
	// OK: a 2xx answer.
	OK
	// RateLimited: the account is over a rate limit (429 rate_limit_error,
	// rate_limit_exceeded, RESOURCE_EXHAUSTED per minute). Retry after the
	// hint.
	RateLimited
	// Overloaded: the provider is short of capacity for everyone (503, 529
	// overloaded_error, server_is_overloaded, UNAVAILABLE). Treated like
	// RateLimited, under its own label.
	Overloaded
	// SpendCap: a spend, credit or billing limit is reached. Terminal until
	// Verdict.ResetAt, or until a human acts when ResetAt is zero.
	SpendCap
	// DailyQuota: a per-day quota is spent (Gemini RESOURCE_EXHAUSTED with a
	// PerDay QuotaFailure violation). Terminal until Verdict.ResetAt.
	DailyQuota
	// Transient: the call failed for a reason that may not recur: 408, 409,
	// 5xx other than overload, connection resets, timeouts.
	Transient
	// ContextTooLong: the request does not fit the model's context window.
	// Retrying the same request cannot succeed.
	ContextTooLong
	// BadRequest: the provider rejected the request (other 4xx).
	BadRequest
	// Auth: the key is missing, wrong, revoked or lacks permission (401, 403).
	Auth
	// NotFound: the model or resource does not exist (404).
	NotFound
	// Canceled: the caller gave up (context.Canceled).
	Canceled

	numClasses = int(Canceled) + 1
)

var classNames = [numClasses]string{
	Unknown:        "unknown",
	OK:             "ok",
	RateLimited:    "rate_limited",
	Overloaded:     "overloaded",
	SpendCap:       "spend_cap",
	DailyQuota:     "daily_quota",
	Transient:      "transient",
	ContextTooLong: "context_too_long",
	BadRequest:     "bad_request",
	Auth:           "auth",
	NotFound:       "not_found",
	Canceled:       "canceled",
}

// String returns the class's name as used in metrics and logs
// ("rate_limited", "spend_cap", …), or "class(N)" for an undefined value.
func (c Class) String() string {
	if int(c) < numClasses {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Retryable reports whether a call that ended in this class may succeed if
// tried again as it is: true for RateLimited, Overloaded and Transient. A
// Verdict's own Retryable field starts from this and may be overridden by the
// provider's x-should-retry header.
func (c Class) Retryable() bool {
	switch c {
	case RateLimited, Overloaded, Transient:
		return true
	}
	return false
}

// Throttled reports whether the class means the provider pushed back on
// volume (RateLimited or Overloaded): such failures honour the provider's
// Retry-After and count toward rate-limit escalation, not the transient-error
// budget.
func (c Class) Throttled() bool { return c == RateLimited || c == Overloaded }

// Terminal reports whether the key is closed until a reset (SpendCap,
// DailyQuota): every call on the key will fail the same way until
// Verdict.ResetAt.
func (c Class) Terminal() bool { return c == SpendCap || c == DailyQuota }
