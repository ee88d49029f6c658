package classify

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// DefaultMaxRetryAfter is the longest Retry-After a Classifier reports when
// its MaxRetryAfter is zero: a hostile or broken hint cannot freeze work for
// longer.
const DefaultMaxRetryAfter = 60 * time.Second

// Verdict is what a provider's answer means.
type Verdict struct {
	// Class is what happened.
	Class Class
	// Retryable says whether trying the same call again may succeed. It is
	// Class.Retryable() unless the provider's x-should-retry header said
	// otherwise (see Classifier.Response).
	Retryable bool
	// RetryAfter is how long the provider asked the caller to wait, capped
	// at the Classifier's MaxRetryAfter; zero when HasRetryAfter is false or
	// when the provider's time has already passed.
	RetryAfter time.Duration
	// HasRetryAfter reports whether the provider gave a usable hint
	// (retry-after-ms, retry-after, or Gemini's RetryInfo.retryDelay).
	HasRetryAfter bool
	// ResetAt is, for SpendCap and DailyQuota, when the key reopens; zero
	// when the provider's reset is unknown (credits exhausted, a billing
	// problem): such a key waits for a human.
	ResetAt time.Time
	// Axis is the limit a rate-limit answer names in its body, for
	// RateLimited and DailyQuota: quota.Requests, Tokens, InputTokens or
	// OutputTokens per minute ("requests per min (RPM)", "50,000 input
	// tokens per minute", Gemini's ..._input_token_count metric), or
	// RequestsPerDay or TokensPerDay ("requests per day (RPD)", a PerDay
	// QuotaFailure). Zero when the body names no axis ("would exceed the
	// rate limit for your organization", a bare 429) or the answer is not a
	// rate limit.
	Axis quota.Axis
	// Limits are the provider's reported limits per axis, from the
	// response's headers, ready for quota.Store.Observe; nil when none.
	Limits []quota.Observation
	// Status is the HTTP status, or 0 when there was no HTTP answer.
	Status int
	// Code is the provider's most specific machine-readable error code
	// (e.g. "enforced_spend_limit_reached", "rate_limit_exceeded",
	// "RESOURCE_EXHAUSTED"), or "" when none was given.
	Code string
	// Reason is a short human-readable explanation: the provider's message
	// with anything that looks like a credential masked, cut to at most
	// MaxReasonLen bytes; or a fixed phrase for transport errors.
	Reason string
}

// Classifier turns provider answers into Verdicts. Its zero value is ready to
// use with the documented defaults; it holds no state and is safe for
// concurrent use.
type Classifier struct {
	// MaxRetryAfter caps Verdict.RetryAfter. Zero or negative means
	// DefaultMaxRetryAfter (60 s).
	MaxRetryAfter time.Duration
}

func (c Classifier) maxRetryAfter() time.Duration {
	if c.MaxRetryAfter <= 0 {
		return DefaultMaxRetryAfter
	}
	return c.MaxRetryAfter
}

// Response classifies an HTTP answer with the zero Classifier; see
// Classifier.Response.
func Response(status int, header http.Header, body []byte, now time.Time) Verdict {
	return Classifier{}.Response(status, header, body, now)
}

// Error classifies an error with the zero Classifier; see Classifier.Error.
func Error(err error, now time.Time) Verdict {
	return Classifier{}.Error(err, now)
}
